"""`ddtune trace record|predict|landscape`: the command-line face of `ddtune.trace`.

It sits in the CLI folder above the sweep package because a trace is usually of a sweep's own
workload: `--spec SPEC` traces the requests its bench sends (and takes the
windows and the largest topk from its configs), `--store S` takes the T = 0
continuations from that sweep's stored baseline outputs instead of the
engine's own greedy decode. `--prompt` / `--prompts-file` trace given prompts.
See docs/traces.md "Traces".
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ddtune.cli import add_group, comma_ints
from ddtune.cli.words import T0, TAU
from ddtune.errors import UserError
from ddtune.params import MODES, WINDOW_NONE, DecodeParams, parse_window, window_to_wire

if TYPE_CHECKING:
    from ddtune.sweep.spec.parse import SweepSpec
    from ddtune.trace.planning.loading import Loading
    from ddtune.trace.planning.models import TraceModels
    from ddtune.trace.record import TargetSide
    from ddtune.trace.requests import TraceRequest, TraceSettings

CAPTURE_CHOICES = ("auto", "post-norm", "pre-norm")


def register(subparsers: argparse._SubParsersAction) -> None:
    actions = add_group(
        subparsers, "trace", "record a drafter trace; predict every config's acceptance from it"
    )
    _add_record(actions)
    _add_predict(actions)
    _add_landscape(actions)


def _add_record(actions: argparse._SubParsersAction) -> None:
    record = actions.add_parser(
        "record",
        help=f"the drafter's per-depth top-K at every position of the target's {T0} path",
        description=f"The drafter's per-depth top-K at every position of the target's {T0} "
        "path, per window. Resumable: rerun the same command to finish a killed recording.",
    )
    record.add_argument("--out", required=True, type=Path, help="trace folder to write")
    source = record.add_argument_group("what to trace (one of)")
    source.add_argument("--prompt", action="append", default=[], help="prompt text (repeatable)")
    source.add_argument("--prompts-file", type=Path, help='JSONL of {"prompt": ..., "workload"}')
    source.add_argument("--spec", type=Path, help="a sweep spec: the requests its bench sends")
    source.add_argument(
        "--store",
        type=Path,
        help="a sweep store: its spec's requests, with "
        "the stored baseline T = 0 outputs as the continuation",
    )
    source.add_argument("--sweep", help="sweep name inside --store (default: the newest)")
    record.add_argument(
        "--from-service",
        metavar="URL",
        help="take each T = 0 continuation from the running service at URL (its token ids "
        "where it returns them): the trace then decodes nothing itself",
    )
    record.add_argument("--service-model", help="with --from-service: the model name to request")
    record.add_argument("--max-tokens", type=int, default=64, help="with --prompt/--prompts-file")
    record.add_argument("--ignore-eos", action="store_true", help="with --prompt/--prompts-file")
    record.add_argument(
        "--window",
        action="append",
        default=[],
        help="drafter window W or 'none' (repeatable; default: the spec's windows, else none)",
    )
    record.add_argument(
        "--topk-max",
        type=int,
        help="K kept per depth (default: the spec's largest topk, at least 8)",
    )
    record.add_argument(
        "--query-length",
        type=int,
        action="append",
        default=[],
        help="drafter queries per round (default: the spec's DFlash block sizes, else the "
        "drafter's block; vLLM's DFlash with K draft tokens: K + 1; repeatable)",
    )
    record.add_argument(
        "--capture",
        choices=CAPTURE_CHOICES,
        default="auto",
        help="the last target layer as the served engine feeds it: post-norm "
        "(ddtune, HF, SGLang) or pre-norm (vLLM); auto: by the spec's engine",
    )
    record.add_argument("--backend", choices=("ddtune", "transformers"), default="ddtune")
    record.add_argument(
        "--target",
        type=Path,
        help="target folder (default: the one the spec's service loads; with --prompt: bundled)",
    )
    record.add_argument(
        "--drafter",
        type=Path,
        help="DFlash drafter folder (default: the spec's service's; with --prompt: bundled)",
    )
    hf = record.add_argument_group("loading (--backend transformers)")
    hf.add_argument("--device", default="auto", help="cpu, cuda or auto (the GPUs, if any)")
    hf.add_argument(
        "--dtype",
        default="auto",
        help="auto (the model's own, else bfloat16), float32, bfloat16, float16",
    )
    hf.add_argument("--devices", help="the GPUs to spread the target over: 0,1,2 (or cpu)")
    hf.add_argument(
        "--max-memory",
        action="append",
        default=[],
        metavar="DEVICE=AMOUNT",
        help="at most this much on a device: cuda:0=70GiB, cpu=200GiB (repeatable)",
    )
    hf.add_argument("--offload", action="store_true", help="spill layers to CPU memory")
    hf.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="run the model folder's own code (without --spec; with it, the spec's command says)",
    )
    record.add_argument(
        "--plan-only", action="store_true", help="print the memory and time plan, load nothing"
    )
    record.add_argument("--threads", type=int, help="torch CPU threads")
    record.add_argument("--fresh", action="store_true", help="replace what --out holds")
    record.set_defaults(func=cmd_record)


def _add_predict(actions: argparse._SubParsersAction) -> None:
    predict = actions.add_parser("predict", help="one config's acceptance, round by round")
    predict.add_argument("trace", type=Path, nargs="?", help="the trace folder")
    predict.add_argument(
        "--mode",
        choices=(*MODES, "ngram"),
        default="ddtree",
        help="ngram: vLLM's prompt lookup from the greedy path alone (--min, --max, --k)",
    )
    predict.add_argument("--budget", type=int, default=16)
    predict.add_argument("--topk", type=int, default=4)
    predict.add_argument("--window", default=WINDOW_NONE)
    predict.add_argument("--query-length", type=int, help="drafter queries (default: its block)")
    predict.add_argument(
        "--engine",
        help="count as this engine's acceptance source does "
        "(ddtune, sglang, vllm; vllm also drafts K tokens every round)",
    )
    _old_name(predict, "--kind", "--engine")
    predict.add_argument("--min", type=int, default=1, help="ngram: prompt_lookup_min")
    predict.add_argument("--max", type=int, default=4, help="ngram: prompt_lookup_max")
    predict.add_argument("--k", type=int, default=4, help="ngram: num_speculative_tokens")
    predict.add_argument(
        "--max-model-len", type=int, help="ngram: the served model's length (default: the trace's)"
    )
    predict.add_argument(
        "--store",
        type=Path,
        help=f"ngram without a trace: a sweep store's baseline {T0} outputs",
    )
    predict.add_argument("--sweep", help="with --store: the sweep's name (default: the newest)")
    predict.add_argument(
        "--tokenizer",
        type=Path,
        help="with --store: the target's tokenizer.json (default: the stored spec's target's)",
    )
    predict.add_argument("--json", action="store_true", help="print one JSON object")
    predict.set_defaults(func=cmd_predict)


def _old_name(parser: argparse.ArgumentParser, old: str, new: str) -> None:
    """`old`, the option's name before `new`, still read; left out of --help."""
    parser.add_argument(old, dest=new[2:], default=argparse.SUPPRESS, help=argparse.SUPPRESS)


