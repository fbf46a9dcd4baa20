"""``migscope schedule``: run reports and applies on cron schedules from one config file.

The logic lives in :mod:`migscope.scheduler`; this module reads the options, turns a
bad file into one line on stderr (exit 1) and maps a run to the exit status. The scheduler's
own output is JSON lines on stderr; ``--check`` prints a table on stdout.
"""

from __future__ import annotations

import click

from migscope.cli.errors import InvalidInput
from migscope.cli.params import Duration, seconds
from migscope.scheduler import (
    DEFAULT_SHUTDOWN_GRACE_SECONDS,
    JsonLog,
    ScheduleConfig,
    load_schedule,
    next_fire_times,
    run_once,
    serve,
)

__all__ = ["check_lines", "schedule_command"]


def check_lines(config: ScheduleConfig) -> list[str]:
    """One line per job: name, kind, cron line and the next time it fires."""
    rows = [
        (job.name, job.kind, job.cron, when.isoformat() if when is not None else "never")
        for job, when in next_fire_times(config)
    ]
    name_w = max(len(r[0]) for r in rows)
    kind_w = max(len(r[1]) for r in rows)
    cron_w = max(len(r[2]) for r in rows)
    return [
        f"{name:<{name_w}}  {kind:<{kind_w}}  {cron:<{cron_w}}  next: {when}"
        for name, kind, cron, when in rows
    ]


@click.command("schedule")
@click.option(
    "--config", "config_file", required=True, metavar="FILE", help="Schedule file (YAML)."
)
@click.option(
    "--check", is_flag=True, help="Validate the file, print each job's next run, and exit."
)
@click.option("--once", metavar="JOB", help="Run JOB now and exit with its status.")
@click.option(
    "--shutdown-grace",
    type=Duration(positive=False),
    default=seconds(DEFAULT_SHUTDOWN_GRACE_SECONDS),
    show_default=True,
    help="How long a running job may finish after SIGTERM/SIGINT before it is terminated.",
)
@click.pass_context
def schedule_command(
    ctx: click.Context,
    config_file: str,
    check: bool,
    once: str | None,
    shutdown_grace: float,
) -> None:
    """Run report/apply jobs on cron schedules until SIGTERM (docs/schedule.md).

    A job never overlaps itself and runs wait for each other; missed runs are coalesced
    into one if less than misfire_grace_seconds late. Logs are JSON lines on stderr.
    """
    if check and once is not None:
        raise click.UsageError("--check and --once exclude each other")
    config = load_schedule(config_file)
    if check:
        for line in check_lines(config):
            click.echo(line)
        return
    log = JsonLog()
    if once is not None:
        names = [job.name for job in config.jobs]
        if once not in names:
            raise InvalidInput(f"{config_file}: no job {once!r} (jobs: {', '.join(names)})")
        result = run_once(config, once, log=log, shutdown_grace_s=shutdown_grace)
        ctx.exit(result.exit_status())
    ctx.exit(serve(config, log=log, shutdown_grace_s=shutdown_grace))
