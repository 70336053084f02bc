"""`[bench.suites.<name>]` and `[bench.traffic]`: how much of each workload a bench sends.

    [bench]
    suite = ["humaneval", "mt-bench", "gsm8k"]   # or one name; default "bundled"
    mix = { humaneval = 0.5, mt-bench = 0.5 }    # default: every workload alike
    traffic_file = "gateway.jsonl"                # the user's own requests: workload "traffic"
    [bench.suites.humaneval]
    limit = 40          # a seeded subset of 40 of the 164 problems (None: all)
    [bench.traffic]
    limit = 1000        # a seeded sample of the file's lines (None: all)
    temperature = 0     # override the logged temperature (default: as logged)

Defaults are sized for the bundled 512-token CPU model: a bench of every suite
takes about a minute there. Tables are `StrictModel`s (errors keyed by the
full path, e.g. `bench.suites.gsm8k.limit`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from ddtune.tables import StrictModel

Positive = Annotated[int, Field(gt=0)]


class SuiteTable(StrictModel):
    limit: Positive | None = 10  # items (a seeded subset); None: every item of the suite
    max_tokens: Positive = 96  # per request (per turn for MT-Bench)


class HumanEvalTable(SuiteTable):
    limit: Positive | None = 20
    max_tokens: Positive = 128


class Gsm8kTable(SuiteTable):
    limit: Positive | None = 20


class MtBenchTable(SuiteTable):
    limit: Positive | None = 8
    max_tokens: Positive = 64
    # questions whose two turns and answers cannot fit the server's context (at this many
    # characters a token) are left out before the seeded subset is drawn, and counted
    chars_per_token: Annotated[float, Field(gt=0)] = 2.5


class AgentTable(SuiteTable):
    limit: Positive | None = 4
    max_tokens: Positive = 64
    # the service's context in tokens; None: read from the server (/v1/models max_model_len)
    context_tokens: Positive | None = None
    # how a session is cut to the context before it is sent: characters per token assumed
    # (conservative; the tokens the server counted are kept per request)
    chars_per_token: Annotated[float, Field(gt=0)] = 2.5


class SuitesTable(StrictModel):
    # TOML spells the keys as the suites are named (`mt-bench`); dumps read back the same way
    model_config = ConfigDict(
        extra="forbid", strict=True, frozen=True, populate_by_name=True, serialize_by_alias=True
    )

    # [bench.suites.humaneval]: problems run by their tests
    humaneval: HumanEvalTable = HumanEvalTable()
    gsm8k: Gsm8kTable = Gsm8kTable()  # [bench.suites.gsm8k]: grade-school math, answers checked
    # [bench.suites.mt-bench]: multi-turn chat questions
    mt_bench: MtBenchTable = Field(MtBenchTable(), alias="mt-bench")
    # [bench.suites.agent-sessions]: multi-turn agent sessions
    agent_sessions: AgentTable = Field(AgentTable(), alias="agent-sessions")

    def table(self, suite: str) -> SuiteTable:
        """The table of a suite by its name (`mt-bench` -> `mt_bench`)."""
        table = getattr(self, suite.replace("-", "_"))
        assert isinstance(table, SuiteTable)
        return table


class TrafficTable(StrictModel):
    limit: Positive | None = None  # lines sampled by the seed; None: every line
    # "logged": each request's own temperature; a number: every request at that temperature
    temperature: Literal["logged"] | Annotated[float, Field(ge=0.0, le=2.0)] = "logged"