def _add_landscape(actions: argparse._SubParsersAction) -> None:
    land = actions.add_parser(
        "landscape",
        help=f"{TAU} over budget x topk per window (a table and a heatmap PNG)",
        description=f"{TAU} over budget x topk per window: a table and a heatmap PNG.",
    )
    land.add_argument("trace", type=Path)
    land.add_argument("--budgets", default="4,8,16,32,64")
    land.add_argument("--topks", default="2,4,6,8")
    land.add_argument("--engine", help="count as this engine's acceptance source does")
    _old_name(land, "--kind", "--engine")
    land.add_argument(
        "--out",
        type=Path,
        help="folder for landscape.png and landscape.json (default: the trace folder)",
    )
    land.set_defaults(func=cmd_landscape)


# --- record ---------------------------------------------------------------------------


def cmd_record(args: argparse.Namespace) -> int:
    """Plan, then record; `--plan-only` stops after the plan, which needs no torch (the
    core install prints it too)."""
    spec, requests, prompt_hash, source = _requests(args)
    settings = _settings(args, spec)
    models, loading = _models(args, spec)
    if args.from_service:
        requests, source = _from_service(args, models, requests), f"service:{args.from_service}"
    _plan(args, models, loading, requests, settings)
    if args.plan_only:
        return 0
    from ddtune.trace.record import record_trace

    _threads(args.threads)
    side = _target_side(args.backend, models, loading)
    if args.fresh and args.out.exists():
        shutil.rmtree(args.out)
    started = time.perf_counter()
    with _progress([r.max_tokens for r in requests]) as advance:
        header = record_trace(side, requests, args.out, settings, source, prompt_hash, advance)
    _print_cost(args.out, header, time.perf_counter() - started)
    _print_mismatches(args.out)
    return 0


