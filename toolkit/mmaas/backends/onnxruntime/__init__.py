"""The ONNX Runtime (CPU) back end: runtime part (runtime), compiler part (compiler), its
typed engine settings (settings) and its build target (target)."""
