"""`ddtune demo`: a real sweep on this machine with the bundled models, then its report.

    1. restart pass  examples/demo.toml: AR + 2 configs, 3 interleaved passes,
                     every trial a fresh `ddtune serve` process (process
                     controller, full readiness protocol)
    2. hot pass      examples/demo-hot.toml: one `ddtune serve` reconfigured in
                     place through POST /v1/ddtree/config (hot controller),
                     racing budget x topk x window + AR until one config is
                     left or the rest are equivalent within 5%
    3. reports       runs/demo/report and runs/demo/hot/report, plus the total time

The race runs hot because a restart costs ~5 s per trial on 2 cores and a race
on this noise needs 50-100 trials (docs/benchmarks.md "The demo").

Both passes resume like any sweep: running the demo again finishes what an
interrupted demo left and never redoes finished trials (`--fresh` starts over).
See docs/sweeps.md "Sweep".
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from ddtune.assets import default_drafter_dir, default_target_dir
from ddtune.errors import UserError
from ddtune.extras import require_engine
from ddtune.sweep.plan import STRATEGIES, read_spec
from ddtune.sweep.reporting import LiveReport, answer_text
from ddtune.sweep.run.common import RunSummary
from ddtune.sweep.run.loop import run_sweep
from ddtune.sweep.store.db import SpecChangedError, Store

if TYPE_CHECKING:
    from ddtune.report.result import ReportSummary

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
RESTART_SPEC = EXAMPLES / "demo.toml"
HOT_SPEC = EXAMPLES / "demo-hot.toml"


def run_demo(
    out: Path, restart_spec: Path | None = None, hot_spec: Path | None = None, fresh: bool = False
) -> int:
    """Both passes and both reports; the exit code is the sweep's (`run/common.py`): 0 all done,
    1 a pass had failed trials, 3 interrupted, 4 blocked (2, bad input, from the CLI)."""
    require_engine()  # the demo serves the bundled models with ddtune's own engine
    console = Console(stderr=True)
    started = time.monotonic()
    if restart_spec is None or hot_spec is None:
        (
            default_target_dir(),
            default_drafter_dir(),
        )  # fail fast, with the fix, if models are missing
    if fresh:
        _clear(out)
    passes = [
        ("restart", restart_spec or RESTART_SPEC, out),
        ("hot", hot_spec or HOT_SPEC, out / "hot"),
    ]
    codes, answers = [], []
    for kind, path, folder in passes:
        summary, report = _one_pass(console, kind, path, folder)
        if summary.interrupted or summary.blocked:
            console.print("[yellow]demo stopped[/]; run `ddtune demo` again to resume")
            return summary.exit_code
        codes.append(summary.exit_code)
        answers.append((kind, report))
    minutes = (time.monotonic() - started) / 60
    console.print(f"[bold]demo finished in {minutes:.1f} min[/]; reports:")
    for kind, _, folder in passes:
        console.print(
            f"  {kind:8s} {folder / 'report' / 'report.html'}  (store {folder / 'store.sqlite'})"
        )
    for kind, report in answers:  # the answer last, as each report begins with it
        if report is not None:
            console.print(f"[bold]{kind} pass[/]" + escape(answer_text(report)))
    return max(codes)  # 1 when a pass had failed trials (the sweep's exit codes)


def _one_pass(
    console: Console, kind: str, spec_path: Path, folder: Path
) -> tuple[RunSummary, ReportSummary | None]:
    spec = read_spec(spec_path)
    how = {
        "restart": "each configuration restarts `ddtune serve` (process controller)",
        "hot": "one `ddtune serve` reconfigured in place (hot controller, no restart)",
    }[kind]
    configs = len(spec.configs) + bool(spec.baseline)
    trials = (
        f"{configs} configs raced over {spec.min_repeats}-{spec.repeats} passes"
        if STRATEGIES[spec.strategy].races
        else f"{configs * spec.repeats} trials"
    )
    console.rule(f"{kind} pass: {spec.name}, {trials} — {how}")
    store_path = folder / "store.sqlite"
    try:
        live = LiveReport(folder / "report", spec.name, console)
        summary = run_sweep(spec, store_path, console, resume_hint="ddtune demo", on_pass=live)
    except SpecChangedError as exc:
        raise UserError(
            f"{store_path} holds an earlier demo run from different demo specs; "
            "run `ddtune demo --fresh` to start over"
        ) from exc
    summary.print(console, f"{kind} pass")
    console.print(live.summary_line(), markup=False, highlight=False)
    if summary.interrupted or summary.blocked:
        return summary, None
    store = Store(store_path, create=False)
    try:
        report = live.final(store)  # the end-of-run rewrite, printed (built again only if stale)
    finally:
        store.close()
    return summary, report


def _clear(out: Path) -> None:
    """Remove what earlier demo runs wrote under `out` (stores, trial logs, reports)."""
    for folder in (out, out / "hot"):
        for name in ("store.sqlite", "store.sqlite-wal", "store.sqlite-shm", "store.sqlite.lock"):
            (folder / name).unlink(missing_ok=True)
        for sub in ("trials", "report"):
            shutil.rmtree(folder / sub, ignore_errors=True)
