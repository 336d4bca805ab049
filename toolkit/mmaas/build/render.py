"""Render a BuildPlan's Dockerfile from ``templates/`` with Jinja2 (StrictUndefined).

The templates ship inside the wheel as the package data of ``mmaas.templates`` and are read
through ``importlib.resources`` (:mod:`mmaas.core.templates`), so an installed mmaas
renders outside a checkout.

Templates hold no logic beyond ``if``/``for`` over values the plan computed; every
rendered Dockerfile starts with a comment naming its template and the plan digest.
"""

from __future__ import annotations

import json

import jinja2

from mmaas.build.plan import BuildPlan
from mmaas.core.templates import template_file


def render_dockerfile(plan: BuildPlan) -> str:
    """The Dockerfile text for ``plan``.

    Raises:
        jinja2.UndefinedError: the template uses a value the plan does not provide (a bug).
    """
    environment = jinja2.Environment(
        loader=jinja2.FunctionLoader(template_file),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    environment.filters["quote"] = _quote
    body = environment.get_template(plan.template).render(**plan.values)
    header = f"# Rendered by mmaas from templates/{plan.template}; plan {plan.digest}\n"
    return header + body


def _quote(value: object) -> str:
    """A Dockerfile LABEL/ENV value as a double-quoted string (JSON escaping)."""
    return json.dumps(str(value))