def _print_mismatches(folder: Path) -> None:
    """A note when a continuation parts from the teacher-forced argmax somewhere."""
    from ddtune.trace.predict import Trace

    parted = [d for d in Trace.read(folder).data if d.greedy_mismatches]
    if parted:
        tokens = sum(d.greedy_mismatches for d in parted)
        print(
            f"note: in {len(parted)} request(s), {tokens} continuation token(s) are not the "
            "target's argmax when teacher-forced: near-ties, or another engine's greedy path "
            "(--store); the replay follows the continuation as recorded",
            file=sys.stderr,
        )


def _requests(
    args: argparse.Namespace,
) -> tuple[SweepSpec | None, list[TraceRequest], str | None, str]:
    """(the spec, the requests, the bench's prompt-set hash, the continuation's source)."""
    from ddtune.trace.sources import (
        requests_from_matrix,
        requests_from_prompts,
        requests_from_prompts_file,
    )

    given = [
        bool(args.prompt),
        args.prompts_file is not None,
        args.spec is not None,
        args.store is not None,
    ]
    if sum(given) != 1:
        raise UserError("give exactly one of --prompt, --prompts-file, --spec, --store")
    if args.store is not None:
        return store_requests(args.store, args.sweep)
    if args.spec is not None:
        from ddtune.sweep.plan import read_spec

        spec = read_spec(args.spec)
        requests, prompt_hash = requests_from_matrix(spec.bench)
        return spec, requests, prompt_hash, "engine"
    if args.prompts_file is not None:
        found = requests_from_prompts_file(args.prompts_file, args.max_tokens, args.ignore_eos)
        return None, found, None, "engine"
    return (
        None,
        requests_from_prompts(args.prompt, args.max_tokens, "prompt", args.ignore_eos),
        None,
        "engine",
    )


def store_requests(path: Path, sweep: str | None) -> tuple[SweepSpec, list[TraceRequest], str, str]:
    """A stored sweep's bench requests, each continued by the baseline's stored T=0 output."""
    from dataclasses import replace

    from ddtune.sweep.reporting import stored_spec
    from ddtune.sweep.store.db import Store
    from ddtune.trace.sources import counted, requests_from_matrix

    store = Store(path, read_only=True)
    try:
        row = store.sweep_row(sweep)
        spec = stored_spec(store, row)
        outputs = _baseline_outputs(store, row["id"])
    finally:
        store.close()
    if spec.bench.temperature != 0:
        raise UserError(
            f"{path}: the sweep benched at T = {spec.bench.temperature}; a trace "
            "needs the T = 0 outputs (the greedy path)"
        )
    from ddtune.bench.runner import measured_requests

    _, specs = measured_requests(spec.bench)
    if len(outputs) != len(specs):
        raise UserError(
            f"{path}: the baseline stored {len(outputs)} outputs for {len(specs)} "
            "requests of its bench; trace with --spec instead"
        )
    requests, prompt_hash = requests_from_matrix(spec.bench)
    by_prompt = {(s.workload, s.prompt): o for s, o in zip(specs, outputs, strict=True)}
    continued = [replace(r, continuation=by_prompt[(r.workload, r.prompt)]) for r in requests]
    return spec, counted(continued), prompt_hash, f"store:{path}"


def _baseline_outputs(store: Any, sweep_id: int) -> list[str]:
    for record in store.trial_records(sweep_id):
        if record.is_baseline and record.status == "done" and record.outputs:
            return list(record.outputs)
    raise UserError(f"{store.path}: no finished baseline trial with T=0 outputs to trace")


