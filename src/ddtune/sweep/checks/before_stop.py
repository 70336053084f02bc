"""Every mistake a spec can hold, caught before the service is stopped for the first time.

    check_before_stopping(spec, store_path)     # raises UserError (exit 2) on the first one

`ddtune sweep plan` and `sweep run` (and `run_sweep` itself, for `retry` and
the demo) call it before anything is stopped or started. `CHECKS` is the one
list of these checks, in the order they run; each raises a one-line
`UserError` whose `.key` names the setting and whose text says the fix:

    bench files     every file the bench reads (bench.prompts_file, the coding
                    tasks_file, the suites' data, bench.traffic_file) exists and parses
    store           the store's folder can be created and written (`--store`)
    knobs           every planned DDTree config has budget >= 1 (topk >= 1 and every
                    method knob's range: refused when the spec is read)
    depth           no config drafts more tokens a round than its drafter's block
                    allows, where the block can be read here (`drafter_depth.py`)
    windows         each finite window is shorter than the longest context the bench
                    sends (prompt + answer, estimated at bench.chars_per_token); a
                    window at least that long drafts exactly as `none` does, so the two
                    cannot differ: refused unless `[sweep] allow_indistinct_windows = true`
    axes reach      every swept key changes what is started (`launch_axes.py`)
    launch paths    the executables and models a launch names exist where ddtune runs
                    it (`launch_paths.py`)

The engine's own check of every launch command (`engine_check.py`) runs after
these; the trace's binding to the spec's models is checked by `ddtune.cli.trace`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

from ddtune.bench.coding import read_tasks
from ddtune.bench.matrix import BenchMatrix
from ddtune.bench.prompts import read_prompts_file
from ddtune.bench.suites.plan import check_workloads
from ddtune.errors import UserError
from ddtune.params import window_to_wire
from ddtune.sweep.checks.drafter_depth import check_depth
from ddtune.sweep.checks.launch_axes import check_axes_reach
from ddtune.sweep.checks.launch_paths import check_launch_paths
from ddtune.sweep.spec.parse import SweepSpec

Check = Callable[[SweepSpec, Path], None]


def check_before_stopping(spec: SweepSpec, store_path: Path) -> None:
    """Run every check of `CHECKS`; the first mistake raises a `UserError`."""
    for check in CHECKS:
        check(spec, store_path)


def check_bench_files(spec: SweepSpec, store_path: Path) -> None:
    """Read every file the bench will read, as the bench would (one line per problem)."""
    bench = spec.bench
    if bench.prompts_file and bench.runs_bundled:
        _keyed("bench.prompts_file", lambda: read_prompts_file(bench.prompts_file or ""))
    coding = bench.coding
    if bench.runs_bundled and coding.enabled and coding.limit != 0 and coding.tasks_file:
        _keyed("bench.coding.tasks_file", lambda: read_tasks(coding.tasks_file or "", 1))
    _keyed("bench.suite", lambda: check_workloads(bench))


def check_store(spec: SweepSpec, store_path: Path) -> None:
    """The store's folder can be made and a file written in it: a probe file is written and
    removed, with any folder made for it (so `sweep plan` leaves nothing behind)."""
    path = store_path.expanduser()
    if path.is_dir():
        _store_refused(path, "it is a folder")
    made: list[Path] = []
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        made.append(folder)
        folder = folder.parent
    try:
        for missing in reversed(made):
            missing.mkdir()
        probe = path.parent / f".ddtune-probe-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
        if path.exists() and not os.access(path, os.W_OK):
            _store_refused(path, "it is not writable")
    except OSError as exc:
        _store_refused(path, exc.strerror or str(exc))
    finally:
        for folder in made:
            with contextlib.suppress(OSError):
                folder.rmdir()


def _store_refused(path: Path, why: str) -> None:
    raise UserError(
        f"--store {path}: cannot create the sweep store there ({why}); pass --store PATH "
        "in a folder you can write",
        key="store",
    )


def check_knobs(spec: SweepSpec, store_path: Path) -> None:
    """A DDTree tree of 0 nodes drafts nothing: budget must be at least 1."""
    for config, _ in spec.all_configs():
        params = config.params
        if params.mode == "ddtree" and params.budget < 1:
            raise UserError(
                f"{config.label()}: budget = {params.budget} drafts no token; use budget >= 1 "
                '(or mode = "ar" for no drafting)',
                key="budget",
            )


def check_windows(spec: SweepSpec, store_path: Path) -> None:
    """Refuse finite windows the bench cannot tell apart from `none` (module docstring)."""
    if _allowed(spec):
        return
    windows = sorted({c.params.window for c, _ in spec.all_configs() if c.params.window})
    if spec.search is not None:
        windows = sorted({*windows, *(p.window for p, _ in spec.search.covering() if p.window)})
    if not windows:
        return
    longest = longest_context(spec.bench)
    if longest is None:
        return  # a workload of unknown length (agent sessions cut to the service's context)
    wide = [w for w in windows if w >= longest]
    if wide:
        names = ", ".join(str(window_to_wire(w)) for w in wide)
        raise UserError(
            f"window {names} is not shorter than the longest context the bench sends "
            f"(about {longest} tokens: prompt + answer at bench.chars_per_token), so it drafts "
            'exactly as window = "none" does and costs restarts for nothing; use smaller '
            "windows, longer bench prompts (e.g. bench.long.prompt_tokens), or set "
            "[sweep] allow_indistinct_windows = true",
            key="space.window",
        )


def _allowed(spec: SweepSpec) -> bool:
    return spec.allow_indistinct_windows


def longest_context(bench: BenchMatrix) -> int | None:
    """The most tokens (prompt + answer) one request of the bench holds, estimated at
    `bench.chars_per_token`; None when a workload's length is only known at run time."""
    lengths = [*_bundled_lengths(bench)]
    try:
        lengths += _suite_lengths(bench)
    except _UnknownLength:
        return None
    return max(lengths, default=0) or None


