"""`ddtune sweep run|plan|canary|status|retry|export|report|apply|watch|cleanup|init`.

Each handler parses its arguments, calls one function of the sweep package
and prints the result; errors in the user's input are `UserError`s. `run`,
`retry` and `demo` (`cli/demo.py`) exit with `EXIT_CODES`, Ctrl-C anywhere included.
See docs/sweeps.md "Sweep".
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from ddtune.cli import add_group
from ddtune.cli.sweep_init import add_init
from ddtune.cli.words import READY
from ddtune.errors import UserError

if TYPE_CHECKING:
    from ddtune.sweep.reporting import LiveReport
    from ddtune.sweep.run.common import RunSummary
    from ddtune.sweep.spec.parse import SweepSpec
    from ddtune.sweep.store.db import Store

EXIT_CODES = """exit codes: 0 every trial done; 1 some trials failed (now or earlier, not
retried); 2 bad input (spec, arguments, store, or a launch command the engine's own
parser refuses: nothing is stopped or started); 3 interrupted (Ctrl-C, SIGTERM;
rerun to resume); 4 blocked: the service's port is held by a process ddtune
never stops (named in the summary; free the port, then rerun to resume)"""


def register(subparsers: argparse._SubParsersAction) -> None:
    """`ddtune sweep ACTION ...` (one small function per action below)."""
    actions = add_group(
        subparsers, "sweep", "run, resume, inspect and report a configuration sweep"
    )
    _add_run(actions)
    _add_plan(actions)
    _add_canary(actions)
    _add_status(actions)
    _add_retry(actions)
    _add_export(actions)
    _add_report(actions)
    _add_apply(actions)
    _add_watch(actions)
    _add_cleanup(actions)
    add_init(actions)


def _add_run(actions: argparse._SubParsersAction) -> None:
    """`sweep run SPEC [--store S]`."""
    run = actions.add_parser(
        "run", help="run or resume the sweep described by a TOML spec", epilog=EXIT_CODES
    )
    run.add_argument("spec", help="sweep spec (TOML), e.g. examples/demo.toml")
    _store_arg(run, run=True)
    run.add_argument(
        "--canary",
        action="store_true",
        help="first prove the path in two starts (`sweep canary`); run only if it passes",
    )
    run.add_argument(
        "--apply",
        action="store_true",
        help="when the sweep ends, apply its recommendation (as `sweep apply` does) instead "
        "of restoring the configuration the service had before",
    )
    run.set_defaults(func=cmd_run)


def _add_canary(actions: argparse._SubParsersAction) -> None:
    """`sweep canary SPEC [--store S]`."""
    canary = actions.add_parser(
        "canary",
        help=f"prove a sweep's whole path in two starts: the first config {READY}, one "
        "request, the service restored and READY again",
        description=f"Two starts: the first planned config until {READY}, one request, then "
        "the configuration the service had, READY again. Nothing is stored.",
        epilog="exit codes: 0 passed; 1 not READY, the request failed or not restored; "
        "2 bad input (nothing stopped or started)",
    )
    canary.add_argument("spec", help="sweep spec (TOML)")
    _store_arg(canary, run=True)
    canary.set_defaults(func=cmd_canary)


def _add_plan(actions: argparse._SubParsersAction) -> None:
    """`sweep plan SPEC [--costs-from PREV] [--store RUN] [--all]`."""
    plan = actions.add_parser(
        "plan",
        help="how a spec runs, its restarts and hours, the limits it cuts at, the configs "
        "and trials, and the engine's check of every launch command (exit 2 when it refuses "
        "one)",
    )
    plan.add_argument("spec", help="sweep spec (TOML)")
    plan.add_argument(
        "--all",
        action="store_true",
        help="list every config and every trial planned (default: the first 20 configs and "
        "30 trials, and a count of the rest)",
    )
    plan.add_argument(
        "--costs-from",
        dest="store",
        metavar="STORE",
        help="a store of the same service to take measured start and bench times from (read "
        "only; default: the spec's own store, runs/<sweep name>/store.sqlite, if it exists)",
    )
    plan.add_argument(
        "--store",
        dest="run_store",
        metavar="STORE",
        help="the store `sweep run --store STORE` will write: checked writable, and its "
        "measured costs used when it exists",
    )
    plan.set_defaults(func=cmd_plan)


def _add_status(actions: argparse._SubParsersAction) -> None:
    """`sweep status`."""
    status = actions.add_parser("status", help="table of trials, their status and failures")
    _store_arg(status)
    status.set_defaults(func=cmd_status)


def _add_retry(actions: argparse._SubParsersAction) -> None:
    """`sweep retry [--failed]`."""
    retry = actions.add_parser(
        "retry", help="rerun unfinished trials with the spec kept in the store", epilog=EXIT_CODES
    )
    retry.add_argument("--failed", action="store_true", help="only the failed trials")
    _store_arg(retry, changes=True)
    retry.set_defaults(func=cmd_retry)


def _add_export(actions: argparse._SubParsersAction) -> None:
    """`sweep export [--format csv|json] [--out F]`."""
    export = actions.add_parser("export", help="write the trials and their metrics as CSV or JSON")
    export.add_argument("--format", choices=("csv", "json"), default="csv")
    export.add_argument("--out", help="output file (default: standard output)")
    _store_arg(export)
    export.set_defaults(func=cmd_export)


def _add_report(actions: argparse._SubParsersAction) -> None:
    """`sweep report [--out DIR] [--load-weights MIX]`."""
    report = actions.add_parser("report", help="HTML/Markdown/CSV report with uncertainty")
    report.add_argument(
        "--out",
        help="folder for report.html, report.md, results.csv, results.json and the plots "
        "(default: report/ beside the store, where the live report of `sweep run` is)",
    )
    report.add_argument(
        "--load-weights",
        help="load mix to recommend for, e.g. c1=0.2,c16=0.8 (overrides the spec's [report])",
    )
    _store_arg(report)
    report.set_defaults(func=cmd_report)


def _add_apply(actions: argparse._SubParsersAction) -> None:
    """`sweep apply [--config LABEL] [--dry-run] [--revert]`."""
    apply = actions.add_parser(
        "apply",
        help="make the recommended (or a named) config the service's lasting configuration",
        description="systemd: a persistent drop-in beside the unit, daemon-reload and a "
        f"restart through the full readiness protocol (rolled back if not {READY}); process "
        "and hooks: print the exact launch command; hot: apply in place. The engine's own "
        "parser checks the command first.",
        epilog="exit codes: 0 done; 1 not READY (a systemd apply is rolled back); 2 bad input",
    )
    apply.add_argument(
        "--config", help="the trial label to apply (default: the report's recommendation)"
    )
    apply.add_argument(
        "--dry-run", action="store_true", help="say what would happen, change nothing"
    )
    apply.add_argument("--revert", action="store_true", help="undo the last apply")
    apply.add_argument(
        "--schedule",
        nargs="?",
        const="",
        metavar="FILE",
        help="apply a schedule (the config per range of concurrent requests): the report's, "
        "or FILE (a report's results.json or schedule.json)",
    )
    _store_arg(apply, changes=True)
    apply.set_defaults(func=cmd_apply)


def _add_watch(actions: argparse._SubParsersAction) -> None:
    """`sweep watch [--port P] [--host H] [--interval S]`."""
    watch = actions.add_parser(
        "watch",
        help="a live page of a sweep (running, finished or interrupted) in the browser",
        description="Serve a page that refreshes itself: the answer so far, each config's "
        "state, the race so far, the ETA, failures with their log tails and the Ray slots. "
        "Reads the store read-only, so it can run beside `sweep run`, and after it.",
    )
    _store_arg(watch)
    watch.add_argument("--port", type=int, default=8780, help="port (default 8780; 0: any free)")
    watch.add_argument("--host", default="127.0.0.1", help="address (default 127.0.0.1)")
    watch.add_argument(
        "--interval", type=float, default=2.0, help="seconds between refreshes (default 2)"
    )
    watch.set_defaults(func=cmd_watch)


def _add_cleanup(actions: argparse._SubParsersAction) -> None:
    """`sweep cleanup [--store S] [--dry-run]`."""
    cleanup = actions.add_parser(
        "cleanup",
        help="stop ddtune servers left by killed sweep runs (never another process)",
        description="Stop the servers a killed `sweep run` left running: ddtune-tagged "
        "processes whose runner is gone. Servers of a running sweep and processes "
        "ddtune did not start are listed and left alone.",
    )
    cleanup.add_argument(
        "--store", help="only this store's leftovers (default: every store's, this user's)"
    )
    cleanup.add_argument("--dry-run", action="store_true", help="list them, stop nothing")
    cleanup.set_defaults(func=cmd_cleanup)


def _store_arg(parser: argparse.ArgumentParser, run: bool = False, changes: bool = False) -> None:
    """`--store` (and `--sweep`): a command that changes the service (`changes`) never guesses
    among several stores or sweeps; a reading command takes the newest and says so."""
    if run:
        default = "runs/<sweep name>/store.sqlite"
    elif changes:
        default = "the only runs/*/store.sqlite there is; with several, --store is required"
    else:
        default = "the newest runs/*/store.sqlite, named on stderr"
    parser.add_argument("--store", help=f"the sweep's SQLite store (default: {default})")
    if not run:
        which = "required when the store holds several" if changes else "the newest"
        parser.add_argument("--sweep", help=f"sweep name inside the store ({which})")


def exit_3_on_ctrl_c(handler: Callable[[argparse.Namespace], int]) -> Callable[..., int]:
    """Ctrl-C outside the trial loop (loading the spec, the report) exits 3 too."""

    @functools.wraps(handler)
    def wrapped(args: argparse.Namespace) -> int:
        from ddtune.sweep.run.common import EXIT_INTERRUPTED

        try:
            return handler(args)
        except KeyboardInterrupt:
            print("ddtune: interrupted; rerun the same command to resume", file=sys.stderr)
            return EXIT_INTERRUPTED

    return wrapped


@exit_3_on_ctrl_c
def cmd_run(args: argparse.Namespace) -> int:
    from ddtune.sweep.canary import run_canary
    from ddtune.sweep.checks import check_sweep
    from ddtune.sweep.plan import read_spec
    from ddtune.sweep.reporting import live_report
    from ddtune.sweep.run.common import default_store_path
    from ddtune.sweep.run.loop import run_sweep

    spec = read_spec(args.spec)
    _print_notes(spec)
    store_path = Path(args.store) if args.store else default_store_path(spec)
    checked = check_sweep(spec, store_path)  # once; refused: exit 2, nothing stopped or started
    hint = f"ddtune sweep run {args.spec}" + (f" --store {args.store}" if args.store else "")
    console = Console(stderr=True)
    if args.canary and run_canary(spec, store_path, console, checked) != 0:
        return 1
    live = live_report(store_path, spec.name, console)
    summary = run_sweep(
        spec,
        store_path,
        console,
        resume_hint=hint,
        on_pass=live,
        checked=checked,
        restore_at_end=not args.apply,
    )
    console.print(live.summary_line(), markup=False, highlight=False)
    _print_summary(console, summary)
    if not summary.stopped and measured(summary):
        _print_answer(console, live, store_path, spec.name)
    if args.apply and not summary.stopped:
        return _apply_or_restore(spec, store_path, summary, console)
    return summary.exit_code


def _print_notes(spec: SweepSpec) -> None:
    """The spec's notes (old key names it uses), once, on stderr: `note: <source>: ...`."""
    for note in spec.notes:
        print(f"note: {spec.source}: {note}", file=sys.stderr)


