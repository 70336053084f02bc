"""The metric names: bench aggregates = store results = report metrics, named once.

A bench (`ddtune.bench`) writes its aggregates under these names, the store
keeps them with each done trial and hands them to the report as
`TrialRecord.metrics`; a key outside `METRIC_NAMES` is named in the report's
warnings, never silently dropped. See docs/architecture.md "Metric names".
"""

from __future__ import annotations

METRIC_NAMES = (
    "short_tps",  # mean decode tokens/s over the short-context requests
    "long_tps",  # same at long context
    "short_ttft_s",  # mean time to first token, short context
    "long_ttft_s",
    "acceptance_length",  # tokens committed per verify round incl. bonus, this run only
    "coding_passed",  # tasks (samples) whose tests passed
    "coding_total",  # tasks (samples) run
)
