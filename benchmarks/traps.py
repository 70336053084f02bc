"""The production sweep walked into each trap: hours of service time before and after.

    PYTHONPATH=src python benchmarks/traps.py [--start-min 7] [--bench-min 2] [--configs 16]

The sweep: 16 DDTree configs + the AR baseline, a grid of 2 passes (34 trials),
every trial a stop/start of 7 minutes and a bench of 2, the default retry (2
attempts). Each trap is played twice through the decision code the sweep runs:

    before  the sweep as it was: the trap is met where the old code met it
            (a missing file at the first bench, every attempt; a failing
            service at every config; a changed timeout meant a new store)
    after   this code: `check_before_stopping` refuses the spec (0 starts), the
            `Breaker` is played over the same always-failing plan, a resume with
            changed run settings passes `measured_change` and keeps its trials,
            the restore puts the service back in one start

The checks are the real ones (the script builds each trapped spec and asserts
the refusal); starts and hours are counted from the plan, so the figures are a
model of the clock, not a measurement of it. Results: docs/benchmarks.md "Traps".
"""

from __future__ import annotations

import argparse
import tempfile
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ddtune.errors import UserError
from ddtune.sweep.checks.before_stop import check_before_stopping
from ddtune.sweep.plan import parse_spec
from ddtune.sweep.run.policy import Breaker
from ddtune.sweep.spec.changes import measured_change

RETRY = 2  # [retry] attempts, the default
REPEATS = 2  # a grid's default passes


@dataclass(frozen=True)
class Scale:
    start_min: float
    bench_min: float
    configs: int  # besides the baseline

    @property
    def trials(self) -> int:
        return (self.configs + 1) * REPEATS

    def hours(self, starts: int, benches: int = 0) -> float:
        return (starts * self.start_min + benches * self.bench_min) / 60


@dataclass(frozen=True)
class Row:
    trap: str
    before: str
    after: str
    before_h: float
    after_h: float


def spec_text(configs: int, window: str = '"none"', bench: str = "", sweep: str = "") -> str:
    tables = "".join(
        f'[[configs]]\nmode = "ddtree"\nbudget = {4 + 2 * i}\ntopk = 4\nwindow = {window}\n'
        for i in range(configs)
    )
    return textwrap.dedent(f"""\
        [sweep]
        name = "prod"
        baseline = {{ mode = "ar" }}
        {sweep}
        {tables}
        [service]
        command = ["serve", "--budget", "{{budget}}", "--topk", "{{topk}}", "--window", "{{window}}", "--mode", "{{mode}}"]
        engine_check = false
        [service.timeouts]
        start = 900
        [bench]
        {bench}
        [bench.coding]
        enabled = false
        [retry]
        attempts = {RETRY}
        """)


def refused(text: str, folder: Path) -> str:
    """The one line `sweep plan`/`run` prints for `text` (asserts it is refused)."""
    spec = parse_spec(text, "prod.toml", folder)
    try:
        check_before_stopping(spec, folder / "store" / "store.sqlite")
    except UserError as exc:
        return str(exc)
    raise AssertionError("the trap was not refused")


def missing_file(s: Scale, folder: Path) -> Row:
    """A prompts_file that does not exist: before, every attempt of every trial fails at its
    bench (bench_error), after a start each; after: refused."""
    refused(spec_text(s.configs, bench='prompts_file = "missing.jsonl"'), folder)
    starts = s.trials * RETRY
    return Row("bench file missing", f"{starts} starts", "0 starts (exit 2)", s.hours(starts), 0.0)


def indistinct_windows(s: Scale, folder: Path) -> Row:
    """Windows 2048 and none against the default bench (longest ~352 tokens): half the
    configs measure the other half again; after: refused."""
    half = s.configs // 2
    text = spec_text(half, window="2048") + "".join(
        f'[[configs]]\nmode = "ddtree"\nbudget = {4 + 2 * i}\ntopk = 4\nwindow = "none"\n'
        for i in range(half)
    )
    refused(text.replace("[service]", "\n[service]", 1), folder)
    wasted = half * REPEATS
    return Row(
        "windows the bench cannot tell apart",
        f"{wasted} trials wasted",
        "0 starts (exit 2)",
        s.hours(wasted, wasted),
        0.0,
    )


def broken_service(s: Scale) -> Row:
    """Every start fails (a full disk, a broken drafter path): before, every trial's
    attempts; after: the `Breaker` over the same plan, then the baseline as a control."""
    before = s.trials * RETRY
    breaker, after = Breaker(3), 0
    for trial in range(s.trials):
        after += breaker.attempts(RETRY)
        if breaker.record(trial, "failed", "crashed(1)"):
            after += 1  # the control: the baseline fails too, the sweep stops
            break
    return Row(
        "service fails whatever the config",
        f"{before} starts",
        f"{after} starts, exit 1",
        s.hours(before),
        s.hours(after),
    )


def operational_change(s: Scale) -> Row:
    """Half the sweep done, then the start timeout and retry raised: before, a new store
    (every finished trial measured again); after: the same store resumes."""
    old = spec_text(s.configs)
    new = old.replace("start = 900", "start = 1800").replace(
        f"attempts = {RETRY}", f"attempts = {RETRY + 1}"
    )
    assert measured_change(old, new) is None
    done = s.trials // 2
    return Row(
        "timeout/retry raised mid-sweep",
        f"{done} trials again",
        "0 (resumed)",
        s.hours(done, done),
        0.0,
    )


def left_stopped(s: Scale) -> Row:
    """A sweep that ends or is interrupted: before, the service stays stopped until someone
    starts it; after, one start back to its own configuration, READY-checked."""
    return Row(
        "service left stopped after the sweep",
        "down until noticed",
        "1 start (restored, READY)",
        float("nan"),
        s.hours(1),
    )


def table(rows: list[Row], s: Scale) -> str:
    head = (
        f"{s.configs} configs + baseline, {REPEATS} passes ({s.trials} trials), "
        f"{s.start_min:g} min a start, {s.bench_min:g} min a bench, retry {RETRY}"
    )
    lines = [
        head,
        "",
        "| trap | before | after | hours before | hours after |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        before = "unbounded" if r.before_h != r.before_h else f"{r.before_h:.2f} h"
        lines.append(f"| {r.trap} | {r.before} | {r.after} | {before} | {r.after_h:.2f} h |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--start-min", type=float, default=7.0)
    parser.add_argument("--bench-min", type=float, default=2.0)
    parser.add_argument("--configs", type=int, default=16)
    args = parser.parse_args()
    scale = Scale(args.start_min, args.bench_min, args.configs)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        traps: list[Callable[[], Row]] = [
            lambda: missing_file(scale, folder),
            lambda: indistinct_windows(scale, folder),
            lambda: broken_service(scale),
            lambda: operational_change(scale),
            lambda: left_stopped(scale),
        ]
        print(table([trap() for trap in traps], scale))


if __name__ == "__main__":
    main()
