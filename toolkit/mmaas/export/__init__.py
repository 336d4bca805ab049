"""``mmaas export``: a built, verified image taken to where production runs it -- Kubernetes
objects for KServe (``ServingRuntime`` + ``InferenceService``) or plain Kubernetes
(Deployment, Service, HorizontalPodAutoscaler, PodDisruptionBudget), and a Triton model
repository holding its engine. Host side: reads the spec and the image (never builds)."""
