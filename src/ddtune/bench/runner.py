"""`run_bench`: one benchmark run against a server URL, as the sweep calls it per trial.

Steps:
1. Resolve the model name (/v1/models) and the identity snapshot.
2. Build the request list: warmup, short, long, coding (the `bundled` suite), then
   each named suite's seeded subset and the sampled traffic (`bench/suites/`).
3. Send the warmup requests (at most 32 tokens each; excluded from every figure).
4. Kinds that count acceptance on the server (vLLM): read the counters.
5. Send the measured requests (concurrency from the matrix), timed from the stream,
   workload by workload; such a kind's counters are read again after each workload.
6. Acceptance from the counters' differences (else per response).
   At T=0 on a kind that supports logprobs: the logit gaps (`ddtune.bench.logit_gaps`).
7. Run the coding samples' and HumanEval's tests in the sandbox, check GSM8K's answers.
8. Samples, aggregates (per workload, and the mix) and T=0 outputs into one `BenchResult`.
9. With `[bench.load]`: every load level (`bench/load/generator.py`) into `result.load`.
"""

from __future__ import annotations

import hashlib
import json
import platform
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from importlib import metadata
from itertools import groupby
from typing import Any

import httpx
from rich.progress import Progress

import ddtune.bench.acceptance as acc
from ddtune.assets import default_tasks_file
from ddtune.bench.client import (
    RequestSpec,
    StreamRecord,
    discover_model,
    records_in_order,
    stream_request,
)
from ddtune.bench.coding import STOP_SEQUENCES, CodingTask, evaluate, pass_at_k_summary, read_tasks
from ddtune.bench.forecast_inputs import probe_forward, record_paths
from ddtune.bench.hardware import hardware_fingerprint
from ddtune.bench.load.generator import LoadTarget, level_prompts, run_load
from ddtune.bench.logit_gaps import record_gaps
from ddtune.bench.matrix import BenchMatrix
from ddtune.bench.prompts import PromptSet, build_prompt_set
from ddtune.bench.result import BenchResult, make_sample, throughput_aggregates
from ddtune.bench.sandbox.checker import SandboxLimits, isolation_notes
from ddtune.bench.suites import TRAFFIC, mix_tps, private_sample, workload_figures, workload_of
from ddtune.bench.suites.plan import Workloads, plan_workloads
from ddtune.bench.suites.scoring import score_samples, tested
from ddtune.engines import ServerEngine, get_engine
from ddtune.errors import UserError


