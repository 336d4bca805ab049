"""The runtime parts of the pipeline kinds (:class:`mmaas.server.pipeline.PipelineRuntime`),
one module per kind, registered in :data:`mmaas.core.pipelines.PIPELINES`."""
