"""Click options shared by several verbs (one definition each)."""

from __future__ import annotations

from pathlib import Path

import click

ca_bundle_option = click.option(
    "--ca-bundle",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="PEM CA bundle trusted by pip inside the build, for TLS-intercepting proxies "
    "(default: image.ca_bundle in model.yaml, else $MMAAS_CA_BUNDLE).",
)
json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print the result as JSON on stdout."
)
