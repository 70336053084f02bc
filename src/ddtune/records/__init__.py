"""What a sweep measured, as the store keeps it and the report reads it: below both.

    from ddtune.records import TrialRecord, METRIC_NAMES, SweepContext, Elimination

`metrics` (the metric names: bench aggregates = store results = report
metrics), `trial` (`TrialRecord`, one per configuration and repeat),
`context` (`SweepContext`, how the sweep ran, and each race exit as an
`Elimination`). The bench writes the names, the store (`ddtune.sweep.store`)
builds the records, the report (`ddtune.report`) reads them; none of the
three imports another for these types (docs/architecture.md "Layers").
"""

from ddtune.records.context import Elimination, PredictedConfig, SweepContext
from ddtune.records.metrics import METRIC_NAMES, MIX_TPS, WORKLOAD_METRICS, workload_metric
from ddtune.records.trial import TrialRecord

__all__ = [
    "METRIC_NAMES",
    "MIX_TPS",
    "WORKLOAD_METRICS",
    "Elimination",
    "PredictedConfig",
    "SweepContext",
    "TrialRecord",
    "workload_metric",
]
