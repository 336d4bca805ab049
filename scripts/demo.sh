#!/usr/bin/env bash
# The README's first command: on a fresh machine, set up, build the ppocr-det image with
# `mmaas build`, start it, send it one real text-detection request through tritonclient,
# print the answer (and its difference from in-process ONNX Runtime), and stop it.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
MMAAS=.venv/bin/mmaas
PYTHON=.venv/bin/python
DOCKER=${MMAAS_DOCKER:-/usr/bin/docker}
IMAGE=mmaas/ppocr-det:1.0.0

echo "== mmaas build models/ppocr-det"
"$MMAAS" build models/ppocr-det

PORT=$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
echo "== starting $IMAGE on 127.0.0.1:$PORT"
CONTAINER=$("$DOCKER" run --detach --rm --publish "127.0.0.1:$PORT:8001" "$IMAGE")
trap '"$DOCKER" stop "$CONTAINER" >/dev/null 2>&1 || true' EXIT

"$PYTHON" - "$PORT" <<'PY'
import sys, time
import tritonclient.grpc as grpcclient
client = grpcclient.InferenceServerClient(url=f"127.0.0.1:{sys.argv[1]}")
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    try:
        if client.is_server_ready():
            sys.exit(0)
    except Exception:
        pass
    time.sleep(0.2)
sys.exit("the server did not become ready within 60 s; see `docker logs`")
PY
echo "== ready; sending one request (a rendered 640x640 picture with three lines of text)"
"$PYTHON" scripts/demo_request.py --url "127.0.0.1:$PORT" \
    --onnx models/ppocr-det/ch_PP-OCRv4_det_infer.onnx
echo "== verifying the image's engine against its manifest and labels"
"$MMAAS" verify "$IMAGE"
