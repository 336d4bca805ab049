"""The Qwen2-VL export behind ``scripts/export_qwen_vl.py`` (build side: torch, transformers).

One module per step: ``tokenizer`` (the small checkpoint's byte-level BPE with Qwen2-VL's
special tokens), ``checkpoint`` (the small random seeded checkpoint folder, or a real one
copied in), ``vision`` and ``language`` (the two graphs), ``side_files`` (embedding table,
tokenizer, runtime.json with the chat template pre-rendered), ``validate`` (each graph
against transformers over its profile), ``reference`` (transformers' own pipeline, for tests
and the benchmark), ``onnx_io`` (atomic writes of graphs and files).
"""
