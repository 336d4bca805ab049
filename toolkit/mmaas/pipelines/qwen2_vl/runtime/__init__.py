"""The ``qwen2-vl`` pipeline kind's runtime part: a picture and a question in, the answer out,
streamed token by token, on the compiled ``vision`` and ``language`` engines alone (numpy,
the back end, Pillow, tokenizers; no torch, transformers or jinja2), token for token what
transformers' ``Qwen2VLForConditionalGeneration.generate`` gives on the same checkpoint.

Modules, in request order: ``request`` (Triton's LLM interface), ``images`` (decode and
preprocessing), ``prompt`` (chat template, tokens, M-RoPE), ``sampling``, ``generation``
(prefill and decode steps), ``scheduler`` (continuous batching on the engine thread),
``executor`` (the served model's Executor / Decoupled), ``limits`` (the engines' profile
limits), ``vision_check`` (the raw vision engine's request check), ``pipeline`` (the kind's
PipelineRuntime: bring-up and warm-up). runtime.json is read as
:class:`mmaas.pipelines.qwen2_vl.config.RuntimeConfig`.
"""
