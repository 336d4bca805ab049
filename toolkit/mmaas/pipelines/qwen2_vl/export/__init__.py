"""The qwen2-vl export part (host side, under ``mmaas convert qwen2-vl``; imports torch and
transformers): from a loaded checkpoint to the files of a model directory.

One module per step: ``vision`` and ``language`` (the two graphs, torch -> ONNX),
``validate`` (each graph and the tokenizer against transformers), ``side_files``
(embed_tokens.npy, tokenizer.json, runtime.json with the chat template pre-rendered),
``spec_file`` (model.yaml and the served profile it is built for), ``onnx_io`` (atomic
writes of graphs and files), ``reference`` (transformers' own generation, which tests and the
benchmark compare the runtime with).
"""
