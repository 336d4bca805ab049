"""C13 and the engine cache against the real Docker engine (BuildKit): a runtime-settings
change, a README change or a revision label never re-runs the engine compile; without the
engine cache the compile layer itself is reused; the registry shares engines between
machines; a failed gate fails the build; a rebuild with nothing changed runs no Docker build
unless the image under the tag is not the one that build verified.

One model (a copy of ppocr-cls under a throw-away ``mmaas-test/`` repository) is built cold
once per module; every test rebuilds it and reads BuildKit's step states from the output.
"""

from __future__ import annotations

import re
import secrets
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from docker_fixtures import tampered_image
from mmaas.build import docker as docker_engine
from mmaas.build.cache.reuse import CacheOptions
from mmaas.build.current import BUILD_DIGEST_LABEL
from mmaas.build.pipeline import BuildResult, build_image
from mmaas.build.registry import RegistryTarget
from mmaas.core import proc
from mmaas.core.errors import DockerError

pytestmark = [pytest.mark.docker, pytest.mark.slow]
COMPILE_STEP = "python -m mmaas.stage build"


@dataclass
class Model:
    """The module's model folder, its pristine model.yaml and the cold build."""

    folder: Path
    spec: str
    cache: Path
    cold: BuildResult

    def write(self, text: str) -> None:
        (self.folder / "model.yaml").write_text(text)

    def build(
        self, capsys, cache: CacheOptions | None = None, **options
    ) -> tuple[BuildResult, str, list[str]]:
        """Build; return the result, the build output and the engine-cache notes."""
        notes: list[str] = []
        capsys.readouterr()
        result = build_image(
            self.folder, cache=cache or CacheOptions(root=self.cache), say=notes.append, **options
        )
        return result, capsys.readouterr().err, notes


def states(output: str, fragment: str) -> list[str]:
    """BuildKit's state (CACHED, DONE, ERROR) of every step whose instruction holds
    ``fragment``, in output order (``#N [stage i/n] INSTRUCTION`` ... ``#N CACHED``)."""
    lines = output.splitlines()
    found = []
    for index, line in enumerate(lines):
        step = re.match(r"#(\d+) \[[^\]]+\] (.*)", line)
        if step and fragment in step.group(2):
            state = next(
                (
                    m.group(1)
                    for later in lines[index + 1 :]
                    if (m := re.match(rf"#{step.group(1)} (CACHED|DONE|ERROR)", later))
                ),
                "?",
            )
            found.append(state)
    return found


@pytest.fixture(scope="module")
def model(
    docker_cli: list[str],
    base_image: str,
    ppocr_models: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Model]:
    """ppocr-cls under a throw-away repository, built cold once; its images are removed
    at the end."""
    folder = tmp_path_factory.mktemp("reuse") / "cls"
    shutil.copytree(ppocr_models["ppocr-cls"].parent, folder)
    repository = f"mmaas-test/cls-reuse-{secrets.token_hex(4)}"
    spec = (
        folder / "model.yaml"
    ).read_text() + f"image: {{repository: {repository}, base_image: {base_image}}}\n"
    (folder / "model.yaml").write_text(spec)
    cache = folder.parent / "engine-cache"
    cold = build_image(folder, cache=CacheOptions(root=cache), say=lambda _: None)
    yield Model(folder, spec, cache, cold)
    images = proc.run(
        [*docker_cli, "image", "ls", "--quiet", "--filter", f"reference={repository}"], check=False
    ).stdout.split()
    if images:
        proc.run([*docker_cli, "image", "rm", "--force", *set(images)], check=False)


def test_cold_build_compiled_and_cached_the_engine(model: Model) -> None:
    assert model.cold.engine_cache == "miss" and model.cold.engine_key
    entry = model.cache / model.cold.engine_key.partition(":")[2]
    assert sorted(p.name for p in entry.iterdir()) == [
        "manifest.json",
        "model.ort.onnx",
        "model.ort.onnx.data",
        "report.json",
    ]


