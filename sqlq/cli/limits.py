"""``sqlq limit``: a tube's flow control (Queue.limit, Queue.limits; sqlq/core/limits.py)."""

from __future__ import annotations

from typing import Any

import click

from sqlq.core import limits as flow

from .group import cli
from .options import TUBE, Checked, json_option, queue_from_ctx
from .output import emit


def _rate(value: Any) -> tuple[int, float] | None:
    return value if isinstance(value, tuple) else flow.parse_rate_limit(str(value))


CONCURRENCY = Checked("K|none", lambda value: flow.parse_concurrency(str(value)))
RATE = Checked("N/UNIT|none", _rate)


def _line(tube: str, doc: dict[str, Any]) -> str:
    cap = doc["concurrency"]
    rate = doc["rate"]
    parts = [f"concurrency {cap}" if cap is not None else "no cap",
             f"rate {flow.format_rate(*rate)}" if rate is not None else "no rate"]
    if "group_concurrency" in doc:
        group_cap, group_rate = doc["group_concurrency"], doc["group_rate"]
        parts += [f"group concurrency {group_cap}" if group_cap is not None
                  else "no group cap",
                  f"group rate {flow.format_rate(*group_rate)}" if group_rate is not None
                  else "no group rate"]
    return f"{tube}: {', '.join(parts)}"


@cli.command()
@click.argument("tube", type=TUBE, required=False)
@click.option("--concurrency", "-c", type=CONCURRENCY,
              help="At most K jobs of the tube reserved at once, by every process (none: no cap).")
@click.option("--rate", "-r", type=RATE,
              help="At most N claims per unit: 20/s, 100/m, 5/h, 3/10s (none: no rate).")
@click.option("--group-concurrency", type=CONCURRENCY,
              help="At most K jobs of each group of the tube reserved at once (none: no cap).")
@click.option("--group-rate", type=RATE,
              help="At most N claims of each group per unit, as --rate (none: no rate).")
@click.option("--clear", is_flag=True, help="Remove every limit.")
@json_option
@click.pass_context
def limit(ctx: click.Context, tube: str | None, concurrency: Any, rate: Any,
          group_concurrency: Any, group_rate: Any, clear: bool, as_json: bool) -> None:
    """Set, remove or show a tube's concurrency cap and rate, and its groups'; with no
    TUBE, list them all.

    Limits live in the database: every worker, process and host (and sqlq serve) obeys
    them at once, enforced in the claim. The rate is a token bucket of N tokens
    refilled over the unit (a burst of N, then N per unit). The group limits cap each
    group of the tube (put --group) on its own. An option not given stays.

    Example:

    \b
        sqlq limit emails --concurrency 2 --rate 20/s
        sqlq limit emails --rate none
        sqlq limit syncs --group-concurrency 1 --group-rate 60/m
        sqlq limit emails --clear
        sqlq limit
    """
    queue = queue_from_ctx(ctx)
    options = (("concurrency", concurrency), ("rate", rate),
               ("group_concurrency", group_concurrency), ("group_rate", group_rate))
    given = {name: value for name, value in options
             if ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE}
    if tube is None:
        if given or clear:
            raise click.UsageError("name the TUBE to limit")
        every = queue.limits()
        emit([{"tube": name, **doc} for name, doc in every.items()], as_json,
             text="\n".join(_line(name, doc) for name, doc in every.items()) or None)
        return
    if clear:
        if given:
            raise click.UsageError("--clear removes every limit: give no other option")
        given = {"concurrency": None, "rate": None}
        if "group_concurrency" in queue.limits().get(tube, {}):
            given.update(group_concurrency=None, group_rate=None)
    doc = queue.limit(tube, **given) if given else queue.limits().get(
        tube, {"concurrency": None, "rate": None})
    emit({"tube": tube, **doc}, as_json, text=_line(tube, doc))