def _apply_or_restore(
    spec: SweepSpec, store_path: Path, summary: RunSummary, console: Console
) -> int:
    """`sweep run --apply` after a sweep that ended: the recommendation applied, or (none
    decided, or it did not become READY) the service restored as it was."""
    from ddtune.services import build_controller
    from ddtune.sweep.apply import apply_config
    from ddtune.sweep.store.db import Store

    store = Store(store_path, create=False)
    try:
        code = apply_config(store, store.sweep_row(spec.name), None, False, console)
    except UserError as exc:
        console.print(f"not applied: {escape(str(exc))}")
        code = 1
    finally:
        store.close()
    if code != 0 and summary.before is not None:  # None: the Ray slots stopped theirs
        controller = build_controller(spec.service, store_path.parent.resolve())
        console.print(escape(controller.restore(summary.before, spec.baseline)))
    return max(code, summary.exit_code)


def _print_answer(console: Console, live: LiveReport, store_path: Path, sweep: str) -> None:
    """The answer last (the headline and the apply command), as the report begins with it:
    the live report's last analysis when no pass ended since, else the store's now."""
    from ddtune.sweep.reporting import analyze_stored, answer_text
    from ddtune.sweep.store.db import Store

    if live.last is not None and not live.dirty:
        report = live.last[0]
    else:
        store = Store(store_path, create=False)
        try:
            report = analyze_stored(store, store.sweep_row(sweep), prepared=live.prepared)
        finally:
            store.close()
    console.print(answer_text(report), markup=False, highlight=False)


