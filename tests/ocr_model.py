"""A two-engine model folder from the real PP-OCR files: the text detector (``det``) and the
direction classifier (``cls``), an asset (the classifier's labels) and an ensemble that
runs both, for the multi-engine tests (spec, local compile, server, Docker image)."""

from __future__ import annotations

import json
import os
from pathlib import Path

LABELS = {"0": "0 degrees", "1": "180 degrees"}


def model_yaml(det_max: int = 320, cls_opt: int = 4, serve_engines: str | None = None) -> str:
    """The model.yaml text; ``det_max`` is the detector's largest side, ``cls_opt`` the
    classifier's opt batch (a profile change that recompiles only ``cls``)."""
    serve = f"  serve_engines: {serve_engines}\n" if serve_engines is not None else ""
    return f"""name: ocr
version: "1.0.0"
description: PP-OCR text detection and direction classification in one image
engines:
  det:
    source: {{path: det.onnx}}
    max_batch_size: 2
    inputs:
      - name: x
        min: [1, 3, 32, 32]
        opt: [1, 3, 96, 96]
        max: [2, 3, {det_max}, {det_max}]
  cls:
    source: {{path: cls.onnx}}
    max_batch_size: 8
    inputs:
      - name: x
        shape: [-1, 3, 48, 192]
        min: [1, 3, 48, 192]
        opt: [{cls_opt}, 3, 48, 192]
        max: [8, 3, 48, 192]
assets:
  labels: {{path: labels/cls.json}}
pipeline:
  kind: ensemble
{serve}  settings:
    steps:
      - engine: det
        inputs: {{x: image}}
        outputs: {{sigmoid_0.tmp_0: text_map}}
      - engine: cls
        inputs: {{x: crops}}
        outputs: {{"save_infer_model/scale_0.tmp_1": direction}}
"""


def write_ocr_model(folder: Path, ppocr_models: dict[str, Path], **options: object) -> Path:
    """Fill ``folder`` (created) with the two ONNX files (hard links when possible), the
    labels asset and model.yaml; return the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, key in (("det.onnx", "ppocr-det"), ("cls.onnx", "ppocr-cls")):
        target = folder / name
        if not target.exists():
            try:
                os.link(ppocr_models[key], target)
            except OSError:
                target.write_bytes(ppocr_models[key].read_bytes())
    (folder / "labels").mkdir(exist_ok=True)
    (folder / "labels" / "cls.json").write_text(json.dumps(LABELS) + "\n")
    (folder / "model.yaml").write_text(model_yaml(**options))  # type: ignore[arg-type]
    return folder
