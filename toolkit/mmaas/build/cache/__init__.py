"""The engine cache: the key (what determines an engine), the local store, the registry
store and the reuse logic of `mmaas build`."""