class _UnknownLength(Exception):
    """A workload whose requests are sized by the running service."""


def _bundled_lengths(bench: BenchMatrix) -> list[int]:
    if not bench.runs_bundled:
        return []
    per_token = bench.chars_per_token
    out = []
    if bench.prompts_file:
        prompts = read_prompts_file(bench.prompts_file)
        for texts, table in ((prompts.short, bench.short), (prompts.long, bench.long)):
            if table.enabled and texts:
                out.append(int(max(map(len, texts)) / per_token) + table.max_tokens)
    else:
        out += [t.prompt_tokens + t.max_tokens for t in (bench.short, bench.long) if t.enabled]
    coding = bench.coding
    if coding.enabled and coding.limit != 0:
        from ddtune.assets import default_tasks_file

        tasks = read_tasks(coding.tasks_file or default_tasks_file(), coding.limit)
        out.append(int(max(len(t.prompt) for t in tasks) / per_token) + coding.max_tokens)
    return out


def _suite_lengths(bench: BenchMatrix) -> list[int]:
    from ddtune.bench.suites.plan import plan_workloads

    suites = [s for s in bench.suite if s != "bundled"]
    if not suites and bench.traffic_file is None:
        return []
    if "agent-sessions" in suites and bench.suites.agent_sessions.context_tokens is None:
        raise _UnknownLength
    workloads = plan_workloads(bench, lambda: None)
    out = []
    for request in workloads.requests:
        chars = len(request.prompt or "") + len(request.body_json or "")
        chars += sum(len(str(content)) for _, content in request.messages or ())
        chars += sum(len(str(turn)) for turn in request.follow_ups or ())
        out.append(int(chars / bench.chars_per_token) + (request.max_tokens or 0))
    return out


def _keyed(key: str, read: Callable[[], object]) -> None:
    """Run `read`; a `UserError` without a key gets `key` (the setting that names the file)."""
    try:
        read()
    except UserError as exc:
        if exc.key:
            raise
        raise UserError(f"{key}: {exc}", key=key) from None


CHECKS: tuple[Check, ...] = (
    check_bench_files,
    check_store,
    check_knobs,
    check_depth,
    check_windows,
    check_axes_reach,  # every swept key reaches the launch (sweep/checks/launch_axes.py)
    check_launch_paths,  # the executables and models it names (sweep/checks/launch_paths.py)
)

__all__ = ["CHECKS", "check_before_stopping", "longest_context"]