@dataclass
class BenchPlan:
    """One bench of `matrix` against `base_url`, resolved before any request (steps 1-2)."""

    base_url: str
    matrix: BenchMatrix
    engine: ServerEngine
    model: str | None
    prompts: PromptSet
    tasks: list[CodingTask]
    warmup: list[RequestSpec]
    measured: list[RequestSpec]
    workloads: Workloads

    def prompt_set_hash(self) -> str:
        """The bundled prompts' hash, combined with every suite and traffic request sent."""
        if not self.workloads.requests:
            return self.prompts.hash()
        both = f"{self.prompts.hash()}:{self.workloads.hash()}"
        return hashlib.sha256(both.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Measured:
    """Steps 4-5: the measured `records` (in `plan.measured` order) and, where the engine counts
    acceptance on the server, its counters read before and after them; per workload (and per
    suite), the acceptance its own counters' difference gave and its rounds accepted per draft
    position."""

    records: list[StreamRecord]
    before: dict[str, float] | None = None
    after: dict[str, float] | None = None
    counted: dict[str, float | None] = field(default_factory=dict)
    drafted: dict[str, dict[str, Any]] = field(default_factory=dict)


def run_bench(
    base_url: str,
    matrix: BenchMatrix,
    engine: str = "ddtune",
    identity: dict[str, Any] | None = None,
    progress: bool = True,
) -> BenchResult:
    """Run the matrix against `base_url`; raises BenchError when a request fails."""
    started, t0 = time.time(), time.perf_counter()
    with bench_client(matrix) as client:
        plan = plan_bench(client, base_url, matrix, engine)  # 1, 2
        identity = (
            identity
            if identity is not None
            else snapshot_identity(client, plan.base_url, plan.engine)
        )
        send = sender(client, plan)
        with _progress(progress) as bar:
            _run_all(send, plan.warmup, 1, bar, "warmup")  # 3.
            measured = _run_measured(send, client, plan, bar)  # 4, 5.
            result = finish_bench(plan, client, identity, measured, started, bar)
    result.duration_s = time.perf_counter() - t0
    return result


def bench_client(matrix: BenchMatrix) -> httpx.Client:
    return httpx.Client(timeout=httpx.Timeout(matrix.request_timeout_s, connect=10.0))


def plan_bench(
    client: httpx.Client, base_url: str, matrix: BenchMatrix, engine_name: str
) -> BenchPlan:
    """Steps 1-2: the model name and the request lists (bad input fails before any request)."""
    engine = get_engine(engine_name)
    base_url = base_url.rstrip("/")
    tasks = coding_tasks(matrix)
    prompts = matrix_prompts(matrix)
    workloads = plan_workloads(matrix, lambda: engine.context_length(client, base_url))
    traffic = [r for r in workloads.requests if r.workload == TRAFFIC]
    if matrix.load is not None:  # a load workload without prompts fails before any request
        level_prompts(matrix, prompts, traffic)
    model = matrix.model or (
        discover_model(client, base_url, engine) if engine.model_in_request else None
    )
    warmup, measured = plan_requests(matrix, prompts.short, prompts.long, tasks, workloads.requests)
    return BenchPlan(base_url, matrix, engine, model, prompts, tasks, warmup, measured, workloads)


def finish_bench(
    plan: BenchPlan,
    client: httpx.Client,
    identity: dict[str, Any] | None,
    measured: Measured,
    started_at: float,
    bar: Progress | None = None,
) -> BenchResult:
    """Steps 6-9 once the measured requests are in."""
    engine, matrix = plan.engine, plan.matrix
    specs, samples = _samples(engine, plan.measured, measured.records)
    gaps, gap_note = _gaps(client, plan.base_url, engine, plan.model, specs, samples, matrix)
    paths, probes, measure_notes = _forecast_inputs(client, plan)
    coding = _run_coding(samples, specs, plan.tasks, matrix, bar)  # 7.
    _score_suites(samples, plan.workloads, matrix, bar)
    outputs = _outputs(specs, samples, matrix.store_prompts)
    load = _run_load(plan, engine, matrix)  # 9.
    hardware = hardware_fingerprint()
    result = BenchResult(  # 8.
        base_url=plan.base_url,
        engine=plan.engine.name,
        model=plan.model,
        matrix=matrix.to_dict(),
        identity=identity,
        hardware=hardware,
        hardware_fingerprint=hardware["fingerprint"],
        prompt_set_hash=plan.prompt_set_hash(),
        prompt_source=plan.prompts.source,
        temperature=matrix.temperature,
        started_at=started_at,  # unix seconds
        duration_s=0.0,
        samples=samples,
        outputs=outputs,
        versions=_versions(),
        prompts={"short": plan.prompts.short, "long": plan.prompts.long},
        logprob_gaps=gaps,
        load_result=load,
        suites=plan.workloads.sources,
        token_paths=paths,
        forward_probes=probes,
    )
    if gap_note:
        result.notes.append(gap_note)
    result.notes += measure_notes
    _aggregate(result, engine, measured, coding)
    for workload, value in measured.counted.items():  # a counting engine: each one's counters
        if workload in result.workloads:
            result.workloads[workload]["acceptance_length"] = value
        if result.aggregates.get(f"{workload}_acceptance_length", value) is None:
            result.aggregates[f"{workload}_acceptance_length"] = value
    return result


def matrix_prompts(matrix: BenchMatrix) -> PromptSet:
    """The short and long prompts a bench of `matrix` sends (seeded slices, or its prompts
    file); none without the `bundled` suite."""
    if not matrix.runs_bundled:
        return PromptSet([], [], "none: the bundled suite is not run")
    return build_prompt_set(
        matrix.seed,
        (matrix.short.n_prompts, matrix.short.prompt_tokens),
        (matrix.long.n_prompts, matrix.long.prompt_tokens),
        matrix.chars_per_token,
        matrix.prompts_file,
    )


WARMUP_MAX_TOKENS = 32  # enough rounds to touch every code path and shape; not a full request


def plan_requests(
    matrix: BenchMatrix,
    short: list[str],
    long: list[str],
    tasks: list[CodingTask],
    suites: list[RequestSpec] | None = None,
) -> tuple[list[RequestSpec], list[RequestSpec]]:
    """(warmup, measured) in a fixed order: short repeats, long repeats, coding samples (the
    bundled suite), then the named suites' and the traffic's requests (`suites`)."""
    measured = _bundled_requests(matrix, short, long, tasks) if matrix.runs_bundled else []
    measured += suites or []
    if not measured and matrix.load is not None:
        return [], []  # a load-only run: the levels have their own warm-up
    if not measured:
        raise UserError(
            "every bench workload is disabled; enable bench.short, bench.long or bench.coding"
        )
    pool = [m for m in measured if m.workload not in ("coding", TRAFFIC)] or measured
    warmup = [_warmup(pool[i % len(pool)], i) for i in range(matrix.warmup)]
    return warmup, measured


def _bundled_requests(
    matrix: BenchMatrix, short: list[str], long: list[str], tasks: list[CodingTask]
) -> list[RequestSpec]:
    measured: list[RequestSpec] = []
    for workload, prompts in (("short", short), ("long", long)):
        cfg = getattr(matrix, workload)
        if not cfg.enabled:
            continue
        texts = [prompt for _ in range(cfg.repeats) for prompt in prompts]
        measured += [
            RequestSpec(workload, i, p, cfg.max_tokens, matrix.seed) for i, p in enumerate(texts)
        ]
    for t, task in enumerate(tasks):
        for s in range(matrix.coding.n_samples):
            measured.append(
                RequestSpec(
                    "coding",
                    t * matrix.coding.n_samples + s,
                    task.prompt,
                    matrix.coding.max_tokens,
                    matrix.seed + s,
                    tuple(STOP_SEQUENCES),
                )
            )
    return measured


def _warmup(spec: RequestSpec, index: int) -> RequestSpec:
    """A warm-up copy of `spec` (one turn, at most WARMUP_MAX_TOKENS; a logged body capped)."""
    tokens = min(spec.max_tokens or WARMUP_MAX_TOKENS, WARMUP_MAX_TOKENS)
    body = spec.body_json
    if body is not None:
        body = json.dumps({**json.loads(body), "max_tokens": tokens})
    return replace(
        spec,
        workload="warmup",
        index=index,
        max_tokens=tokens,
        stop=(),
        follow_ups=(),
        body_json=body,
    )


def snapshot_identity(
    client: httpx.Client, base_url: str, engine: ServerEngine
) -> dict[str, Any] | None:
    """The first identity endpoint that answers with JSON, tagged with `_source`."""
    for path in engine.identity_endpoints:
        try:
            response = client.get(base_url + path)
            data = response.json() if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            continue
        if isinstance(data, dict):
            return {**data, "_source": path}
    return None


def measured_requests(matrix: BenchMatrix) -> tuple[PromptSet, list[RequestSpec]]:
    """The prompt set and the measured requests a bench of `matrix` sends, in order (no server
    needed: a trace of the bench's workload records these, `ddtune trace record --spec`)."""
    prompts = matrix_prompts(matrix)
    return prompts, plan_requests(matrix, prompts.short, prompts.long, coding_tasks(matrix))[1]


def coding_tasks(matrix: BenchMatrix) -> list[CodingTask]:
    """The coding tasks of `matrix` (none when disabled)."""
    cfg = matrix.coding
    if not matrix.runs_bundled or not cfg.enabled or cfg.limit == 0:
        return []
    return read_tasks(cfg.tasks_file or default_tasks_file(), cfg.limit)


def sender(client: httpx.Client, plan: BenchPlan) -> Callable[[RequestSpec], StreamRecord]:
    """Sends one request of `plan` and times it from its stream."""
    engine, matrix = plan.engine, plan.matrix

    def send(spec: RequestSpec) -> StreamRecord:
        return stream_request(
            client,
            plan.base_url,
            engine,
            spec,
            model=plan.model,
            temperature=matrix.temperature,
            ignore_eos=matrix.ignore_eos,
        )

    return send


def _gaps(
    client: httpx.Client,
    base_url: str,
    engine: ServerEngine,
    model: str | None,
    specs: list[RequestSpec],
    samples: list[dict[str, Any]],
    matrix: BenchMatrix,
) -> tuple[list[dict[str, Any] | None] | None, str | None]:
    """Logit gaps per sample at T=0 when the kind serves logprobs (completions only; chats
    and replayed requests get None); else (None, None)."""
    if matrix.temperature != 0 or not engine.supports_logprobs or not matrix.logprob_gaps:
        return None, None
    plain = [i for i, s in enumerate(specs) if not s.messages and s.body_json is None]
    texts = [samples[i]["text"] for i in plain]
    found, note = record_gaps(
        client,
        base_url,
        engine,
        model,
        [specs[i] for i in plain],
        texts,
        matrix.concurrency,
        matrix.ignore_eos,
    )
    gaps: list[dict[str, Any] | None] = [None] * len(specs)
    for i, entry in zip(plain, found, strict=True):
        gaps[i] = entry
    return gaps, note


def _forecast_inputs(
    client: httpx.Client, plan: BenchPlan
) -> tuple[list[dict[str, Any]] | None, list[dict[str, Any]] | None, list[str]]:
    """`[bench] token_paths` / `forward_probes` at T = 0 on an engine with token ids:
    (paths, probes, notes); (None, None, [why not]) where they cannot be measured."""
    matrix, engine = plan.matrix, plan.engine
    if not (matrix.token_paths or matrix.forward_probes):
        return None, None, []
    if matrix.temperature != 0 or not engine.returns_token_ids:
        why = "T > 0" if matrix.temperature != 0 else f"the {engine.name} engine sends no ids"
        return None, None, [f"token paths and forward probes not measured: {why}"]
    args = (client, plan.base_url, engine, plan.model)
    paths, note = record_paths(*args, plan.measured, matrix.ignore_eos)
    context = engine.context_length(client, plan.base_url)  # where a draft must stop
    paths = [p | {"context": context} for p in paths]
    probes, probe_note = probe_forward(*args, paths, matrix.forward_probes)
    notes = [n for n in (note, probe_note) if n]
    return (paths if matrix.token_paths else None), (probes or None), notes


def _run_load(plan: BenchPlan, engine: ServerEngine, matrix: BenchMatrix) -> dict[str, Any] | None:
    if matrix.load is None:
        return None
    target = LoadTarget(
        plan.base_url,
        engine,
        plan.model,
        matrix.temperature,
        matrix.ignore_eos,
        matrix.request_timeout_s,
    )
    traffic = [r for r in plan.workloads.requests if r.workload == TRAFFIC]
    return run_load(target, matrix, plan.prompts, traffic).to_dict()


def _progress(enabled: bool) -> Progress | nullcontext[None]:
    return Progress(transient=True) if enabled else nullcontext(None)


def _run_all(
    send: Callable[[RequestSpec], StreamRecord],
    specs: list[RequestSpec],
    concurrency: int,
    bar: Progress | None,
    label: str,
) -> list[StreamRecord]:
    if not specs:
        return []
    task = bar.add_task(label, total=len(specs)) if bar else None

    def one(spec: RequestSpec) -> StreamRecord:
        record = send(spec)
        if bar is not None and task is not None:
            bar.advance(task)
        return record

    if concurrency == 1:
        return [one(spec) for spec in specs]
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        return list(pool.map(one, specs))


def _run_measured(
    send: Callable[[RequestSpec], StreamRecord],
    client: httpx.Client,
    plan: BenchPlan,
    bar: Progress | None,
) -> Measured:
    """The measured requests, workload by workload; where the engine counts acceptance on the
    server (vLLM), its counters are read before, between and after the workloads, so each gets
    its own: the requests' own (short, long, coding, ...) and each suite's over its requests."""
    engine, concurrency = plan.engine, plan.matrix.concurrency
    if engine.metrics_path is None:
        return Measured(_run_all(send, plan.measured, concurrency, bar, "requests"))
    records: list[StreamRecord] = []
    read = [acc.read_counters(client, plan.base_url, engine)]
    spans: dict[str, list[int]] = {}  # workload or suite -> the groups it spans
    for i, (workload, group) in enumerate(groupby(plan.measured, key=lambda s: s.workload)):
        records += _run_all(send, list(group), concurrency, bar, workload)
        read.append(acc.read_counters(client, plan.base_url, engine))
        spans.setdefault(workload, []).append(i)
        suite = workload_of({"workload": workload})
        if suite != workload:
            spans.setdefault(suite, []).append(i)
    counted = {  # (a workload's groups are one run of the order: plan_requests)
        name: engine.counter_acceptance(read[groups[0]], read[groups[-1] + 1])[0]
        for name, groups in spans.items()
    }
    drafted = {  # ... and its rounds accepted per draft position (chains: `trace/chains`)
        name: {"drafts": found[0], "accepted_per_position": list(found[1])}
        for name, groups in spans.items()
        if (found := engine.draft_counts(read[groups[0]], read[groups[-1] + 1])) is not None
    }
    return Measured(records, read[0], read[-1], counted, drafted)


def _samples(
    engine: ServerEngine, specs: list[RequestSpec], records: list[StreamRecord]
) -> tuple[list[RequestSpec], list[dict[str, Any]]]:
    """One sample per response (a chat's later turns after it, `turn` 2, 3, ...), with the
    spec of each."""
    sample_specs, samples = [], []
    for spec, record in zip(specs, records, strict=True):
        for turn, response in enumerate((record, *record.turns), start=1):
            acceptance = engine.response_acceptance(response)[0]
            sample = make_sample(spec.workload, spec.index, response, acceptance)
            if spec.messages:
                sample["turn"] = turn
            sample_specs.append(spec)
            samples.append(sample)
    return sample_specs, samples


def _outputs(
    specs: list[RequestSpec], samples: list[dict[str, Any]], store_prompts: bool
) -> list[str]:
    """The T=0 outputs in request order; a traffic answer as its hash unless `store_prompts`."""
    return [
        private_sample(s, spec, store_prompts) if spec.workload == TRAFFIC else s["text"]
        for spec, s in zip(specs, samples, strict=True)
    ]


def _score_suites(
    samples: list[dict[str, Any]], workloads: Workloads, matrix: BenchMatrix, bar: Progress | None
) -> None:
    """HumanEval's tests in the sandbox (with the coding table's limits), GSM8K's answers."""
    limits = SandboxLimits(timeout_s=matrix.coding.timeout_s, memory_mb=matrix.coding.memory_mb)
    total = tested(workloads)
    task = bar.add_task("suite tests", total=total) if bar is not None and total else None

    def advance() -> None:
        if bar is not None and task is not None:
            bar.advance(task)

    score_samples(samples, workloads, limits, advance)


def _run_coding(
    samples: list[dict[str, Any]],
    specs: list[RequestSpec],
    tasks: list[CodingTask],
    matrix: BenchMatrix,
    bar: Progress | None,
) -> list[list[bool]]:
    """Fill passed/fail_reason of the coding samples; passes per task for pass@k."""
    cfg = matrix.coding
    limits = SandboxLimits(timeout_s=cfg.timeout_s, memory_mb=cfg.memory_mb)
    rows = [(spec, s) for spec, s in zip(specs, samples, strict=True) if spec.workload == "coding"]
    task_bar = bar.add_task("tests", total=len(rows)) if bar and rows else None
    per_task: list[list[bool]] = [[] for _ in tasks]
    for spec, sample in rows:
        task = tasks[spec.index // cfg.n_samples]
        outcome = evaluate(task, sample["text"], limits)
        sample.update(
            task_id=task.task_id,
            sample=spec.index % cfg.n_samples,
            passed=outcome.passed,
            fail_reason=None if outcome.passed else outcome.outcome,
            fail_detail=outcome.detail,
            test_s=round(outcome.duration_s, 4),
        )
        per_task[spec.index // cfg.n_samples].append(outcome.passed)
        if bar is not None and task_bar is not None:
            bar.advance(task_bar)
    return per_task


def _aggregate(
    result: BenchResult,
    engine: ServerEngine,
    measured: Measured,
    coding: list[list[bool]],
) -> None:
    aggregates: dict[str, Any] = throughput_aggregates(result.samples)
    per_request = [engine.response_acceptance(r) for r in records_in_order(measured.records)]
    value, note = acc.run_acceptance(engine, per_request, measured.before, measured.after)
    if note:
        result.notes.append(note)
    if (counts := engine.draft_counts(measured.before, measured.after)) is not None:
        result.draft_counts = {"drafts": counts[0], "accepted_per_position": list(counts[1])}
        if measured.drafted:
            result.draft_counts["workloads"] = measured.drafted
    aggregates["acceptance_length"] = value
    aggregates.update(workload_acceptance(result.samples, per_request))
    request_values = [v for v, _ in per_request if v is not None]
    aggregates["acceptance_length_request_mean"] = (
        sum(request_values) / len(request_values) if request_values else None
    )
    result.acceptance_source = engine.acceptance_source if value is not None else None
    suite_tests = [  # HumanEval's tests count as coding tests too (Fisher between configs)
        s["passed"]
        for s in result.samples
        if s.get("test_s") is not None and s["workload"] != "coding"
    ]
    aggregates["coding_passed"] = sum(sum(t) for t in coding) + sum(map(bool, suite_tests))
    aggregates["coding_total"] = sum(len(t) for t in coding) + len(suite_tests)
    aggregates.update(pass_at_k_summary(coding))
    aggregates["requests"] = len(result.samples)
    result.workloads = workload_figures(result.samples, per_request)
    aggregates["mix_tps"] = mix_tps(result.workloads, result_mix(result))
    if aggregates["coding_total"]:
        result.notes.append("coding tests sandboxed with: " + ", ".join(isolation_notes()))
    result.aggregates = aggregates


def result_mix(result: BenchResult) -> dict[str, float] | None:
    """The matrix's `[bench] mix` (None: every workload measured, alike)."""
    mix = result.matrix.get("mix")
    return dict(mix) if isinstance(mix, dict) else None


def workload_acceptance(
    samples: list[dict[str, Any]], per_request: list[tuple[float | None, float]]
) -> dict[str, float | None]:
    """`<workload>_acceptance_length` for short, long and coding, each pooled by rounds.

    The run-wide `acceptance_length` pools every workload, so it can sit far from
    the acceptance behind `short_tps` / `long_tps` (coding prompts accept more).
    """
    out: dict[str, float | None] = {}
    for workload in ("short", "long", "coding"):
        rows = [a for s, a in zip(samples, per_request, strict=True) if s["workload"] == workload]
        out[f"{workload}_acceptance_length"] = acc.pooled_acceptance(rows)
    return out


def _versions() -> dict[str, str]:
    try:
        ddtune_version = metadata.version("ddtune")
    except metadata.PackageNotFoundError:
        ddtune_version = "unknown"
    return {
        "ddtune": ddtune_version,
        "python": platform.python_version(),
        "httpx": httpx.__version__,
    }
