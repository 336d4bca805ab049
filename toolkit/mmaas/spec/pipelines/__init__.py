"""The spec parts of the pipeline kinds (:class:`mmaas.spec.pipeline.PipelineKind`), one
module per kind, registered in :data:`mmaas.core.pipelines.PIPELINES`."""
