"""The model folders a sweep spec's service loads (for its first config).

    served = spec_models(spec)      # services.models.ServedModels

What `ddtune trace record --spec` traces and what `sweep plan`/`sweep run`
check a trace against (`trace.binding`).
"""

from __future__ import annotations

from pathlib import Path

from ddtune.services.models import ServedModels, served_models
from ddtune.sweep.spec.parse import SweepSpec


def spec_models(spec: SweepSpec) -> ServedModels:
    """What the spec's service loads: for the first config that names a drafter (where the
    method's own flags carry it, a plain baseline names none), else for the first config."""
    base = Path(spec.base_dir) if spec.base_dir else None
    found = [
        served_models(spec.service, config.params, config.user_vars(), base)
        for config, _ in spec.all_configs()
    ]
    return next((m for m in found if m.drafter is not None), found[0])


__all__ = ["spec_models"]
