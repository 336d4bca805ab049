"""The rendered Dockerfiles of the compile and package builds, BuildKit and legacy: byte for
byte equal to the golden files, the layers in cache order with the server run as a
non-root user, a CA bundle trusted by pip, and hadolint finding nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from plans import plan_of

from mmaas.build.render import render_dockerfile
from paths import FIXTURES

GOLDEN = FIXTURES / "golden"


@pytest.mark.parametrize("buildkit", [True, False], ids=["buildkit", "legacy"])
@pytest.mark.parametrize("phase", ["compile", "package"])
def test_rendered_dockerfile_matches_golden_file(det, buildkit: bool, phase: str) -> None:
    engine = Path("engine") if phase == "package" else None
    text = render_dockerfile(plan_of(det, buildkit=buildkit, engine_dir=engine))
    prefix = "ppocr-det.compile" if phase == "compile" else "ppocr-det"
    golden = GOLDEN / f"{prefix}.{'buildkit' if buildkit else 'legacy'}.Dockerfile"
    if os.environ.get("MMAAS_UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text(), "run with MMAAS_UPDATE_GOLDEN=1 after a deliberate change"


def test_dockerfiles_order_layers_and_run_as_non_root(det) -> None:
    compile_ = render_dockerfile(plan_of(det))
    package = render_dockerfile(plan_of(det, engine_dir=Path("engine")))

    def framework(text: str) -> str:  # the shared stage, without the header line
        return text[text.index("\n") : text.index("ENV PATH=")]

    assert framework(compile_) == framework(package)  # one cached framework layer for both
    order = [
        "FROM mmaas/base:bookworm AS framework",
        "requirements-runtime.txt",
        "FROM framework AS builder",
        "COPY wheels/builder/",
        "COPY model/",
        "COPY engine-request.json",
        "python -m mmaas.stage build",
    ]
    assert [compile_.index(marker) for marker in order] == sorted(
        compile_.index(marker) for marker in order
    )
    assert "AS runtime" not in compile_ and "mmaas.stage stamp" not in compile_
    order = [
        "FROM framework AS builder",
        "COPY wheels/builder/",
        "COPY engine/ /opt/mmaas/engine/",
        "COPY build-request.json",
        "python -m mmaas.stage stamp",
        "FROM framework AS serving",
        "COPY --from=builder /opt/mmaas/engine/",
        "COPY wheels/runtime/",
        "[server,onnxruntime]",
        "COPY --from=builder /opt/mmaas/model/manifest.json",
        "python -m mmaas.core.model_dir",
        "FROM framework AS sbom-tool",
        "FROM serving AS sbom",
        "python -m mmaas.core.sbom",
        "FROM serving AS runtime",
        "COPY --from=sbom /opt/mmaas/sbom.cdx.json",
        "LABEL",
        "USER 10001",
        "ENTRYPOINT",
    ]
    assert [package.index(marker) for marker in order] == sorted(
        package.index(marker) for marker in order
    )
    assert "mmaas.stage build" not in package and "COPY model/" not in package
    assert "--mount=type=cache,target=/root/.cache/pip" in package
    assert "# syntax=" not in package  # a syntax line pulls a front-end image
    legacy = render_dockerfile(plan_of(det, buildkit=False, engine_dir=Path("engine")))
    assert "--mount" not in legacy and "--no-cache-dir" in legacy


def test_ca_bundle_is_copied_and_trusted_by_pip(det, tmp_path: Path) -> None:
    bundle = tmp_path / "corp.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    plan = plan_of(det, ca_bundle=bundle)
    text = render_dockerfile(plan)
    assert "COPY ca-bundle.pem /opt/mmaas/ca-bundle.pem" in text
    assert "PIP_CERT=/opt/mmaas/ca-bundle.pem" in text
    assert text.index("PIP_CERT") < text.index("MMAAS_PIP install")
    assert any(f.source == bundle and f.target == "ca-bundle.pem" for f in plan.files)
    assert "ca-bundle" not in render_dockerfile(plan_of(det))


@pytest.mark.parametrize("buildkit", [True, False], ids=["buildkit", "legacy"])
@pytest.mark.parametrize("phase", ["compile", "package"])
def test_rendered_dockerfiles_pass_hadolint(
    det, tmp_path: Path, buildkit: bool, phase: str
) -> None:
    import shutil
    import sys

    from mmaas.core import proc

    hadolint = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    dockerfile = tmp_path / "Dockerfile"
    engine = Path("engine") if phase == "package" else None
    dockerfile.write_text(render_dockerfile(plan_of(det, buildkit=buildkit, engine_dir=engine)))
    result = proc.run([hadolint, "--no-color", str(dockerfile)], check=False, what="hadolint")
    assert result.returncode == 0, result.stdout + result.stderr
