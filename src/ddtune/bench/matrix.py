"""`BenchMatrix`: what one benchmark run sends, parsed strictly from the `[bench]` TOML table.

Defaults are sized for the bundled tiny CPU model (context 512 tokens) so that
one sweep trial takes well under a minute. Example:

    [bench]
    temperature = 0
    concurrency = 1
    [bench.short]
    n_prompts = 4
    prompt_tokens = 100
    max_tokens = 32
    repeats = 2
    [bench.long]
    prompt_tokens = 320
    [bench.coding]
    limit = 10          # first N tasks; 0 or enabled = false skips coding
    n_samples = 1

Prompt lengths are counted in characters: `prompt_tokens * chars_per_token`
characters of code (the server's tokenizer is not queried; `/tokenize` is not a
standard endpoint). The real prompt token counts the server reports are kept
in each sample as `prompt_tokens`.

`[bench.load]` and `[bench.slo]` (load levels, latency targets) are described in
`load_config.py`; without them the bench runs exactly as before.

`suite` names the workloads (`bundled`, the short/long/coding tables above, by
default; `humaneval`, `mt-bench`, `gsm8k`, `agent-sessions`: `bench/suites/`),
`traffic_file` adds the user's own requests (workload `traffic`), `mix` weighs
them for the recommendation over the mix, `store_prompts` keeps traffic
prompts and answers in the store (default: their hashes and lengths only).

The tables are `ddtune.tables.StrictModel`s: an unknown key or a bad value is a
`UserError` whose `key` is the full path (`bench.short.max_tokens`); see
docs/bench.md "Bench".
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from ddtune.bench.load.config import LoadTable, SloTable, check_load_tables, cross_key_error
from ddtune.bench.suites.config import SuitesTable, TrafficTable
from ddtune.bench.suites.names import BUNDLED, TRAFFIC
from ddtune.errors import UserError
from ddtune.tables import StrictModel, parse_table

Positive = Annotated[int, Field(gt=0)]
PositiveSeconds = Annotated[float, Field(gt=0)]
SuiteName = Literal["bundled", "humaneval", "mt-bench", "gsm8k", "agent-sessions"]  # SUITE_NAMES


class ThroughputWorkload(StrictModel):
    enabled: bool = True  # run this workload
    n_prompts: Positive = 4  # prompts per pass
    prompt_tokens: Positive = 100  # prompt length in tokens
    max_tokens: Positive = 32  # tokens generated per prompt
    repeats: Positive = 2  # passes over the prompt set


class CodingWorkload(StrictModel):
    enabled: bool = True  # run this workload
    tasks_file: str | None = None  # None: the bundled held-out tasks
    n_samples: Positive = 1  # per task; pass@k for k = n_samples when > 1
    max_tokens: Positive = 96  # tokens generated per task
    timeout_s: PositiveSeconds = 5.0  # per test run
    limit: Annotated[int, Field(ge=0)] | None = 10  # first N tasks (0 skips coding); None = all
    memory_mb: Positive = 1024  # memory limit of each test run (MB)


class BenchMatrix(StrictModel):
    model: str | None = None  # None: the first model of /v1/models
    # sampling temperature of every request (0: greedy, outputs comparable across configs)
    temperature: Annotated[float, Field(ge=0.0, le=2.0)] = 0.0
    seed: int = 0  # seeds prompt choice and sampling
    warmup: Annotated[int, Field(ge=0)] = 2  # requests before measuring, excluded everywhere
    concurrency: Positive = 1  # requests in flight at once in the throughput workloads
    ignore_eos: bool = True  # sent where the server kind supports it
    # characters per token used to size prompts of a given token length
    chars_per_token: Annotated[float, Field(gt=0)] = 3.0
    prompts_file: str | None = None  # JSONL {"prompt", "workload": "short"|"long"}
    request_timeout_s: PositiveSeconds = 300.0  # seconds one request may take
    # at T=0 on servers with logprobs: re-ask each measured request once, non-streamed, for the
    # top-1/top-2 gaps that classify a divergence as near-tie or bug (report "T=0 vs baseline")
    logprob_gaps: bool = True
    short: ThroughputWorkload = ThroughputWorkload()  # short-context throughput workload
    # long-context throughput workload
    long: ThroughputWorkload = ThroughputWorkload(n_prompts=2, prompt_tokens=320, max_tokens=32)
    coding: CodingWorkload = CodingWorkload()  # coding workload: tasks run by their tests
    load: LoadTable | None = (
        None  # [bench.load]: concurrency / rate levels (bench/load/generator.py)
    )
    slo: SloTable | None = None  # [bench.slo]: latency targets for goodput
    suite: tuple[SuiteName, ...] = ("bundled",)  # one name or a list: each a workload
    suites: SuitesTable = SuitesTable()  # [bench.suites.<name>]: limit, max_tokens
    traffic_file: str | None = None  # JSONL of logged OpenAI bodies: the workload "traffic"
    traffic: TrafficTable = TrafficTable()  # [bench.traffic]: limit, temperature
    store_prompts: bool = False  # keep traffic prompts and answers (default: hashes, lengths)
    mix: dict[str, Annotated[float, Field(gt=0)]] | None = None  # workload -> share (None: equal)
    # T = 0 on an engine that answers with token ids: also record each short/long request's
    # prompt and answer ids (the greedy path an n-gram forecast reads; bench/forecast_inputs.py)
    token_paths: bool = False
    # ... and time one-token completions over prompts of these many token ids (what a
    # verify forward over n tokens costs): a predicting race sets both on its baseline
    forward_probes: Annotated[
        tuple[Annotated[int, Field(ge=1, le=4096)], ...], Field(max_length=16)
    ] = ()

    @field_validator("forward_probes", mode="before")
    @classmethod
    def _probe_list(cls, value: Any) -> Any:
        return tuple(value) if isinstance(value, list) else value

    @field_validator("suite", mode="before")
    @classmethod
    def _suite_list(cls, value: Any) -> Any:
        """`suite = "humaneval"` or a list of names (TOML has no tuples)."""
        return (
            (value,)
            if isinstance(value, str)
            else tuple(value)
            if isinstance(value, list)
            else value
        )

    @model_validator(mode="after")
    def _load_and_slo(self) -> BenchMatrix:
        check_load_tables(self.load, self.slo)
        return self

    @model_validator(mode="after")
    def _workloads(self) -> BenchMatrix:
        if not self.suite or len(set(self.suite)) != len(self.suite):
            raise cross_key_error(
                "BenchMatrix", ("suite",), "name each suite once (at least one)", self.suite
            )
        unknown = sorted(set(self.mix or {}) - set(self.workloads))
        if unknown:
            message = f"not a workload of this bench (its workloads: {', '.join(self.workloads)})"
            raise cross_key_error("BenchMatrix", ("mix", unknown[0]), message, unknown[0])
        return self

    @property
    def workloads(self) -> tuple[str, ...]:
        """The workloads this bench measures: its suites, then `traffic` with a traffic file."""
        return (*self.suite, *((TRAFFIC,) if self.traffic_file is not None else ()))

    @property
    def runs_bundled(self) -> bool:
        return BUNDLED in self.suite

    @classmethod
    def from_dict(cls, table: dict[str, Any]) -> BenchMatrix:
        """Strict: an unknown key or a bad value is a UserError keyed `bench.<path>`."""
        return parse_table(cls, table, where="bench")

    @classmethod
    def from_toml(cls, path: str | Path) -> BenchMatrix:
        """The `[bench]` table of a TOML file (or the whole file when it has none).

        Relative `prompts_file` / `coding.tasks_file` paths are resolved against the file's folder.
        """
        path = Path(path)
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UserError(f"bench matrix file {path} does not exist") from None
        except tomllib.TOMLDecodeError as exc:
            raise UserError(f"{path} is not valid TOML: {exc}") from None
        return cls.from_dict(data.get("bench", data)).resolve_paths(path.parent)

    def resolve_paths(self, base: Path) -> BenchMatrix:
        """Relative `prompts_file`, `coding.tasks_file` and `traffic_file` made absolute."""

        def resolve(value: str | None) -> str | None:
            return None if value is None else str((base / value).resolve())

        coding = self.coding.model_copy(update={"tasks_file": resolve(self.coding.tasks_file)})
        return self.model_copy(
            update={
                "prompts_file": resolve(self.prompts_file),
                "coding": coding,
                "traffic_file": resolve(self.traffic_file),
            }
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-able (the suite list a list, as JSON reads it back); `from_dict` reads it."""
        return self.model_dump(mode="json")