@exit_3_on_ctrl_c
def cmd_canary(args: argparse.Namespace) -> int:
    from ddtune.sweep.canary import run_canary
    from ddtune.sweep.plan import read_spec
    from ddtune.sweep.run.common import default_store_path

    spec = read_spec(args.spec)
    store_path = Path(args.store) if args.store else default_store_path(spec)
    return run_canary(spec, store_path, Console(stderr=True))


def cmd_plan(args: argparse.Namespace) -> int:
    from ddtune.sweep.plan import read_spec
    from ddtune.sweep.plan_view import plan_text, plan_view
    from ddtune.sweep.run.common import default_store_path

    spec = read_spec(args.spec)
    _print_notes(spec)
    run_store = Path(args.run_store) if args.run_store else default_store_path(spec)
    costs_from = Path(args.store) if args.store else None
    view = plan_view(spec, run_store, costs_from, everything=args.all)
    console = Console()
    if not console.is_terminal:
        console = Console(width=160)  # a file or pipe: do not fold the tables to 80 columns
    print(plan_text(view.document, console), end="")
    return 0 if view.ok else 2


def cmd_status(args: argparse.Namespace) -> int:
    from ddtune.sweep.status import status_table

    store = _open_store(args)
    try:
        console = Console()
        if not console.is_terminal:
            console = Console(width=160)  # a file or pipe: do not fold the table to 80 columns
        console.print(status_table(store, store.sweep_row(args.sweep)))
    finally:
        store.close()
    return 0


