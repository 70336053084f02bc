"""A bench for the model the service serves: a real suite, never the demo's tasks unless named.

    bench, note = served_bench(bench, written, service, config, base_dir)

ddtune's bundled coding tasks are written for its tiny demo models. For any other
model, a `[bench]` that does not say what to code on (no `[bench.coding]` table,
no `suite`, no traffic file) measures coding on HumanEval instead: `suite =
["bundled", "humaneval"]` (the bundled short and long prompts, slices of Python's
standard library, and a seeded 20 of HumanEval's 164 problems, tests run in the
sandbox) with the bundled coding tasks off. The spec says so in a note, and
`sweep plan` names what one bench runs. A spec that writes `[bench.coding]`,
`suite` or `traffic_file` gets what it names.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from ddtune.bench.matrix import BenchMatrix
from ddtune.bench.suites.names import BUNDLED, HUMANEVAL, SIZES
from ddtune.params import DecodeParams
from ddtune.services.models import served_models
from ddtune.services.spec import ServiceSpec

NAMED = ("coding", "suite", "traffic_file")  # [bench] keys that say what the bench runs


def served_bench(
    bench: BenchMatrix,
    written: Collection[str],
    service: ServiceSpec,
    config: Any,
    base_dir: Path | None,
) -> tuple[BenchMatrix, str | None]:
    """`bench` with HumanEval in place of the bundled coding tasks where the served model is
    not ddtune's bundled one and the spec's [bench] (its keys `written`) names no workload;
    the note that says so. `config`: the first config (a `Config`: what starts first)."""
    if set(NAMED) & set(written):
        return bench, None
    if _bundled_model(service, config.params, config.user_vars(), base_dir):
        return bench, None
    coding = bench.coding.model_copy(update={"enabled": False})
    real = bench.model_copy(update={"suite": (BUNDLED, HUMANEVAL), "coding": coding})
    limit = real.suites.humaneval.limit or SIZES[HUMANEVAL]
    note = (
        "[bench]: the service serves a model other than ddtune's bundled one, so coding is "
        f"measured on HumanEval ({limit} of its {SIZES[HUMANEVAL]} problems, seeded by "
        "bench.seed), not on the bundled tasks written for the demo models; write "
        "[bench.coding], suite or traffic_file to choose"
    )
    return real, note


def _bundled_model(
    service: ServiceSpec,
    params: DecodeParams,
    user_vars: Mapping[str, Any],
    base_dir: Path | None,
) -> bool:
    """Does the service load ddtune's bundled target (as far as its command says)?"""
    from ddtune.assets import default_target_dir

    try:
        target = served_models(service, params, user_vars, base_dir).target
    except (OSError, ValueError, KeyError):
        return False
    if target is None:
        return False
    try:
        return target.resolve() == Path(default_target_dir()).resolve()
    except OSError:
        return False


__all__ = ["served_bench"]
