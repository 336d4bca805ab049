"""The peer in scripts/bench_runtime.py: a small MLServer custom runtime serving one ONNX
model with ONNX Runtime (CPU), as MLServer's docs write custom runtimes.

MLServer imports it from the model folder (``implementation:
mlserver_onnx_runtime.OnnxRuntimeModel`` in model-settings.json); ``parameters.uri`` is
the ONNX file. Runs inside MLServer's own environment, not mmaas's.
"""

from __future__ import annotations

import onnxruntime as ort
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import InferenceRequest, InferenceResponse


class OnnxRuntimeModel(MLModel):
    """``session.run`` on the decoded inputs; every output returned, numpy-encoded."""

    async def load(self) -> bool:
        """Open the ONNX file named by ``parameters.uri`` on the CPU execution provider."""
        self.session = ort.InferenceSession(
            self.settings.parameters.uri, providers=["CPUExecutionProvider"]
        )
        self.output_names = [output.name for output in self.session.get_outputs()]
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        """Decode, run once, encode (KServe v2 datatypes via MLServer's NumpyCodec)."""
        inputs = {tensor.name: NumpyCodec.decode_input(tensor) for tensor in payload.inputs}
        values = self.session.run(self.output_names, inputs)
        return InferenceResponse(
            model_name=self.name,
            model_version=self.version,
            outputs=[
                NumpyCodec.encode_output(name, value)
                for name, value in zip(self.output_names, values, strict=True)
            ],
        )