@exit_3_on_ctrl_c
def cmd_retry(args: argparse.Namespace) -> int:
    from ddtune.sweep.reporting import live_report, stored_spec
    from ddtune.sweep.run.loop import run_sweep

    store = _open_store(args, changes=True)
    try:
        row = store.sweep_row(args.sweep)
    finally:
        store.close()
    spec = stored_spec(store, row)
    console = Console(stderr=True)
    hint = f"ddtune sweep retry --store {store.path}"
    live = live_report(store.path, spec.name, console)
    summary = run_sweep(
        spec,
        store.path,
        console,
        hint,
        reopen_failed=True,
        only_reopened=args.failed,
        on_pass=live,
    )
    console.print(live.summary_line(), markup=False, highlight=False)
    _print_summary(console, summary)
    return summary.exit_code


def cmd_export(args: argparse.Namespace) -> int:
    from ddtune.sweep.export import export_csv, export_json

    store = _open_store(args)
    try:
        row = store.sweep_row(args.sweep)
        text = (export_csv if args.format == "csv" else export_json)(store, row)
    finally:
        store.close()
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from ddtune.sweep.reporting import write_report

    store = _open_store(args)
    try:
        overrides = {"load_weights": _weights(args.load_weights)} if args.load_weights else {}
        out = Path(args.out) if args.out else store.path.parent / "report"
        write_report(store, store.sweep_row(args.sweep), out, Console(), overrides)
    finally:
        store.close()
    return 0


def cmd_apply(args: argparse.Namespace) -> int:
    from ddtune.sweep.apply import apply_config, revert_config

    if args.revert and args.config:
        raise UserError("--revert restores what the last apply replaced; it takes no --config")
    if args.schedule is not None and (args.config or args.revert):
        raise UserError("--schedule applies a schedule; it takes no --config or --revert")
    store = _open_store(args, changes=True)
    try:
        row = store.sweep_row(args.sweep)
        console = Console(stderr=True, soft_wrap=True)  # paths and commands stay whole
        if args.revert:
            return revert_config(store, row, args.dry_run, console)
        if args.schedule is not None:
            from ddtune.sweep.apply_schedule import apply_schedule

            return apply_schedule(store, row, args.schedule or None, args.dry_run, console)
        return apply_config(store, row, args.config, args.dry_run, console)
    finally:
        store.close()


