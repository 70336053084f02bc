"""Which requests each workload of a bench sends: the suites' seeded subsets and the traffic.

`plan_workloads(matrix, context)` reads every named suite (a missing package
or a bad line is a `UserError` before any request), draws each suite's
`limit` items by the bench seed, cuts agent sessions to the context the
server reports (`context()`, asked only when that suite runs), and samples the
traffic file. `check_workloads(matrix)` does the same reading without a
server, so a sweep refuses bad input before it stops or starts anything.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ddtune.bench.client import RequestSpec
from ddtune.bench.suites.agent import agent_items, agent_sessions
from ddtune.bench.suites.config import MtBenchTable
from ddtune.bench.suites.gsm8k import gsm8k_items
from ddtune.bench.suites.humaneval import humaneval_items
from ddtune.bench.suites.items import SuiteItem, seeded_subset
from ddtune.bench.suites.mtbench import mtbench_items
from ddtune.bench.suites.names import (
    AGENT_SESSIONS,
    BUNDLED,
    GSM8K,
    HUMANEVAL,
    MT_BENCH,
    SIZES,
    SUITE_TITLES,
    TRAFFIC,
    TURNS,
)
from ddtune.bench.suites.sources import provenance
from ddtune.bench.suites.traffic import read_traffic, traffic_requests
from ddtune.errors import UserError

if TYPE_CHECKING:
    from ddtune.bench.matrix import BenchMatrix

LOADERS: dict[str, Callable[[], list[SuiteItem]]] = {
    HUMANEVAL: humaneval_items,
    MT_BENCH: mtbench_items,
    GSM8K: gsm8k_items,
}


@dataclass
class Workloads:
    """The suites' items (request `index` = position) and every request, in order."""

    items: dict[str, list[SuiteItem]] = field(default_factory=dict)
    requests: list[RequestSpec] = field(default_factory=list)
    sources: dict[str, dict[str, str | None]] = field(default_factory=dict)

    def item(self, workload: str, index: int) -> SuiteItem | None:
        items = self.items.get(workload)
        return items[index] if items is not None and index < len(items) else None

    def hash(self) -> str:
        """sha256 of every request sent (16 hex digits): part of the prompt-set hash."""
        text = json.dumps([_fingerprint(r) for r in self.requests], separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def plan_workloads(matrix: BenchMatrix, context: Callable[[], int | None]) -> Workloads:
    out = Workloads()
    for suite in matrix.suite:
        if suite == BUNDLED:
            continue
        table = matrix.suites.table(suite)
        items = seeded_subset(_items(suite, matrix, context), table.limit, matrix.seed, suite)
        out.items[suite] = items
        out.sources[suite] = provenance(suite)
        if suite == MT_BENCH and (left := SIZES[MT_BENCH] - len(_items(suite, matrix, context))):
            out.sources[suite]["note"] = (
                f"{left} of 80 questions left out: too long for the context"
            )
        out.requests += [
            _request(i, item, table.max_tokens, matrix.seed) for i, item in enumerate(items)
        ]
    if matrix.traffic_file is not None:
        logged = read_traffic(matrix.traffic_file)
        out.requests += traffic_requests(logged, matrix.traffic, matrix.seed)
    return out


def check_workloads(matrix: BenchMatrix) -> None:
    """Read every suite and the traffic file as a bench would, without a server."""
    for suite in matrix.suite:
        if suite in LOADERS:
            LOADERS[suite]()
        elif suite == AGENT_SESSIONS:
            agent_sessions()
    if matrix.traffic_file is not None:
        read_traffic(matrix.traffic_file)


def bundled_text(matrix: BenchMatrix) -> str:
    """What the `bundled` workload of one bench sends, in words: `8 short + 2 long prompts
    (slices of Python's standard library) and 10 of ddtune's own coding tasks (written for
    its demo models)`."""
    source = matrix.prompts_file or "slices of Python's standard library"
    counts = [
        f"{t.n_prompts * t.repeats} {name}"
        for name, t in (("short", matrix.short), ("long", matrix.long))
        if t.enabled
    ]
    parts = [f"{' + '.join(counts)} prompts ({source})"] if counts else []
    coding = matrix.coding
    if coding.enabled and coding.limit != 0:
        tasks = f"{coding.limit or 'all'} " + (
            f"tasks of {coding.tasks_file}"
            if coding.tasks_file
            else "of ddtune's own coding tasks (written for its demo models)"
        )
        parts.append(tasks + (f", {coding.n_samples} samples each" if coding.n_samples > 1 else ""))
    return "bundled: " + (" and ".join(parts) or "nothing")


def share_text(matrix: BenchMatrix, name: str, requests: int) -> str:
    """`10 of HumanEval's 164, seeded (bench.seed = 0)`: how much of workload `name` one bench
    of `matrix` runs, `requests` requests of it (`bench_shares`)."""
    if name == BUNDLED:
        return bundled_text(matrix)
    if name not in SIZES:
        return f"{name} {requests} request(s)"
    size, turns = SIZES[name], TURNS.get(name, 1)
    items = requests // turns
    title = SUITE_TITLES.get(name, name)
    whole = "all" if items >= size else f"{items} of"
    each = f" ({turns} turns each: {requests} requests)" if turns > 1 else ""
    seeded = "" if items >= size else f", seeded (bench.seed = {matrix.seed})"
    return f"{whole} {title}'s {size}{each}{seeded}"


def bench_shares(matrix: BenchMatrix) -> dict[str, tuple[int, int]]:
    """workload -> (requests, most tokens generated) one bench of `matrix` sends: what
    `ddtune sweep plan` splits a bench's expected seconds by."""
    out: dict[str, tuple[int, int]] = {}
    if matrix.runs_bundled:
        parts = [
            (t.n_prompts * t.repeats, t.max_tokens)
            for t in (matrix.short, matrix.long)
            if t.enabled
        ]
        if matrix.coding.enabled and matrix.coding.limit != 0:
            parts.append(
                ((matrix.coding.limit or 10) * matrix.coding.n_samples, matrix.coding.max_tokens)
            )
        out[BUNDLED] = (sum(n for n, _ in parts), sum(n * m for n, m in parts))
    for suite in matrix.suite:
        if suite != BUNDLED:
            table = matrix.suites.table(suite)
            n = min(table.limit or SIZES[suite], SIZES[suite]) * TURNS.get(suite, 1)
            out[suite] = (n, n * table.max_tokens)
    if matrix.traffic_file is not None:
        logged = read_traffic(matrix.traffic_file)
        chosen = logged[: matrix.traffic.limit] if matrix.traffic.limit else logged
        out[TRAFFIC] = (len(chosen), sum(r.max_tokens or 256 for r in chosen))
    return out


def _items(suite: str, matrix: BenchMatrix, context: Callable[[], int | None]) -> list[SuiteItem]:
    if suite == MT_BENCH:
        return fitting_chats(mtbench_items(), context(), matrix.suites.mt_bench)
    if suite in LOADERS:
        return LOADERS[suite]()
    table = matrix.suites.agent_sessions
    tokens = table.context_tokens or context()
    if tokens is None:
        raise UserError(
            "bench suite 'agent-sessions' is cut to the service's context, which the server "
            "does not report (no max_model_len in /v1/models); set "
            "bench.suites.agent-sessions.context_tokens",
            key="bench.suites.agent-sessions.context_tokens",
        )
    return agent_items(agent_sessions(), tokens, table)


def fitting_chats(
    items: list[SuiteItem], context_tokens: int | None, table: MtBenchTable
) -> list[SuiteItem]:
    """The chats whose every turn, with the answers before it, fits the context (estimated at
    `chars_per_token`); all of them when the server does not say its context."""
    if context_tokens is None:
        return items
    kept = [item for item in items if _chat_tokens(item, table) <= context_tokens]
    if not kept:
        raise UserError(
            f"no MT-Bench question fits the server's {context_tokens}-token context with "
            f"{table.max_tokens} tokens per answer; lower bench.suites.mt-bench.max_tokens",
            key="bench.suites.mt-bench.max_tokens",
        )
    return kept


def _chat_tokens(item: SuiteItem, table: MtBenchTable) -> float:
    turns = [content for _, content in item.messages] + list(item.follow_ups)
    answers = len(turns) * table.max_tokens
    return sum(len(t) for t in turns) / table.chars_per_token + answers + 8 * 2 * len(turns)


def _request(index: int, item: SuiteItem, max_tokens: int, seed: int) -> RequestSpec:
    return RequestSpec(
        item.suite,
        index,
        item.prompt,
        max_tokens,
        seed,
        item.stop,
        messages=item.messages,
        follow_ups=item.follow_ups,
    )


def _fingerprint(spec: RequestSpec) -> list[Any]:
    return [
        spec.workload,
        spec.prompt,
        spec.messages,
        spec.follow_ups,
        spec.body_json,
        spec.max_tokens,
    ]
