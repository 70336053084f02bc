"""The metric names: bench aggregates = store results = report metrics, named once.

A bench (`ddtune.bench`) writes its aggregates under these names, the store
keeps them with each done trial and hands them to the report as
`TrialRecord.metrics`; a key outside `METRIC_NAMES` is named in the report's
warnings, never silently dropped. See docs/bench.md "Metric names".

Per workload (a bench suite such as `humaneval`, or the user's `traffic`) the
bench also writes `WORKLOAD_METRICS` under `BenchResult.workloads[name]`, kept
as `TrialRecord.workloads`; the report reads one of them as
`workload_metric(name, "tps")` (`"humaneval/tps"`). `mix_tps` is the tok/s
of the stated traffic mix over those workloads (`[bench] mix`).
"""

from __future__ import annotations

METRIC_NAMES = (
    "short_tps",  # mean decode tokens/s over the short-context requests
    "long_tps",  # same at long context
    "short_ttft_s",  # mean time to first token, short context
    "long_ttft_s",
    "acceptance_length",  # tokens committed per verify round incl. bonus, this run only
    "short_acceptance_length",  # ... over the short-context requests (what short_tps reads)
    "long_acceptance_length",  # ... over the long-context requests
    "coding_passed",  # tasks (samples) whose tests passed
    "coding_total",  # tasks (samples) run
    "mix_tps",  # tok/s over the workload mix: weighted harmonic mean of the workloads' tok/s
)
MIX_TPS = "mix_tps"

WORKLOAD_METRICS = (
    "tps",  # mean per-request decode tokens/s
    "ttft_s",  # mean time to first token
    "e2e_s",  # mean end-to-end latency of a request
    "itl_s",  # mean inter-token latency
    "acceptance_length",  # pooled by verify rounds over the workload's requests
    "requests",  # measured requests (an MT-Bench question counts one per turn)
    "prompt_tokens",  # summed as the server counted them
    "output_tokens",
    "passed",  # scored items (tests passed, answers right); None where the workload is unscored
    "total",
)


def workload_metric(workload: str, name: str) -> str:
    """The report's key of one workload's metric: `workload_metric("gsm8k", "tps")` = "gsm8k/tps"."""
    return f"{workload}/{name}"
