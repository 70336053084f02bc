"""Conditions of each trial and a warning when compared trials ran under different ones.

A comparison is only fair under identical conditions (docs/report.md
"How the report is built"; the measurement rules): the same hardware, the same prompts, the same served models and
software, the same temperature. Each completed trial records its conditions;
this module reduces them to short values per configuration and warns when
they differ across the trials the report compares.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ddtune.records import TrialRecord

# identity fields that name what is served (models, software), the same for every config;
# everything else in an identity (pid, argv, instance id, reported config) changes by design
STABLE_IDENTITY_KEYS = (
    "target_sha256",
    "drafter_sha256",
    "models",
    "model",
    "model_path",
    "served_model_name",
    "versions",
    "version",
    "server_kind",
    "kind",
    "engine",
    "max_context",
)
CONDITION_NAMES = {
    "hardware": "hardware fingerprint",
    "prompts": "prompt-set hash",
    "server": "server identity (models and versions)",
    "temperature": "temperature",
    "sandbox": "coding-test sandbox mechanism",
}


@dataclass
class TrialConditions:
    hardware: str | None
    prompts: str | None
    server: str | None
    temperature: str
    sandbox: str | None = None  # how coding tests were contained, in words (bench notes)

    def get(self, key: str) -> str | None:
        return getattr(self, key)


def trial_conditions(record: TrialRecord) -> TrialConditions:
    conditions = record.conditions or {}
    hardware = conditions.get("hardware_fingerprint")
    if hardware is None and conditions.get("hardware"):
        hardware = "hw:" + _short_hash(conditions["hardware"])
    prompts = conditions.get("prompt_set_hash")
    return TrialConditions(
        hardware=None if hardware is None else str(hardware),
        prompts=None if prompts is None else str(prompts),
        server=server_fingerprint(conditions.get("server_identity")),
        temperature=f"{float(record.temperature):g}",
        sandbox=conditions.get("sandbox"),
    )


def server_fingerprint(identity: Any) -> str | None:
    """Short description of the stable part of a server identity (models, versions)."""
    if not isinstance(identity, dict) or not identity:
        return None
    stable = {k: identity[k] for k in STABLE_IDENTITY_KEYS if identity.get(k) is not None}
    if not stable:
        return None
    named = [
        f"{k}={str(stable[k])[:12]}" for k in ("target_sha256", "drafter_sha256") if stable.get(k)
    ]
    return " ".join(named + ["id:" + _short_hash(stable)])


def condition_values(records: Sequence[TrialRecord]) -> dict[str, list[str]]:
    """Distinct values of each condition over the completed records ("not recorded" for None)."""
    values: dict[str, set[str]] = {key: set() for key in CONDITION_NAMES}
    for record in records:
        if record.status != "done":
            continue
        conditions = trial_conditions(record)
        for key in CONDITION_NAMES:
            values[key].add(conditions.get(key) or "not recorded")
    return {key: sorted(found) for key, found in values.items()}


def condition_warnings(records: Sequence[TrialRecord]) -> list[str]:
    """One warning per condition that differs across the completed trials."""
    warnings = []
    done = [r for r in records if r.status == "done"]
    for key, name in CONDITION_NAMES.items():
        by_value: dict[str, set[str]] = {}
        for record in done:
            value = trial_conditions(record).get(key) or "not recorded"
            by_value.setdefault(value, set()).add(record.label)
        if len(by_value) > 1:
            parts = [
                f"{value} ({', '.join(sorted(labels))})"
                for value, labels in sorted(by_value.items())
            ]
            warnings.append(
                f"compared trials ran under different {name}s: {'; '.join(parts)}. "
                "Differences between these configurations may come from the conditions."
            )
        elif done and set(by_value) == {"not recorded"} and key not in ("temperature", "sandbox"):
            hint = (
                f" (no identity field among {', '.join(STABLE_IDENTITY_KEYS[:3])}, ...)"
                if key == "server"
                else ""
            )
            warnings.append(
                f"{name} not recorded{hint}: the report cannot check that trials are comparable"
            )
    return warnings


def _short_hash(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]
