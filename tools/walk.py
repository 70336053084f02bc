"""A walk of one command through the package: modules visited, calls between them, returns.

    python tools/walk.py sweep plan examples/demo.toml --store /tmp/walk.sqlite
    python tools/walk.py --run-to-report    # a tiny race from `sweep run` to `sweep report`
    PYTHONPATH=/old/checkout/src python tools/walk.py sweep plan ...   # another tree

`--run-to-report` writes a tiny race (AR and two configs of the FAKE server of
tests/services/fake_fault_server.py: stdlib, a start in ~0.1 s, a known token
delay per config) to a temporary folder, then walks `sweep run SPEC --store S`
and `sweep report --store S --out R` one after the other, and prints each walk,
their sum, and the part inside `ddtune.sweep` (the sweep's own structure,
without the bench and the service it drives), then the trials the race ran
(stays and returns grow with them; modules and distinct calls do not).

Runs `ddtune ARGS` in this interpreter under `sys.setprofile` and counts, over
the calls of ddtune's own functions: the modules visited; the stays (each time
the walk enters a module from another); the climbs back up (an entry into a
module of a higher layer than its caller's: the package layers of
pyproject.toml, and the sweep's own layers inside `ddtune.sweep`); and the
returns that leave a module. Imports are not counted (a module's and a class's
body run once); the command's own output goes to /dev/null. docs/benchmarks.md
"The house" holds the figures.
"""

from __future__ import annotations

import contextlib
import io
import socket
import sqlite3
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from inspect import CO_NEWLOCALS
from pathlib import Path
from types import FrameType
from typing import Any

LAYERS = [  # lowest first, as pyproject.toml's contract
    {"errors", "lazy", "extras"},
    {"tables", "jsonl", "assets"},
    {"params"},
    {"stats"},
    {"engines"},
    {"ddtree"},
    {"train"},
    {"records"},
    {"services", "bench", "server"},
    {"report"},
    {"trace"},
    {"sweep"},
    {"cli", "launchers"},
]
CHAIN = {  # the spec parsed, the sweep prepared, the checks before the first stop: before/after
    "parse_spec",  # the TOML parsed into a SweepSpec (a file's, or a stored spec's)
    "prepare",
    "sweep_mode",
    "choose_mode",
    "read_mode",
    "run_spec",
    "plan_spec",
    "first_trials",
    "trial_costs",
    "check_before_stopping",  # the spec's mistakes
    "check_launches",  # the engine's own parser over every planned launch
    "spec_forecast",  # a trace read
}
SWEEP_LAYERS = [  # inside ddtune.sweep, lowest first
    {"spec"},
    {"store"},
    {"checks"},
    {"plan"},
    {"run"},
    {"cleanup", "status", "export", "reporting", "reference"},
    {"apply", "watch", "canary"},
    {"demo"},
    {"commands", "tracing"},
]


def rank(module: str) -> tuple[int, int]:
    parts = module.split(".") + ["", ""]
    top = next((i for i, layer in enumerate(LAYERS) if parts[1] in layer), -1)
    inner = next((i for i, layer in enumerate(SWEEP_LAYERS) if parts[2] in layer), -1)
    return top, inner if parts[1] == "sweep" else -1


@dataclass
class Walk:
    modules: set[str] = field(default_factory=set)
    stays: int = 0
    climbs: int = 0
    returns: int = 0
    stack: list[str] = field(default_factory=list)
    prefix: str = "ddtune"  # the modules counted (the sweep's own: "ddtune.sweep")
    edges: set[tuple[str, str]] = field(default_factory=set)  # (caller, callee) modules
    chain: Counter[str] = field(default_factory=Counter)  # calls of CHAIN's functions

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event not in ("call", "return"):
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith(self.prefix) or not frame.f_code.co_flags & CO_NEWLOCALS:
            return  # a module's or a class's body: it runs once, on import
        if event == "call":
            if frame.f_code.co_name in CHAIN:
                self.chain[frame.f_code.co_name] += 1
            caller = self.stack[-1] if self.stack else None
            self.modules.add(module)
            if caller != module:
                self.stays += 1
                if caller is not None:
                    self.edges.add((caller, module))
                if caller is not None and rank(module) > rank(caller):
                    self.climbs += 1
            self.stack.append(module)
        elif self.stack:
            self.stack.pop()
            if self.stack and self.stack[-1] != module:
                self.returns += 1

    def add(self, other: Walk) -> Walk:
        """Two walks one after the other: the modules of both, the counts summed."""
        return Walk(
            self.modules | other.modules,
            self.stays + other.stays,
            self.climbs + other.climbs,
            self.returns + other.returns,
            prefix=self.prefix,
            edges=self.edges | other.edges,
            chain=self.chain + other.chain,
        )

    def line(self) -> str:
        return (
            f"{self.stays} stays in {len(self.modules)} modules, {len(self.edges)} distinct "
            f"calls between modules, {self.climbs} climbs back up, {self.returns} returns "
            "between modules"
        )


