"""The qwen2-vl convert part (host side, ``mmaas convert qwen2-vl``; imports torch and
transformers when it converts): ``checkpoint`` (the small random seeded checkpoint folder,
or a real one copied in, and loading it), ``tokenizer`` (the small checkpoint's byte-level
BPE with Qwen2-VL's special tokens), ``converter`` (the conversion's driver: the registry's
``convert`` part, the staleness digest, one process per part for a real checkpoint)."""
