"""``--egress-allow HOST,...`` of ``conveyor serve`` and ``conveyor worker``: the hosts, addresses
and CIDR ranges tenant URLs may reach even when they are not public (see :mod:`conveyor.egress`).
The option adds to ``$CONVEYOR_EGRESS_ALLOW``, which the process's parts read."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

import click

from conveyor.egress import ENVIRONMENT_VARIABLE, EgressPolicy

F = TypeVar("F", bound=Callable[..., Any])


def _export(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> None:
    if not values:
        return
    try:
        EgressPolicy.parse(values)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None
    entries = [os.environ.get(ENVIRONMENT_VARIABLE, ""), *values]
    os.environ[ENVIRONMENT_VARIABLE] = ",".join(e for e in entries if e)


def egress_allow_option(fn: F) -> F:
    return click.option(
        "--egress-allow",
        multiple=True,
        metavar="HOST,...",
        expose_value=False,
        callback=_export,
        help=(
            "Hosts, addresses or CIDR ranges that tenant URLs (S3 endpoints, registries, probe targets) may "
            f"reach although loopback, link-local or private (repeatable; also ${ENVIRONMENT_VARIABLE})."
        ),
    )(fn)