def test_runtime_settings_change_hits_the_engine_cache(model: Model, capsys) -> None:
    model.write(
        model.spec.replace('version: "1.0.0"', 'version: "1.0.1"')
        + "runtime: {instance_count: 2, grpc_port: 9001}\n"
    )
    try:
        result, output, notes = model.build(capsys)
    finally:
        model.write(model.spec)
    assert notes[0].startswith(f"engine cache hit {model.cold.engine_key}")
    assert result.engine_cache == "hit" and result.engine_key == model.cold.engine_key
    assert states(output, COMPILE_STEP) == []  # no compile build ran
    assert states(output, "COPY --from=builder /opt/mmaas/engine/") == ["CACHED"]
    assert (
        result.manifest.engines[0].manifest.engine == model.cold.manifest.engines[0].manifest.engine
    )
    assert result.manifest.version == "1.0.1"


def test_readme_change_and_revision_label_reuse_every_layer(model: Model, capsys) -> None:
    (model.folder / "README.md").write_text("A new paragraph about the classifier.\n")
    result, output, _ = model.build(capsys, revision="0123abcd" * 5)
    assert result.engine_cache == "hit" and states(output, COMPILE_STEP) == []
    ran = [line for line in output.splitlines() if re.match(r"#\d+ \[(builder|runtime) ", line)]
    assert ran and all(
        state == "CACHED"
        for fragment in ran
        for state in states(output, fragment.split("] ", 1)[1])
    )
    assert result.labels["org.opencontainers.image.revision"] == "0123abcd" * 5
    assert result.manifest == model.cold.manifest


def test_without_the_engine_cache_the_compile_layer_is_reused(model: Model, capsys) -> None:
    model.write(model.spec + "runtime: {instance_count: 3}\n")
    try:
        result, output, _ = model.build(capsys, cache=CacheOptions(enabled=False))
    finally:
        model.write(model.spec)
    assert result.engine_cache == "off"
    assert states(output, COMPILE_STEP) == ["CACHED"]
    assert (
        result.manifest.engines[0].manifest.engine == model.cold.manifest.engines[0].manifest.engine
    )


