"""A walk of one command through the package: modules visited, calls between them, returns.

    python tools/walk.py sweep plan examples/demo.toml --store /tmp/walk.sqlite
    PYTHONPATH=/old/checkout/src python tools/walk.py sweep plan ...   # another tree

Runs `ddtune ARGS` in this interpreter under `sys.setprofile` and counts, over
the calls of ddtune's own functions: the modules visited; the stays (each time
the walk enters a module from another); the climbs back up (an entry into a
module of a higher layer than its caller's: the package layers of
pyproject.toml, and the sweep's own layers inside `ddtune.sweep`); and the
returns that leave a module. Imports are not counted (a module's top level
runs once); the command's own output goes to /dev/null. docs/benchmarks.md
"The house" holds the figures.
"""

from __future__ import annotations

import contextlib
import io
import sys
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

LAYERS = [  # lowest first, as pyproject.toml's contract
    {"errors", "lazy", "extras"},
    {"tables", "jsonl", "assets"},
    {"params"},
    {"stats"},
    {"kinds"},
    {"engine"},
    {"train"},
    {"records"},
    {"services", "bench", "server"},
    {"report"},
    {"trace"},
    {"sweep"},
    {"cli", "launchers"},
]
SWEEP_LAYERS = [  # inside ddtune.sweep, lowest first
    {"spec"},
    {"store"},
    {"plan"},
    {"run"},
    {"cleanup", "status", "export", "reporting"},
    {"apply", "watch"},
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

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event not in ("call", "return"):
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith("ddtune") or frame.f_code.co_name == "<module>":
            return
        if event == "call":
            caller = self.stack[-1] if self.stack else None
            self.modules.add(module)
            if caller != module:
                self.stays += 1
                if caller is not None and rank(module) > rank(caller):
                    self.climbs += 1
            self.stack.append(module)
        elif self.stack:
            self.stack.pop()
            if self.stack and self.stack[-1] != module:
                self.returns += 1


def main(argv: list[str]) -> int:
    from ddtune.cli import main as ddtune

    walk = Walk()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        sys.setprofile(walk)
        try:
            code = ddtune(argv)
        finally:
            sys.setprofile(None)
    print(
        f"ddtune {' '.join(argv)}: exit {code}; {walk.stays} stays in {len(walk.modules)} "
        f"modules, {walk.climbs} climbs back up, {walk.returns} returns between modules"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
