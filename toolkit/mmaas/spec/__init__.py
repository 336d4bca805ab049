"""model.yaml -> a validated, completed ModelSpec: YAML with positions (yamlio), the typed
models (model), load -> complete -> checks with every problem located (errors), profiles,
the ONNX graph's signature, sources, the model catalog and `mmaas init` (scaffold). What a
back end or a pipeline kind refuses is asked of the checks the caller injects (hooks)."""
