"""mmaas as a wheel: the image wheels hold only what each stage runs and pack to the same
bytes from the same code; an installed (non-editable) mmaas renders outside a checkout,
with its templates and protocol stubs read from the installed package."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from mmaas.backends import get_target
from mmaas.build.spec_checks import host_checks
from mmaas.build.wheel import pack_wheel, requirements
from mmaas.spec.load import load_spec
from paths import ROOT


def test_image_wheels_hold_their_packages_and_are_reproducible(tmp_path: Path) -> None:
    target = get_target("onnxruntime")
    first = pack_wheel(target.runtime_packages, tmp_path / "a")
    again = pack_wheel(target.runtime_packages, tmp_path / "b")
    assert first.read_bytes() == again.read_bytes()
    names = zipfile.ZipFile(first).namelist()
    assert "mmaas/server/protocol/stubs/grpc_service_pb2.py" in names
    assert "mmaas/backends/onnxruntime/runtime/__init__.py" in names
    host_or_builder = ("mmaas/backends/onnxruntime/host", "mmaas/backends/onnxruntime/builder")
    assert not [n for n in names if n.startswith(host_or_builder)]  # the runtime part only
    assert not [n for n in names if n.startswith(("mmaas/cli", "mmaas/spec", "mmaas/build"))]
    assert not [n for n in names if n.startswith("mmaas/backends/tensorrt")]
    assert any(n.endswith(".dist-info/METADATA") for n in names)
    kinds = sorted(n for n in names if n.startswith("mmaas/pipelines/"))
    assert "mmaas/pipelines/ensemble/runtime.py" in kinds
    assert "mmaas/pipelines/qwen2_vl/config.py" in kinds
    assert "mmaas/pipelines/qwen2_vl/runtime/pipeline.py" in kinds
    assert not [n for n in kinds if "spec" in n or "/convert/" in n or "/export/" in n]
    builder = zipfile.ZipFile(pack_wheel(target.builder_packages, tmp_path / "c")).namelist()
    assert not [n for n in builder if n.startswith("mmaas/pipelines/")]
    runtime = requirements(
        target.recipe(
            load_spec(ROOT / "models" / "ppocr-det", checks=host_checks()).spec
        ).runtime_extras
    )
    assert "onnxruntime>=1.18" in runtime and not any(r.startswith("click") for r in runtime)


def test_an_egg_info_first_on_sys_path_still_gives_the_wheel_its_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """setuptools leaves ``toolkit/mmaas.egg-info`` (PKG-INFO, no METADATA) in a checkout; with
    ``toolkit`` first on sys.path it is the distribution found. A wheel packed then once had an
    empty METADATA, and pip in the builder stage died on its missing version."""
    from importlib import metadata

    egg = tmp_path / "mmaas.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 2.4\nName: mmaas\nVersion: 9.9.9\n\nabout\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert metadata.distribution("mmaas").read_text("METADATA") is None  # the egg-info won
    wheel = pack_wheel(get_target("onnxruntime").runtime_packages, tmp_path / "out")
    assert wheel.name == "mmaas-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        headers = archive.read("mmaas-9.9.9.dist-info/METADATA").decode()
    assert headers == "Metadata-Version: 2.4\nName: mmaas\nVersion: 9.9.9\n"


@pytest.mark.slow
def test_installed_mmaas_renders_outside_a_checkout(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--quiet",
            "-w",
            str(wheels),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = wheels.glob("mmaas-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "mmaas/templates/Dockerfile.onnxruntime.j2" in names
    assert "mmaas/server/protocol/stubs/grpc_service_pb2.py" in names
    site = tmp_path / "site"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target", str(site),
         str(wheel)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr[-3000:]
    model = shutil.copytree(ROOT / "models" / "ppocr-det", tmp_path / "elsewhere" / "det")
    script = (
        "import sys, mmaas; print(mmaas.__file__, file=sys.stderr)\n"
        "import mmaas.server.grpc.servicer\n"
        "from mmaas.cli import main\n"
        "sys.argv = ['mmaas', 'render', sys.argv[1], '--buildkit']\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(model)],
        cwd=tmp_path / "elsewhere",
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.splitlines()[0].startswith(str(site))  # the installed copy ran
    assert "# Rendered by mmaas from templates/Dockerfile.onnxruntime.j2" in done.stdout
    assert "FROM mmaas/base:bookworm AS framework" in done.stdout


# What each image runs from its wheel: the templates' entry points and the back end's part.
ENTRY_POINTS = {
    "runtime_packages": ("mmaas.server.app", "mmaas.core.model_dir", "mmaas.core.image_seal"),
    "builder_packages": ("mmaas.stage.__main__", "mmaas.core.model_dir"),
}
IMPORT_ENTRY_POINTS = """
import importlib, os, sys
from mmaas import backends
for name in sys.argv[3:]:
    importlib.import_module(name)
part = backends.get_runtime if sys.argv[2] == "runtime_packages" else backends.get_compiler
part(sys.argv[1])
if sys.argv[2] == "runtime_packages":  # the server reaches the kinds' runtime parts by name
    from mmaas.core.pipelines import PIPELINES, load_part
    for kind in PIPELINES:
        load_part(kind, "runtime")
site = os.environ["PYTHONPATH"]
mmaas = [m for name, m in sys.modules.items() if name.startswith("mmaas")]
print("\\n".join(m.__file__ for m in mmaas if not (m.__file__ or site).startswith(site)))
"""


@pytest.mark.parametrize("part", ["runtime_packages", "builder_packages"])
@pytest.mark.parametrize("backend", ["onnxruntime", "tensorrt"])
def test_an_image_wheel_runs_its_entry_points_from_that_wheel_alone(
    tmp_path: Path, backend: str, part: str
) -> None:
    """A module the image's code imports but the wheel lacks (say a new sibling module of
    mmaas/backends/__init__.py) fails in the image, not here: import the entry points, the
    back end's part and (runtime image) every pipeline kind's runtime part from the
    unpacked wheel alone."""
    wheel = pack_wheel(getattr(get_target(backend), part), tmp_path / "wheel")
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_ENTRY_POINTS, backend, part, *ENTRY_POINTS[part]],
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == ""  # every mmaas module came from the wheel
