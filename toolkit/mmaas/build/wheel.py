"""The mmaas wheels that images install, and the pinned requirements of each image.

Each image installs mmaas as a wheel with the extras of what it runs (the back end's build
target names them: :class:`mmaas.backends.targets.BuildTarget`): the runtime stage the server and
the back end's runtime part, the builder stage the stage and the back end's builder and
runtime parts (no image carries a host part). The
wheel is packed here from the installed mmaas (an editable checkout or site-packages,
so an installed mmaas builds outside a checkout) with only the subpackages that image
runs, deterministically (sorted entries, fixed times), so its bytes change only when that
code changes: the engine-cache key and the compile's Docker layer follow the builder
stage's code, not the CLI's or the server's (C13). Its metadata is the installed
distribution's own (``Requires-Dist`` with the extras).

The requirement lines of an image's extras (:func:`requirements`) are installed in an
earlier layer than the wheel, pinned by ``templates/image-constraints.txt``, so the
framework layer is cached across code changes and the wheel installs with ``--no-index``.
"""

from __future__ import annotations

import base64
import hashlib
import re
import zipfile
from collections.abc import Iterable, Sequence
from importlib import metadata
from pathlib import Path

import mmaas
from mmaas.core.pipelines import PIPELINES

DISTRIBUTION = "mmaas"
SERVER = "mmaas.server"  # an image wheel holding it packs the pipeline kinds' runtime parts
SBOM_TOOL = "sbom-tool.txt"  # the pinned SBOM generator of the runtime image's sbom stage
ZIP_TIME = (2020, 1, 1, 0, 0, 0)  # fixed entry times: the same code packs to the same bytes
_EXTRA = re.compile(r"""extra\s*==\s*["']([\w.-]+)["']""")
_SELF = re.compile(r"^mmaas\[([\w.,\s-]+)\]")


def package_files(packages: Sequence[str], root: Path | None = None) -> list[tuple[str, bytes]]:
    """``(archive path, bytes)`` of the mmaas modules in ``packages`` (dotted names, with
    their subpackages) and the modules of every parent package (its ``__init__.py`` and
    the sibling modules it may import, e.g. ``mmaas.backends.targets``), sorted; caches and compiled
    files are left out. With :data:`SERVER`, also every pipeline kind's runtime modules
    (:func:`pipeline_runtime_files`). ``root`` is the mmaas package directory (default:
    the installed one)."""
    root = root or installed_root()
    chosen: dict[str, bytes] = pipeline_runtime_files(root) if SERVER in packages else {}
    for package in packages:
        parts = package.split(".")[1:]
        for depth in range(len(parts)):  # each parent's own modules (its __init__ imports)
            for module in sorted(root.joinpath(*parts[:depth]).glob("*.py")):
                if module.name != "__main__.py":  # a parent's command line is not its API
                    chosen[_archive_name(root, module)] = module.read_bytes()
        for path in sorted(root.joinpath(*parts).rglob("*")):
            kept = path.suffix in (".py", ".typed") and "__pycache__" not in path.parts
            if path.is_file() and kept:
                chosen[_archive_name(root, path)] = path.read_bytes()
    typed = root / "py.typed"
    if typed.is_file():
        chosen["mmaas/py.typed"] = typed.read_bytes()
    return sorted(chosen.items())


def pipeline_runtime_files(root: Path) -> dict[str, bytes]:
    """Archive path -> bytes of every pipeline kind's runtime modules
    (:attr:`mmaas.core.pipelines.PipelineParts.runtime_modules`: a module, or a package
    with its subpackages) and their parent packages' ``__init__.py`` only: the server
    reaches a kind's runtime part through the registry, by name, so a wheel holding the
    server packs them; the kinds' spec, convert and export parts stay out."""
    chosen: dict[str, bytes] = {}
    for parts in PIPELINES.values():
        for name in parts.runtime_modules:
            relative = name.split(".")[1:]
            path = root.joinpath(*relative)
            files = sorted(path.rglob("*.py")) if path.is_dir() else [path.with_suffix(".py")]
            files += [
                root.joinpath(*relative[:depth], "__init__.py") for depth in range(1, len(relative))
            ]
            for module in files:
                if "__pycache__" not in module.parts:
                    chosen[_archive_name(root, module)] = module.read_bytes()
    return chosen


def installed_root() -> Path:
    """The directory of the installed mmaas package (a checkout's ``toolkit/mmaas`` for an
    editable install)."""
    return Path(mmaas.__file__).resolve().parent


def pack_wheel(packages: Sequence[str], out_dir: Path, root: Path | None = None) -> Path:
    """Write ``out_dir/mmaas-<version>-py3-none-any.whl`` holding ``packages`` (see
    :func:`package_files`) and the installed distribution's metadata; return its path.

    Raises:
        importlib.metadata.PackageNotFoundError: mmaas is not installed (no metadata).
    """
    version = metadata.version(DISTRIBUTION)
    info = f"{DISTRIBUTION}-{version}.dist-info"
    files = package_files(packages, root)
    files.append((f"{info}/METADATA", _metadata_text().encode()))
    files.append((f"{info}/WHEEL", _WHEEL.encode()))
    record = "".join(f"{name},{_record_hash(data)},{len(data)}\n" for name, data in files)
    files.append((f"{info}/RECORD", (record + f"{info}/RECORD,,\n").encode()))
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{DISTRIBUTION}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in files:
            entry = zipfile.ZipInfo(name, ZIP_TIME)
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(entry, data)
    return target


def requirements(extras: Iterable[str]) -> list[str]:
    """The requirement lines (``name>=x``, markers dropped) of the installed mmaas's
    ``extras``, following extras that name ``mmaas[...]`` itself, plus its base
    dependencies; sorted and without duplicates."""
    wanted, found = set(extras), set()
    declared = metadata.requires(DISTRIBUTION) or []
    changed = True
    while changed:
        changed = False
        for line in declared:
            spec, _, marker = line.partition(";")
            extra = _EXTRA.search(marker)
            if marker.strip() and (extra is None or extra.group(1) not in wanted):
                continue
            itself = _SELF.match(spec.strip())
            if itself:
                more = {name.strip() for name in itself.group(1).split(",")} - wanted
                wanted |= more
                changed = changed or bool(more)
            else:
                found.add(spec.strip())
    return sorted(found)


def pipeline_requirements(kind: str | None) -> str:
    """requirements-pipeline.txt of a model of pipeline ``kind`` (None: no pipeline): the
    kind's runtime packages, one per line, which the image installs with ``--no-deps``
    under the image constraints (:class:`mmaas.core.pipelines.PipelineParts`); "" when none."""
    parts = PIPELINES.get(kind) if kind else None
    return "".join(f"{name}\n" for name in (parts.runtime_packages if parts else ()))


def _metadata_text() -> str:
    # a .dist-info holds the core metadata as METADATA; an .egg-info (setuptools' source-tree
    # record, e.g. toolkit/mmaas.egg-info first on sys.path) holds the same headers as PKG-INFO
    found = metadata.distribution(DISTRIBUTION)
    text = found.read_text("METADATA") or found.read_text("PKG-INFO") or ""
    head, _, _ = text.partition("\n\n")  # the headers; the long description stays out
    return head + "\n"


def _archive_name(root: Path, path: Path) -> str:
    return "mmaas/" + path.relative_to(root).as_posix()


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"sha256={digest.decode()}"


_WHEEL = (
    "Wheel-Version: 1.0\nGenerator: mmaas.build.wheel\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
)
