"""What changed between the spec a sweep was started from and the one it is resumed with.

    change = measured_change(stored_text, new_text)   # None: only how it runs changed

A sweep resumes across changes to how it runs: timeouts, retry, the expected
identity and readiness checks, repeats and pass counts, the engine check, the
breaker, the cost hints, the report and cluster settings (`OPERATIONAL`).
Every finished trial is kept and the new values apply from the resume on. A
change to what is measured (the configs, the bench, the service's command or
environment, the baseline...) would mix two experiments in one store: it is
named, with what to do (`SpecChange.message`). The old names of `[service]`
keys (`kind`, `profile`, `preflight`) compare as their new ones (`control`,
`engine`, `engine_check`), so a spec rewritten with the new names resumes a
store started with the old ones.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ddtune.services.spec import RENAMED

# keys (dotted prefixes) that change how the sweep runs, not what it measures
OPERATIONAL = (
    "sweep.description",
    "sweep.repeats",
    "sweep.min_repeats",
    "sweep.passes_per_start",
    "sweep.max_trials",
    "sweep.max_hours",
    "sweep.tolerance",
    "sweep.breaker",
    "sweep.allow_indistinct_windows",
    "retry",
    "service.timeouts",
    "service.engine_check",
    "service.generations",
    "service.model",
    "service.health_url",
    "service.gpu",
    "service.gpu_tolerance_mib",
    "service.reclaim_leftovers",
    "service.expected_start_s",
    "service.expected_bench_s",
    "bench.request_timeout_s",
    "report",
    "cluster",
)


@dataclass(frozen=True)
class SpecChange:
    """The first key whose change alters what the sweep measures."""

    key: str

    def message(self, store: str, name: str) -> str:
        return (
            f"{store} holds sweep '{name}' measured with a different {self.key}: its trials "
            f"would not compare with new ones. Put {self.key} back as it was to resume, or "
            "keep the change and pass --store NEW_PATH (or rename [sweep] name) to start a "
            "new sweep. Timeouts, retry, repeats, the breaker and the other run settings may "
            "change on resume"
        )


# what measures the baseline: a start of it in another sweep of the store is one of its own
# where these are the same (`sweep/plan/reuse.py`)
BASELINE_MEASURED_BY = ("service", "bench", "sweep.baseline")


def measured_change(
    stored_text: str,
    new_text: str,
    within: tuple[str, ...] | None = None,
    operational: tuple[str, ...] = OPERATIONAL,
) -> SpecChange | None:
    """The first changed key outside `operational` (and inside `within`, dotted prefixes,
    where given), or None (a text that is not TOML: the whole spec)."""
    try:
        old, new = _flat(tomllib.loads(stored_text)), _flat(tomllib.loads(new_text))
    except tomllib.TOMLDecodeError:
        return SpecChange("spec")
    for key in sorted(old.keys() | new.keys()):
        if old.get(key, _ABSENT) == new.get(key, _ABSENT) or _under(key, operational):
            continue
        if within is None or _under(key, within):
            return SpecChange(key)
    return None


_ABSENT = object()


def _under(key: str, prefixes: tuple[str, ...]) -> bool:
    return any(key == prefix or key.startswith(prefix + ".") for prefix in prefixes)


def _flat(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    return {_new_name(key): value for key, value in _items(table, prefix)}


def _new_name(key: str) -> str:
    """`service.kind` -> `service.control`, ... (`services.spec.RENAMED`)."""
    table, _, name = key.partition(".")
    return f"service.{RENAMED[name]}" if table == "service" and name in RENAMED else key


def _items(table: Mapping[str, Any], prefix: str) -> Iterator[tuple[str, Any]]:
    for key, value in table.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and path.count(".") < 2 and key != "baseline":
            yield from _items(value, path + ".")
        else:
            yield path, value


__all__ = ["BASELINE_MEASURED_BY", "OPERATIONAL", "SpecChange", "measured_change"]