def test_a_fresh_cache_gets_the_engine_from_the_registry(
    model: Model, capsys, local_registry, monkeypatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("MMAAS_REGISTRY_USER", local_registry.user)
    monkeypatch.setenv("MMAAS_REGISTRY_PASSWORD", local_registry.password)
    registry = RegistryTarget(local_registry.host, "ci")
    first, _, notes = model.build(capsys, CacheOptions(root=tmp_path / "a", registry=registry))
    assert first.engine_cache == "miss"
    assert any(
        n.startswith(f"engine cache entry pushed: {local_registry.host}/ci/ppocr-cls-engine-cache:")
        for n in notes
    ), notes
    second, output, notes = model.build(
        capsys, CacheOptions(root=tmp_path / "b", registry=registry)
    )
    assert second.engine_cache == "hit-registry", notes
    assert any("(pulled from " in note for note in notes)
    assert states(output, COMPILE_STEP) == []
    assert (
        second.manifest.engines[0].manifest.engine == model.cold.manifest.engines[0].manifest.engine
    )


def test_a_failed_gate_fails_the_build_with_its_figures(model: Model, capsys) -> None:
    model.write(model.spec + "checks: {latency: {p99_ms: 0.001, runs: 3, warmup: 0}}\n")
    try:
        with pytest.raises(DockerError):
            model.build(capsys)
    finally:
        model.write(model.spec)
    output = capsys.readouterr().err
    assert "mmaas stage: error: latency gate failed: p99 " in output
    assert "exceeds the budget 0.001 ms" in output


def test_a_base_image_not_in_the_engine_names_the_key_to_fix(
    model: Model, capsys, base_image: str
) -> None:
    """No local base image: the key cannot be computed, the build tries a pull, which fails
    here (no registry reachable); the error's hint names the image and image.base_image."""
    missing = f"mmaas-test/no-such-base:{secrets.token_hex(4)}"
    model.write(model.spec.replace(f"base_image: {base_image}", f"base_image: {missing}"))
    try:
        with pytest.raises(DockerError) as caught:
            model.build(capsys)
    finally:
        model.write(model.spec)
    assert caught.value.hint is not None
    assert f"{missing} (image.base_image in {model.folder / 'model.yaml'})" in caught.value.hint


def image_id(docker_cli: list[str], image: str) -> str:
    """The local image id (``sha256:<hex>``) ``image`` names now."""
    return proc.run([*docker_cli, "image", "inspect", "--format", "{{.Id}}", image]).stdout.strip()


def test_an_unchanged_rebuild_runs_no_docker_build(model: Model, capsys, docker_cli) -> None:
    first, _, _ = model.build(capsys)  # whatever earlier tests left under the tag
    second, output, notes = model.build(capsys)
    assert second.engine_cache == "current", notes
    assert any(n.startswith(f"{second.image} is up to date (build digest ") for n in notes)
    assert not re.search(r"^#\d+ ", output, re.MULTILINE)  # no BuildKit step at all
    assert second.image_id == first.image_id == image_id(docker_cli, second.image)
    assert second.labels == first.labels and second.manifest == first.manifest
    assert second.labels[BUILD_DIGEST_LABEL].startswith("sha256:")
    assert second.plan_digest == first.plan_digest
    forced, output, _ = model.build(capsys, CacheOptions(root=model.cache, reuse_image=False))
    assert forced.engine_cache == "hit" and re.search(r"^#\d+ ", output, re.MULTILINE)
    revised, _, notes = model.build(capsys, revision="feed" * 10)
    assert revised.engine_cache == "hit", notes  # another build digest: built
    assert revised.labels[BUILD_DIGEST_LABEL] != second.labels[BUILD_DIGEST_LABEL]


def test_an_image_retagged_over_the_build_is_rebuilt(model: Model, capsys, docker_cli) -> None:
    """A derived image under the tag keeps the build-digest label but not the image id
    the build verified: the build runs again and the tag names a verified image."""
    built, _, _ = model.build(capsys)
    engine = f"/opt/mmaas/model/{built.manifest.engines[0].manifest.engine.path}"
    tag = f"{built.image.rpartition(':')[0]}:tampered"
    with tampered_image(docker_cli, built.image, engine, tag) as tampered:
        proc.run([*docker_cli, "tag", tampered, built.image])
        assert image_id(docker_cli, built.image) != built.image_id
        result, output, notes = model.build(capsys)
    assert f"{built.image} is not the image this digest's build verified: building" in notes
    assert result.engine_cache == "hit" and re.search(r"^#\d+ ", output, re.MULTILINE)
    assert image_id(docker_cli, built.image) == result.image_id
    assert (
        result.manifest.engines[0].manifest.engine == model.cold.manifest.engines[0].manifest.engine
    )


def test_the_checks_inspect_each_image_once(model: Model, docker_cli, base_image: str) -> None:
    """inspections_once: the prefetched names in one docker run, each answered from it
    within the block (a tag moved meanwhile still reads as it was), a missing one raises."""
    tag = f"mmaas-test/inspect-{secrets.token_hex(4)}:1"
    proc.run([*docker_cli, "tag", base_image, tag])
    try:
        with docker_engine.inspections_once([tag, base_image]):
            proc.run([*docker_cli, "tag", model.cold.image, tag])  # moved after the prefetch
            assert docker_engine.inspect_image(tag)["Id"] == image_id(docker_cli, base_image)
        assert docker_engine.inspect_image(tag)["Id"] == image_id(docker_cli, model.cold.image)
        with docker_engine.inspections_once([tag, "mmaas-test/none:0"]):
            assert docker_engine.inspect_image(tag)["Id"] == image_id(docker_cli, tag)
            with pytest.raises(DockerError, match="no image 'mmaas-test/none:0'"):
                docker_engine.inspect_image("mmaas-test/none:0")
    finally:
        proc.run([*docker_cli, "image", "rm", tag], check=False)
