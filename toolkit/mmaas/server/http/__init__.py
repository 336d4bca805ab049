"""The KServe v2 HTTP/REST front end: Triton's HTTP protocol (health, metadata, config,
statistics, repository index, infer with JSON tensors and the binary tensor data
extension, the generate extension) as a Starlette app (:mod:`.routes`) served by Granian
inside the server's one asyncio loop (:mod:`.server`). It translates HTTP <-> the protocol
layer's types (:mod:`mmaas.server.protocol`) and calls the same request path as the gRPC
front end (:class:`mmaas.server.dataplane.DataPlane`); it imports nothing of the gRPC front
end."""
