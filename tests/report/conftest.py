"""Synthetic trial records with known effects, built the way the sweep store builds them."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from ddtune.params import DecodeParams
from ddtune.records import TrialRecord

OUTPUTS = [
    "def add(a, b):\n    return a + b\n",
    "The capital of France is Paris.",
    "1 2 3 5 8 13 21",
]
CONDITIONS = {
    "hardware": {"cpu": "test-cpu", "gpus": []},
    "hardware_fingerprint": "hw-0001",
    "prompt_set_hash": "prompts-abc",
    "server_identity": {
        "instance_id": "changes-every-start",
        "pid": 1234,
        "target_sha256": "t" * 64,
        "drafter_sha256": "d" * 64,
        "versions": {"ddtune": "0.1.0"},
    },
}


@dataclass
class Effect:
    """What one configuration truly does, per repeat."""

    params: DecodeParams
    short_tps: float
    long_tps: float
    acceptance: float
    passed: int | None = 10  # coding tasks passed per repeat (None: coding not run)
    total: int = 10
    sd: float = 0.02  # relative repeat-to-repeat spread of tok/s
    outputs: list[str] = field(default_factory=lambda: list(OUTPUTS))
    baseline: bool = False


def make_records(effects: list[Effect], repeats: int = 3, seed: int = 0) -> list[TrialRecord]:
    rng = random.Random(seed)
    records, trial_id = [], 0
    for repeat in range(repeats):
        for effect in effects:
            trial_id += 1
            records.append(_record(effect, trial_id, repeat, rng))
    return records


def _record(effect: Effect, trial_id: int, repeat: int, rng: random.Random) -> TrialRecord:
    metrics: dict[str, float | None] = {
        "short_tps": effect.short_tps * (1 + rng.gauss(0, effect.sd)),
        "long_tps": effect.long_tps * (1 + rng.gauss(0, effect.sd)),
        "short_ttft_s": 0.05,
        "long_ttft_s": 0.4,
        "acceptance_length": max(1.0, effect.acceptance + rng.gauss(0, 0.05)),  # >= 1 by definition
    }
    if effect.passed is not None:
        metrics.update(coding_passed=effect.passed, coding_total=effect.total)
    per_request = [max(1.0, effect.acceptance + rng.gauss(0, 0.8)) for _ in range(20)]
    return TrialRecord(
        trial_id=trial_id,
        label=effect.params.label(),
        params=effect.params,
        is_baseline=effect.baseline,
        repeat=repeat,
        status="done",
        attempts=1,
        metrics=metrics,
        acceptance_lengths=per_request,
        outputs=list(effect.outputs),
        conditions={k: (dict(v) if isinstance(v, dict) else v) for k, v in CONDITIONS.items()},
    )


def standard_effects() -> list[Effect]:
    """AR baseline, a clearly best ddtree config, and weaker ones."""
    return [
        Effect(DecodeParams("ar"), 100.0, 80.0, 1.0, baseline=True),
        Effect(DecodeParams("dflash"), 140.0, 100.0, 3.0),
        Effect(DecodeParams("ddtree", 8, 2), 150.0, 110.0, 3.5),
        Effect(DecodeParams("ddtree", 16, 4), 190.0, 150.0, 4.5),
        Effect(DecodeParams("ddtree", 32, 4), 160.0, 130.0, 4.8),
    ]


@pytest.fixture
def synth() -> SimpleNamespace:
    """The helpers above (importlib mode keeps conftest off sys.path, so tests get them here)."""
    return SimpleNamespace(
        Effect=Effect, make_records=make_records, standard_effects=standard_effects, OUTPUTS=OUTPUTS
    )
