"""The pipeline kinds: how a ``pipeline:`` composes a model's engines into one served model,
one package per kind with its parts side by side, registered in
:data:`mmaas.core.pipelines.PIPELINES`:

* ``ensemble``: engines run as steps wired by tensor names (Triton's ensemble scheduling);
  ``spec`` (settings, wiring checks, signature) and ``runtime`` (the executor).
* ``qwen2_vl``: Qwen2-VL generation over a vision and a language engine; ``spec``,
  ``runtime``, ``config`` (runtime.json, the type its converter writes and its runtime
  reads), ``convert`` (the checkpoint and tokenizer; ``mmaas convert qwen2-vl``) and
  ``export`` (torch -> ONNX graphs, validation against transformers, side files).

Nothing here or in a kind's ``__init__`` imports anything: a runtime image imports only
its kinds' runtime parts (and what they import), the host only the spec parts, and only
``mmaas convert`` imports torch and transformers.
"""
