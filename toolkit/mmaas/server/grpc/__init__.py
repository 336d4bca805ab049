"""The KServe v2 gRPC front end: protocol stubs (generated at build time), protobuf <->
numpy converters, Triton model config messages, the servicer and the gRPC server."""
