"""Runner labels for CI builds, per engine back end, from ``.github/mmaas-runners.json``.

The file maps a back end name to the GitHub Actions ``runs-on`` value of the jobs that
build its models (a label, or a list of labels a self-hosted runner must all carry), with
``default`` for back ends not named::

    {"default": "ubuntu-24.04", "tensorrt": "gpu"}

TensorRT engines are compiled for the GPU they are built on, so a ``tensorrt`` entry
must name a GPU runner; without one, change detection refuses to schedule a TensorRT model
rather than silently building it on a CPU runner.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from mmaas.backends import BACKENDS, get_target
from mmaas.core.errors import SpecError, SpecProblem

if TYPE_CHECKING:
    from mmaas.ci.git import Git

RUNNERS_FILE = ".github/mmaas-runners.json"
DEFAULT_RUNNER = "ubuntu-24.04"
RunnerLabel = str | list[str]


def load_runners(git: Git, commit: str) -> dict[str, RunnerLabel]:
    """The runners config in ``commit``'s tree; ``{"default": "ubuntu-24.04"}`` when the
    file is absent.

    Raises:
        SpecError: the file is not JSON, not an object, names an unknown back end, or a
            value is not a label or a non-empty list of labels.
    """
    text = git.show(commit, RUNNERS_FILE)
    if text is None:
        return {"default": DEFAULT_RUNNER}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise _problem("", f"not valid JSON ({exc}); fix the file") from exc
    if not isinstance(data, dict):
        raise _problem("", 'must be a JSON object such as {"default": "ubuntu-24.04"}')
    known = ("default", *BACKENDS)
    for key, value in data.items():
        if key not in known:
            raise _problem(key, f"unknown back end; use one of {', '.join(known)}")
        if not _is_label(value):
            raise _problem(key, "must be a runner label or a non-empty list of labels")
    return data


def runner_for(runners: dict[str, RunnerLabel], backend: str) -> RunnerLabel:
    """The ``runs-on`` value for a model built with ``backend``.

    Raises:
        SpecError: ``backend`` needs a GPU runner and the config names none for it.
    """
    if backend in runners:
        return runners[backend]
    if get_target(backend).runs_on_gpu:
        raise _problem(
            backend,
            f"no runner label for {backend} models, which must build on "
            f'a GPU runner; add e.g. "{backend}": "gpu"',
        )
    return runners.get("default", DEFAULT_RUNNER)


def _is_label(value: object) -> bool:
    if isinstance(value, str):
        return bool(value.strip())
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(item, str) and item.strip() for item in value)
    )


def _problem(key: str, message: str) -> SpecError:
    return SpecError([SpecProblem(RUNNERS_FILE, key, message)])
