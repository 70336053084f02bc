"""Sweeps: a spec of configs in, a store of measured trials and a report out.

    from ddtune.sweep import read_spec, run_sweep, Store, write_report
    spec = read_spec("examples/demo.toml")
    summary = run_sweep(spec, Path("runs/demo/store.sqlite"))   # resumable; summary.exit_code
    store = Store("runs/demo/store.sqlite")
    write_report(store, store.sweep_row(spec.name), Path("runs/demo/report"), Console())

`spec/` (the TOML spec), `checks/` (every check before the first stop), `plan/`
(the strategies, the race engines, costs; `read_spec` checks a spec with the
strategy table), `run/` (the trial loop, local or on Ray slots), `store/` (SQLite);
`status`, `export`, `reporting` (read a store; the live report), `plan_view`
(`sweep plan`: how a spec runs and what it costs, before the first stop), `watch/`
(`sweep watch`: a live page over a read-only store), `apply` (`sweep apply`:
make a config the service's own), `cleanup`, `demo`; the CLI is `ddtune.cli.sweep`.
The names are imported on first use, so `ddtune --help` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ddtune.lazy import lazy_names

if TYPE_CHECKING:
    from ddtune.sweep.plan import parse_spec, read_spec
    from ddtune.sweep.plan.prepare import plan_spec
    from ddtune.sweep.reporting import write_report
    from ddtune.sweep.run.common import RunSummary
    from ddtune.sweep.run.loop import run_sweep
    from ddtune.sweep.spec.parse import Config, SweepSpec
    from ddtune.sweep.store.db import Store

_NAMES = {
    "Config": "spec.parse",
    "SweepSpec": "spec.parse",
    "read_spec": "plan.strategies",
    "parse_spec": "plan.strategies",
    "plan_spec": "plan.prepare",
    "run_sweep": "run.loop",
    "RunSummary": "run.common",
    "Store": "store.db",
    "write_report": "reporting",
}
__getattr__ = lazy_names(__name__, _NAMES)

__all__ = [
    "Config",
    "RunSummary",
    "Store",
    "SweepSpec",
    "read_spec",
    "parse_spec",
    "plan_spec",
    "run_sweep",
    "write_report",
]
