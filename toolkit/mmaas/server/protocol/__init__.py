"""The protocol layer both front ends share (KServe v2 / Open Inference Protocol with
Triton's extensions), importable without either front end:

* :mod:`.types`: neutral inference requests and responses (an input's one data source:
  typed values, raw bytes or a shared memory region);
* :mod:`.codec`: the one tensor codec (raw little-endian bytes and typed values <-> numpy
  arrays, BYTES with 4-byte length prefixes, BF16, BOOL) and :mod:`.tensors`, which applies
  it to a whole request or response (shared memory reads and writes included);
* :mod:`.shm`: the system shared memory registry;
* :mod:`.messages`: the model metadata, config and statistics messages;
* :mod:`.stubs`: the KServe v2 / Triton protobuf stubs, generated at build time by setup.py
  (git-ignored).

The gRPC front end (:mod:`mmaas.server.grpc`) and the HTTP one (:mod:`mmaas.server.http`)
translate their wire messages into these types and back, and call the one request path
(:mod:`mmaas.server.dataplane`); neither imports the other. The rule: every message about a
malformed tensor is worded in this package, once, so one mistake gets the same text over
either protocol; a front end words only the mistakes its own wire format allows (a JSON
member of the wrong type, a ``raw_input_contents`` count that does not pair with the
inputs).
"""
