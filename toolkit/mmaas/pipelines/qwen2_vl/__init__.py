"""The ``qwen2-vl`` pipeline kind: Qwen2-VL as a service, a picture and a question in, the
answer out, streamed token by token, on a compiled ``vision`` and ``language`` engine.

Parts, each importing only those listed after it:

* ``convert/`` (host, ``mmaas convert qwen2-vl``): the checkpoint (the small seeded one, or
  a real one copied in), its tokenizer, and the conversion's driver;
* ``export/`` (host, under ``convert``): torch -> the two ONNX graphs, validation against
  transformers, the side files and model.yaml;
* ``spec``, ``spec_checks`` (host: validate, render, build): settings, cross-checks of the
  engines and assets, the served signature; ``runtime/`` (the image): preprocessing,
  prompt, sampling, generation, continuous batching;
* ``config`` (both): runtime.json, the typed file ``export`` writes and ``runtime`` reads.
"""
