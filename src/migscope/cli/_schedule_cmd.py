"""``migscope schedule``: run reports and applies on cron schedules from one config file.

The logic lives in :mod:`migscope.scheduler` (imported when the command runs, not for
``--help``); this module reads the options, turns a bad file into one line on stderr (exit 1)
and maps a run to the exit status. The scheduler's
own output is JSON lines on stderr; ``--check`` prints a table on stdout.

Every ``report`` and ``apply`` job's ``args`` are parsed by the real ``migscope analyze`` and
``migscope apply`` commands (:func:`job_args_problem`) whenever the file is read: by
``--check``, at start-up and by ``--once``. A misspelt flag or a window of ``7 days`` then
fails now, one line per bad job, and not at the job's first run a week later.
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import click

from migscope.cli._errors import InvalidInput
from migscope.cli._params import Duration, seconds
from migscope.core import UserError, one_line
from migscope.scheduler import DEFAULT_SHUTDOWN_GRACE_SECONDS

if TYPE_CHECKING:
    from migscope.scheduler import JobConfig, ScheduleConfig


def _subcommand(kind: str) -> tuple[str, click.Command]:
    """The ``migscope`` subcommand a job of ``kind`` runs, as the real command object."""
    if kind == "report":
        from migscope.cli._analyze_cmd import analyze_command

        return "analyze", analyze_command
    from migscope.cli._apply_cmd import apply_command

    return "apply", apply_command


_Checks = list[tuple[tuple[str, ...], Callable[[], object]]]
"""The flags a check is about (none: the whole command line), and the check."""


def _analyze_values(params: dict[str, Any]) -> _Checks:
    """What ``migscope analyze`` checks in its body before it reads anything, per flag.

    Its ``--window``, ``--end``, ``--what-if`` and ``--headroom`` are strings to click and
    parsed when the command runs; these are the same functions, so they fail here the same way.
    """
    from migscope.cli._analyze_inputs import parse_end, parse_headroom, parse_what_if, parse_window

    def one_source() -> None:
        named = [params[k] for k in ("source", "simulate", "prometheus") if params[k] is not None]
        if len(named) != 1:  # the check choose_source makes first, in its words
            raise InvalidInput(
                "give exactly one of --source FILE, --simulate SCENARIO, --prometheus URL"
            )

    return [
        (("--window",), lambda: parse_window(params["window"])),
        (("--end",), lambda: parse_end(params["end"])),
        (("--what-if",), lambda: parse_what_if(params["what_if"])),
        (("--headroom",), lambda: parse_headroom(params["headroom"])),
        ((), one_source),
    ]


def _apply_values(params: dict[str, Any]) -> _Checks:
    """What ``migscope apply`` checks before it reads the plan: plan age and windows."""
    from migscope.applier import parse_window_spec
    from migscope.cli._apply_cmd import parse_max_plan_age

    def windows() -> None:
        for spec in (*params["old_windows"], *params["windows"]):
            try:
                parse_window_spec(spec)
            except ValueError as exc:
                raise InvalidInput(str(exc)) from exc

    return [
        (("--max-plan-age",), lambda: parse_max_plan_age(params["max_plan_age"])),
        (("--maintenance-window", "--window"), windows),  # and its deprecated alias
    ]


def _position(args: Sequence[str], names: Sequence[str]) -> int | None:
    """Where in ``args`` one of the option ``names`` is written (``--x V`` or ``--x=V``)."""
    for index, arg in enumerate(args):
        if any(arg == n or (n.startswith("--") and arg.startswith(n + "=")) for n in names):
            return index
    return None


def job_args_problem(job: JobConfig) -> tuple[int | None, str] | None:
    """What ``migscope analyze``/``apply`` would refuse in ``job.args``, without running it.

    The arguments go through the real command's click parser (``make_context`` with
    resilient parsing off: unknown options, missing ones, every type conversion such as
    :class:`~migscope.cli._params.Duration`), then through the few checks the command makes
    on its string flags before it reads anything (:func:`_analyze_values`,
    :func:`_apply_values`). Nothing is read, connected to or written.

    Returns:
        None when the run would start, else ``(index in args or None, click's message)``.
    """
    if job.args is None:  # a command job: any program, not ours to check
        return None
    from migscope.cli.main import cli

    name, command = _subcommand(job.kind)
    args = list(job.args)
    parent = click.Context(cli, info_name="migscope", **cli.context_settings)
    quiet = io.StringIO()  # deprecation warnings, and a --help page, are not for here
    try:
        with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
            ctx = command.make_context(name, list(args), parent=parent, resilient_parsing=False)
    except click.exceptions.Exit:
        at = _position(args, parent.help_option_names)
        shown = args[at] if at is not None else "--help"
        return at, f"migscope {name}: {shown} prints the help and runs nothing"
    except click.ClickException as exc:
        message = exc.format_message()
        at = _click_position(exc, args, message)
        return at, f"migscope {name}: {one_line(Exception(message))}"
    except UserError as exc:
        return _named_position(args, str(exc)), f"migscope {name}: {one_line(exc)}"
    values = _analyze_values if job.kind == "report" else _apply_values
    for flags, check in values(ctx.params):
        try:
            check()
        except (click.ClickException, UserError) as exc:
            text = exc.format_message() if isinstance(exc, click.ClickException) else str(exc)
            at = _position(args, flags)
            return at, f"migscope {name}: {one_line(Exception(text))}"
    return None


def _click_position(exc: click.ClickException, args: Sequence[str], message: str) -> int | None:
    """The index of the argument click's error is about, when it names one."""
    if isinstance(exc, click.NoSuchOption):
        return _position(args, [exc.option_name])
    if isinstance(exc, click.BadParameter) and exc.param is not None:
        return _position(args, [*exc.param.opts, *exc.param.secondary_opts])
    return _named_position(args, message)


def _named_position(args: Sequence[str], message: str) -> int | None:
    """The first option in ``args`` that ``message`` names (``bad --node-timeout '5 m'``)."""
    for index, arg in enumerate(args):
        option = arg.split("=", 1)[0]
        if option.startswith("-") and re.search(
            rf"(?<![\w-]){re.escape(option)}(?![\w-])", message
        ):
            return index
    return None


def _load(config_file: str) -> ScheduleConfig:
    """The schedule file with every job's arguments checked; each bad job is one line.

    Raises:
        click.exceptions.Exit: with status 1, after one ``migscope: error:`` line per job
            whose arguments ``migscope`` would refuse.
    """
    from migscope.scheduler import JobArgsError, load_schedule

    try:
        return load_schedule(config_file, check_args=job_args_problem)
    except JobArgsError as exc:
        for problem in exc.problems:
            click.echo(f"migscope: error: {one_line(problem)}", err=True)
        raise click.exceptions.Exit(1) from exc


def check_lines(config: ScheduleConfig) -> list[str]:
    """One line per job: name, kind, cron line and the next time it fires."""
    from migscope.scheduler import next_fire_times

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
    from migscope.scheduler import JsonLog, run_once, serve

    if check and once is not None:
        raise click.UsageError("--check and --once exclude each other")
    config = _load(config_file)
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