def walk(argv: list[str], prefixes: tuple[str, ...] = ("ddtune",)) -> tuple[int, list[Walk]]:
    """Run `ddtune ARGV` in this interpreter; its exit code and its walk over each prefix."""
    from ddtune.cli import main as ddtune

    walks = [Walk(prefix=prefix) for prefix in prefixes]

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        for counted in walks:
            counted(frame, event, arg)

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        sys.setprofile(profile)
        try:
            code = ddtune(argv)
        finally:
            sys.setprofile(None)
    return code, walks


TINY_RACE = """[sweep]
name = "walk"
strategy = "race"
min_repeats = 2
repeats = 4
seed = 0
baseline = { mode = "ar" }

[[configs]]
mode = "ddtree"
budget = 16
vars = { tok = "0.002" }

[[configs]]
mode = "ddtree"
budget = 64
vars = { tok = "0.004" }

[service]
command = ["{python}", "-S", "FAKE", "--port", "{port}", "--mode", "{mode}",
           "--budget", "{budget}", "--token-delay", "{tok}"]
port = PORT
generations = 1
gpu = "off"
vars = { tok = "0.001" }

[service.timeouts]
stop = 5
quiesce = 60
start = 60
health = 120

[bench]
warmup = 0
chars_per_token = 1.0
[bench.short]
n_prompts = 2
prompt_tokens = 20
max_tokens = 8
repeats = 1
[bench.long]
enabled = false
[bench.coding]
enabled = false

[retry]
attempts = 1
backoff = 0
"""


def run_to_report() -> int:
    """`sweep run` of the tiny race, then `sweep report`: each walk, the sum, the sweep's part."""
    fake = Path(__file__).resolve().parents[1] / "tests" / "services" / "fake_fault_server.py"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with tempfile.TemporaryDirectory(prefix="ddtune-walk-") as tmp:
        spec, store = Path(tmp) / "walk.toml", Path(tmp) / "store.sqlite"
        spec.write_text(TINY_RACE.replace("FAKE", str(fake)).replace("PORT", str(port)))
        commands = [
            ["sweep", "run", str(spec), "--store", str(store)],
            ["sweep", "report", "--store", str(store), "--out", str(Path(tmp) / "report")],
        ]
        prefixes = ("ddtune", "ddtune.sweep")
        totals = [Walk(prefix=prefix) for prefix in prefixes]
        for argv in commands:
            code, walks = walk(argv, prefixes)
            for i, one in enumerate(walks):
                print(f"{one.prefix}: ddtune {argv[0]} {argv[1]}: exit {code}; {one.line()}")
                totals[i] = totals[i].add(one)
            print(f"  the chain in `{argv[0]} {argv[1]}`: {dict(sorted(walks[0].chain.items()))}")
        for total in totals:
            print(f"{total.prefix}: sweep run -> sweep report: {total.line()}")
        print(f"the chain, calls: {dict(sorted(totals[0].chain.items()))}")
        with contextlib.closing(sqlite3.connect(store)) as db:
            trials = db.execute("SELECT status, COUNT(*) FROM trials GROUP BY status").fetchall()
        print(f"trials: {dict(trials)}")
    return 0


def main(argv: list[str]) -> int:
    if argv == ["--run-to-report"]:
        return run_to_report()
    code, (counted,) = walk(argv)
    print(f"ddtune {' '.join(argv)}: exit {code}; {counted.line()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
