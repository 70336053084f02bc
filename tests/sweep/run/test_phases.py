"""The runner's side of the controller boundary: what it passes to `reconfigure()` and how
the phases the controller announces reach the progress line (no server started here)."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from ddtune.params import DecodeParams
from ddtune.services.outcome import Outcome
from ddtune.services.protocol import PHASES
from ddtune.sweep.plan import parse_spec
from ddtune.sweep.plan.prepare import plan_spec
from ddtune.sweep.run.attempt import PHASE_TEXT
from ddtune.sweep.run.common import RunSummary
from ddtune.sweep.run.loop import TrialLoop
from ddtune.sweep.store.db import Store

SPEC = """
[sweep]
name = "phases"
repeats = 1
[[configs]]
mode = "ddtree"
budget = 8
topk = 2
window = 64
vars = { mem = 0.5 }
[service]
command = ["serve", "--budget", "{budget}", "--mem", "{mem}"]
vars = { mem = 0.9 }
[retry]
attempts = 2
backoff = 0
"""


class FakeController:
    """Announces every phase, then fails like a crashed server would."""

    def __init__(self) -> None:
        self.calls: list[tuple[DecodeParams, dict, Path]] = []

    def reconfigure(self, params, attempt_dir, *, user_vars=None, on_phase=None) -> Outcome:
        self.calls.append((params, dict(user_vars or {}), Path(attempt_dir)))
        for phase in PHASES:
            on_phase(phase)
        return Outcome(ready=False, failure="crashed(1)", detail="exit 1", log_tail="boom\n")


def test_every_controller_phase_has_a_progress_text():
    assert set(PHASE_TEXT) == set(PHASES)


def test_the_runner_passes_params_and_vars_and_shows_each_phase(tmp_path):
    spec = parse_spec(SPEC, source="t.toml")
    store = Store(tmp_path / "store.sqlite")
    try:
        sweep_id = store.open_sweep(spec.name, spec.text, spec.hash, plan_spec(spec))
        trial = store.trials(sweep_id)[0]
        summary = RunSummary(sweep_id, tmp_path / "store.sqlite", 1, 0)
        loop = TrialLoop(spec, store, tmp_path, Console(file=io.StringIO()), summary)
        controller, shown = FakeController(), []
        assert loop.trial(controller, trial, shown.append) == "failed"
        attempts = store.attempts(trial["id"])
    finally:
        store.close()
    assert [(p, v) for p, v, _ in controller.calls] == [
        (DecodeParams("ddtree", 8, 2, 64), {"mem": 0.5})
    ] * 2
    one_attempt = ["reconfiguring", *(PHASE_TEXT[p] for p in PHASES)]
    assert shown == one_attempt + ["backoff 0s"] + one_attempt
    assert [(a["state"], a["failure"]) for a in attempts] == [("failed", "crashed(1)")] * 2
    assert Path(attempts[1]["log_tail_path"]).read_text() == "boom\n"
    assert controller.calls[1][2].name == "attempt-2"
