"""Rules of a model made of parts (``engines:``, ``assets:``), checked at spec load with
every problem located:

* a model.yaml gives either a top-level ``source:`` (one engine, its keys at the top) or
  ``engines:`` (one section per engine, no engine keys at the top), never both;
* engine names are folder names in the model directory: ``assets`` is taken, and
  ``<name>-<engine>`` must be a valid model name (at most 128 characters);
* ``runtime.dynamic_batching`` with several engines needs one engine with
  ``max_batch_size > 0`` (engines without a batch axis run unbatched), and no preferred
  batch size above the largest ``max_batch_size``;
* an asset is a file inside the model folder, matching its ``sha256`` pin; two assets may
  not name the same file.

That the engines fit one image (one back end's runtime) is the back ends' rule, asked of the
injected checks (:meth:`mmaas.spec.hooks.SpecChecks.check_engines`).
"""

from __future__ import annotations

from pathlib import Path

from mmaas.core.errors import SourceError, SpecProblem
from mmaas.core.model_manifest import ASSETS_DIR
from mmaas.spec.model import ENGINE_KEYS, ModelSpec
from mmaas.spec.sources import check_pins
from mmaas.spec.yamlio import YamlDocument

MAX_NAME = 128


def check_form(spec: ModelSpec, doc: YamlDocument) -> list[SpecProblem]:
    """Problems with how ``spec`` declares its engines (see the module docstring)."""
    if spec.engines is None:
        if spec.source is None:
            return [
                doc.problem(
                    ("source",),
                    "required key missing: add source: (the ONNX model of a single-engine "
                    "model) or engines: (one section with its own source: per engine)",
                )
            ]
        return []
    problems = [
        doc.problem(
            (key,),
            f"with engines:, {key} belongs in each engine's section "
            f"(engines.<engine>.{key}); move it there",
        )
        for key in ENGINE_KEYS
        if key in spec.model_fields_set
    ]
    if not spec.engines:
        problems.append(doc.problem(("engines",), "list at least one engine under engines:"))
    for engine in spec.engines:
        if engine == ASSETS_DIR:
            problems.append(
                doc.problem(
                    ("engines", engine),
                    f"engine name {engine!r} is taken (the model directory keeps the assets "
                    "there); choose another name",
                )
            )
        if len(f"{spec.name}-{engine}") > MAX_NAME:
            problems.append(
                doc.problem(
                    ("engines", engine),
                    f"the engine is served as {spec.name}-{engine}, longer than {MAX_NAME} "
                    "characters; shorten the engine or model name",
                )
            )
    return problems


def check_engine_batching(spec: ModelSpec, doc: YamlDocument) -> list[SpecProblem]:
    """Dynamic batching over several engines (see the module docstring)."""
    batching = spec.runtime.dynamic_batching
    if batching is None or spec.engines is None:
        return []
    largest = max((engine.max_batch_size for engine in spec.engines.values()), default=0)
    if largest == 0:
        return [
            doc.problem(
                ("runtime", "dynamic_batching"),
                "dynamic batching needs a batch axis; set max_batch_size above 0 in an "
                "engine, or remove runtime.dynamic_batching",
            )
        ]
    return [
        doc.problem(
            ("runtime", "dynamic_batching", "preferred_batch_size", index),
            f"preferred batch size {size} exceeds every engine's max_batch_size (largest "
            f"{largest}); use a size from 1 to {largest}",
        )
        for index, size in enumerate(batching.preferred_batch_size)
        if size > largest
    ]


def resolve_assets(
    spec: ModelSpec, model_dir: Path, doc: YamlDocument
) -> tuple[dict[str, Path], list[SpecProblem]]:
    """The asset files by name (checked against their pins) and every problem."""
    files: dict[str, Path] = {}
    problems: list[SpecProblem] = []
    seen: dict[Path, str] = {}
    root = model_dir.resolve()
    for name, asset in spec.assets.items():
        where = ("assets", name, "path")
        path = (model_dir / asset.path).resolve()
        if Path(asset.path).is_absolute() or not path.is_relative_to(root):
            problems.append(
                doc.problem(
                    where,
                    f"{asset.path!r} is outside the model folder; give a path "
                    "relative to it (the file is copied into the image)",
                )
            )
            continue
        if not path.is_file():
            problems.append(
                doc.problem(
                    where,
                    f"{path}: no such file; fix the path (relative to the "
                    "model folder) or create the file first",
                )
            )
            continue
        if path in seen:
            problems.append(
                doc.problem(
                    where, f"assets {seen[path]!r} and {name!r} name the same file; keep one"
                )
            )
            continue
        seen[path] = name
        try:
            check_pins(path, [f"sha256:{asset.sha256}"] if asset.sha256 else [])
        except SourceError as exc:
            problems.append(
                doc.problem(
                    ("assets", name, "sha256"),
                    exc.message.replace("source.sha256", f"assets.{name}.sha256"),
                )
            )
            continue
        files[name] = path
    return files, problems


def asset_target(model_dir: Path, file: Path) -> str:
    """Where the asset ``file`` (inside ``model_dir``) lands, relative to the model
    directory: ``assets/<its path in the model folder>``."""
    return f"{ASSETS_DIR}/{file.resolve().relative_to(model_dir.resolve()).as_posix()}"