def cmd_watch(args: argparse.Namespace) -> int:
    from ddtune.sweep.watch import serve_watch

    if args.interval < 0.2:
        raise UserError("--interval must be at least 0.2 seconds", key="interval")
    if not 0 <= args.port <= 65535:
        raise UserError(f"--port {args.port} is not a port (0-65535)", key="port")
    store = Path(args.store) if args.store else _newest_store()
    return serve_watch(store, args.sweep, args.host, args.port, args.interval, say=_say)


def _say(line: str) -> None:
    print(line, flush=True)


def cmd_cleanup(args: argparse.Namespace) -> int:
    from ddtune.sweep.cleanup import cleanup

    return cleanup(Path(args.store) if args.store else None, args.dry_run, Console(stderr=True))


def _weights(text: str) -> dict[str, float]:
    """`c1=0.2,c16=0.8` -> {"c1": 0.2, "c16": 0.8}; a malformed item is a UserError."""
    weights = {}
    for item in text.split(","):
        key, eq, value = item.strip().partition("=")
        try:
            weights[key.strip()] = float(value)
        except ValueError:
            eq = ""
        if not eq:
            raise UserError(
                f"--load-weights: expected LEVEL=WEIGHT items like c1=0.2,c16=0.8; got {item!r}",
                key="report.load_weights",
            )
    return weights


def _open_store(args: argparse.Namespace, changes: bool = False) -> Store:
    """The store `--store` names, else one under runs/: for a command that `changes` the
    service the only one there is (several: refused, listed), for a reading command the
    newest (named on stderr). A store of several sweeps needs `--sweep` to change one."""
    from ddtune.sweep.store.db import Store

    path = Path(args.store) if args.store else _newest_store(changes)
    store = Store(path, create=False)
    if changes and not args.sweep:
        try:
            _one_sweep(store)
        except UserError:
            store.close()
            raise
    return store


def _one_sweep(store: Store) -> None:
    """A store holding several sweeps: refused, each named (a change names its sweep)."""
    names = store.sweep_names()
    if len(names) > 1:
        raise UserError(
            f"{store.path} holds {len(names)} sweeps ({', '.join(names)}); this command "
            "changes the service, so it does not guess: pass --sweep NAME",
            key="sweep",
        )


def _newest_store(changes: bool = False) -> Path:
    """The store under runs/ a command reads (the newest) or changes (the only one)."""
    found = sorted(Path("runs").glob("*/store.sqlite"), key=lambda p: p.stat().st_mtime)
    if not found:
        raise UserError(
            "no sweep store under runs/; pass --store PATH or run `ddtune sweep run SPEC`",
            key="store",
        )
    if changes and len(found) > 1:
        listed = ", ".join(str(p) for p in reversed(found))
        raise UserError(
            f"{len(found)} stores under runs/ ({listed}, newest first); this command changes "
            "the service, so it does not guess: pass --store PATH",
            key="store",
        )
    which = "the only store" if len(found) == 1 else f"the newest of {len(found)} stores"
    more = "" if len(found) == 1 else "; --store PATH for another"
    print(f"store: {found[-1]} ({which} under runs/{more})", file=sys.stderr)
    return found[-1]


def _print_summary(console: Console, summary: RunSummary) -> None:
    summary.print(console)
    if summary.stopped:
        return  # the resume command is printed with the reason
    if not measured(summary):
        console.print(
            "nothing was measured: every trial failed (their failure classes and logs are "
            "above). Fix the cause, then rerun them: "
            f"ddtune sweep retry --failed --store {summary.store_path}"
        )
        return
    report = summary.store_path.parent / "report"
    console.print(f"next: ddtune sweep report --store {summary.store_path} --out {report}")


def measured(summary: RunSummary) -> bool:
    """Did any trial of the sweep finish (now or in an earlier run)?"""
    return summary.done + summary.already_done > 0
