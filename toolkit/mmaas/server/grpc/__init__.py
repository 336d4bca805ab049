"""The KServe v2 gRPC front end: the servicer and its streaming RPC, the translation between
protobuf messages and the protocol layer's types (:mod:`mmaas.server.protocol`), the
Triton extensions and the gRPC server. It imports nothing of the HTTP front end."""