def _settings(args: argparse.Namespace, spec: SweepSpec | None) -> TraceSettings:
    from ddtune.trace.predict import queries_of
    from ddtune.trace.requests import TraceSettings

    params = [c.params for c, _ in spec.all_configs()] if spec is not None else []
    windows = (
        [parse_window(w) for w in args.window]
        or sorted({p.window for p in params if p.mode != "ar"}, key=lambda w: (w is None, w or 0))
        or [None]
    )
    topk = args.topk_max or max([8, *(p.topk for p in params if p.mode == "ddtree")])
    capture = args.capture
    if capture == "auto":
        vllm = spec is not None and spec.service.engine == "vllm"
        capture = "pre-norm" if vllm else "post-norm"
    lengths, block_too = tuple(args.query_length), False
    if not lengths:  # the spec's DFlash block sizes, and the drafter's own block where one takes it
        queries = [queries_of(p) for p in params if p.mode != "ar"]
        lengths = tuple(sorted({q for q in queries if q is not None}))
        block_too = None in queries
    return TraceSettings(tuple(windows), lengths, topk, capture, block_too)


def _from_service(
    args: argparse.Namespace, models: TraceModels, requests: list[TraceRequest]
) -> list[TraceRequest]:
    from ddtune.fingerprint import config_of
    from ddtune.trace.service import continue_from_service

    if args.store is not None:
        raise UserError("--from-service and --store both give the continuation: give one")
    block = int((config_of(models.drafter) or {}).get("block_size", 16))
    return continue_from_service(args.from_service, requests, block, args.service_model)


def _models(args: argparse.Namespace, spec: SweepSpec | None) -> tuple[TraceModels, Loading]:
    from ddtune.sweep.spec.served import spec_models
    from ddtune.trace.planning.loading import Loading, parse_devices, parse_max_memory
    from ddtune.trace.planning.models import trace_models

    served = spec_models(spec) if spec is not None else None
    models = trace_models(args.target, args.drafter, served)
    if args.trust_remote_code and served is not None:
        raise UserError(
            "--trust-remote-code: with a spec, its service command decides "
            "(add --trust-remote-code there)"
        )
    loading = Loading(
        device=args.device,
        dtype=_dtype(args.dtype, models),
        devices=parse_devices(args.devices),
        max_memory=parse_max_memory(args.max_memory),
        offload=args.offload,
        trust_remote_code=models.trust_remote_code or args.trust_remote_code,
    )
    return models, loading


def _plan(
    args: argparse.Namespace,
    models: TraceModels,
    loading: Loading,
    requests: list[TraceRequest],
    settings: TraceSettings,
) -> None:
    """Print the plan; a UserError when it cannot fit (before a weight is read)."""
    from ddtune.trace.planning.plan import record_plan

    plan = record_plan(models, loading, requests, settings, args.backend)
    print("\n".join(plan.lines()))
    why = plan.refusal()
    if why is not None:
        raise UserError(why)


def _dtype(given: str, models: TraceModels) -> str:
    """`--dtype`, else (auto) the dtype the spec's service computes in: a greedy path
    recorded in another dtype can leave the served one at near-ties."""
    if given != "auto" or models.dtype is None:
        return given
    print(f"recording in {models.dtype}: the dtype the spec's service serves (--dtype to change)")
    return models.dtype


def _target_side(backend: str, models: TraceModels, loading: Loading) -> TargetSide:
    if backend == "transformers":
        from ddtune.trace.hf import HfTarget

        return HfTarget(models.target, models.drafter, loading)
    from ddtune.trace.record import OwnTarget

    dtype = "float32" if loading.dtype == "auto" else loading.dtype
    return OwnTarget(models.target, models.drafter, dtype=dtype)


def _threads(threads: int | None) -> None:
    from ddtune.cli.generate import setup_threads

    setup_threads(threads)


def _progress(tokens: list[int]) -> Any:
    """A bar over the requests: done of total, traced tokens a second, time left."""
    import contextlib

    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    @contextlib.contextmanager
    def bar() -> Any:
        columns = (
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeRemainingColumn(),
        )
        started = time.perf_counter()
        with Progress(*columns, transient=True) as progress:
            task = progress.add_task("tracing requests", total=len(tokens), rate="")

            def advance(done: int, _total: int) -> None:
                rate = sum(tokens[:done]) / max(time.perf_counter() - started, 1e-9)
                progress.update(task, completed=done, rate=f"{rate:,.0f} tokens/s")

            yield advance

    return bar()


