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
    """What the spec's service loads, for its first config."""
    config, _ = spec.all_configs()[0]
    base = Path(spec.base_dir) if spec.base_dir else None
    return served_models(spec.service, config.params, config.user_vars(), base)


__all__ = ["spec_models"]