def _print_cost(folder: Path, header: Any, seconds: float) -> None:
    from ddtune.trace.files import size_bytes

    tokens = sum(r.max_tokens for r in header.requests)
    print(
        f"traced {len(header.requests)} request(s), up to {tokens} tokens, "
        f"{len(header.windows)} window(s) x {len(header.query_lengths)} query length(s), "
        f"K = {header.topk_max}, in {seconds:.1f} s ({1000 * seconds / max(tokens, 1):.1f} s "
        f"per 1,000 tokens, model loading excluded); {folder}: {size_bytes(folder) / 1024:.0f} KiB"
    )


# --- predict, landscape ---------------------------------------------------------------


def cmd_predict(args: argparse.Namespace) -> int:
    from ddtune.engines import get_engine
    from ddtune.trace.predict import Trace

    if args.mode == "ngram":
        return _predict_ngram(args)
    if args.trace is None:
        raise UserError("give the trace folder: ddtune trace predict DIR ...")
    params = DecodeParams.from_wire(
        {
            "mode": args.mode,
            "budget": args.budget,
            "topk": args.topk,
            "window": parse_window(args.window),
        }
    )
    engine = get_engine(args.engine) if args.engine else None
    prediction = Trace.read(args.trace).predict(params, engine, args.query_length)
    if args.json:
        out = prediction.to_json()
        if engine is not None:
            out["engine"], out["acceptance"] = engine.name, prediction.acceptance(engine)
        print(json.dumps(out))
        return 0
    print(
        f"{params.label()}: tau {prediction.mean_acceptance_length():.3f} "
        f"({prediction.rounds_per_request():.1f} rounds a request)"
    )
    for workload in prediction.workloads():
        print(f"  {workload}: tau {prediction.mean_acceptance_length(workload):.3f}")
    if engine is not None:
        counted = prediction.acceptance(engine)
        shown = "none (it reports no acceptance)" if counted is None else f"{counted:.3f}"
        print(f"  as {engine.name} counts it: {shown}")
    return 0


def _predict_ngram(args: argparse.Namespace) -> int:
    """vLLM's prompt lookup over a trace's greedy paths, or a store's baseline outputs."""
    from ddtune.trace.ngram import NgramRule, ngram_lines, paths_of_texts, trace_paths

    if (args.trace is None) == (args.store is None):
        raise UserError("--mode ngram: give a trace folder or --store S, one of them")
    if args.store is not None:
        from ddtune.sweep.spec.served import spec_models

        spec, requests, _, _ = store_requests(args.store, args.sweep)
        target = spec_models(spec).target
        where = args.tokenizer or (target / "tokenizer.json" if target else Path("tokenizer.json"))
        paths, context = paths_of_texts(where, requests), 1 << 30
    else:
        paths, context = trace_paths(args.trace)
    rule = NgramRule(args.min, args.max, args.k, args.max_model_len or context)
    print("\n".join(ngram_lines(paths, rule, args.json)))
    return 0


def cmd_landscape(args: argparse.Namespace) -> int:
    from ddtune.engines import get_engine
    from ddtune.trace.landscape import landscape
    from ddtune.trace.predict import Trace

    trace = Trace.read(args.trace)
    engine = get_engine(args.engine) if args.engine else None
    land = landscape(
        trace,
        comma_ints(args.budgets, "--budgets", 1),
        comma_ints(args.topks, "--topks", 1),
        engine,
    )
    out = args.out or args.trace
    out.mkdir(parents=True, exist_ok=True)
    land.heatmap(out / "landscape.png")
    rows = [
        {"window": window_to_wire(w), "budget": b, "topk": k, "tau": tau}
        for (w, b, k), tau in land.tau.items()
    ]
    (out / "landscape.json").write_text(
        json.dumps(
            {
                "ddtree": rows,
                "dflash": {str(window_to_wire(w)): tau for w, tau in land.dflash.items()},
            },
            indent=1,
        )
        + "\n"
    )
    print(land.text())
    print(f"wrote {out / 'landscape.png'} and {out / 'landscape.json'}", file=sys.stderr)
    return 0


__all__ = ["register", "store_requests"]
