"""The canary: the whole path of a sweep proven in two starts, before hours are committed.

    code = run_canary(spec, store_path, console)      # 0: READY both times; 1: not

`ddtune sweep canary SPEC` and `ddtune sweep run --canary` (which runs the
sweep only when the canary passes). Steps: every check before the first stop
(`before_stop.py`) and the engine's check of the launch command; one stop/start
into the first config the sweep would try (a trial config: the baseline is
usually what already serves), READY by the full readiness protocol; one bench
of a single short request against it; then the service restored as it was
before (the service as a context: `services/session.py`), READY again. Nothing is
written to the store.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from ddtune.bench.matrix import BenchMatrix, CodingWorkload, ThroughputWorkload
from ddtune.services import Owner, build_controller
from ddtune.services.engine_check import EngineCheckReport
from ddtune.services.session import ServiceSession
from ddtune.sweep.checks import check_sweep
from ddtune.sweep.run.attempt import AttemptReport, execute_attempt
from ddtune.sweep.spec.parse import Config, SweepSpec

CANARY_TOKENS = 8  # the one request's answer


def run_canary(
    spec: SweepSpec,
    store_path: Path,
    console: Console,
    checked: EngineCheckReport | None = None,
) -> int:
    """The module docstring's steps; the exit code (0 passed, 1 failed)."""
    if checked is None:
        check_sweep(spec, store_path)
    workdir = store_path.parent.resolve()
    config = first_config(spec)
    owner = Owner.current(sweep=spec.name, store=str(store_path.resolve()))
    controller = build_controller(spec.service, workdir / "canary", owner=owner)
    with ServiceSession(controller, spec.baseline, _announce(console)) as service:
        console.print(f"canary: stop, then start {escape(config.label())} ...")
        report = execute_attempt(
            controller,
            one_request(spec.bench),
            spec.service.engine,
            config,
            workdir / "canary" / "trial",
            lambda text: None,
        )
    passed = _said(report, console)
    restored = service.restored or ""
    console.print(escape(restored))
    back = not restored.startswith("NOT")
    ok = passed and back
    verdict = "passed: the sweep's whole path works" if ok else "FAILED: fix this before a sweep"
    console.print(f"canary {verdict}")
    return 0 if ok else 1


def first_config(spec: SweepSpec) -> Config:
    """The first trial config (not the baseline, which usually serves already)."""
    if spec.configs:
        return spec.configs[0]
    if spec.search is not None:
        params, values = spec.search.covering()[0]
        return Config(params, tuple(sorted(values.items())))
    assert spec.baseline is not None  # a spec without configs is refused when parsed
    return spec.baseline


def one_request(bench: BenchMatrix) -> BenchMatrix:
    """The spec's bench cut to one short request: no warmup, no coding, no suites."""
    short = ThroughputWorkload(
        n_prompts=1,
        prompt_tokens=bench.short.prompt_tokens,
        max_tokens=min(CANARY_TOKENS, bench.short.max_tokens),
        repeats=1,
    )
    return bench.model_copy(
        update={
            "warmup": 0,
            "short": short,
            "long": ThroughputWorkload(enabled=False),
            "coding": CodingWorkload(enabled=False),
            "suite": ("bundled",),
            "traffic_file": None,
            "prompts_file": None,
            "load": None,
            "logprob_gaps": False,
        }
    )


def _announce(console: Console) -> Callable[[str], None]:
    return lambda line: console.print("canary: restoring the service as it was before ...")


def _said(report: AttemptReport, console: Console) -> bool:
    outcome = report.outcome
    if not outcome.ready:
        console.print(
            f"[red]canary: not READY[/]: {escape(str(outcome.failure))} — "
            f"{escape(outcome.detail)} (log: {outcome.log_path or 'none'})"
        )
        return False
    ready_s = outcome.timings.get("start_to_ready_s", 0)
    console.print(f"canary: READY in {ready_s:.1f} s")
    if report.bench is None:
        console.print(
            f"[red]canary: the one-request bench failed[/]: {escape(str(report.bench_error))}"
        )
        return False
    console.print(f"canary: one request answered in {report.bench_s or 0:.1f} s")
    return True


__all__ = ["first_config", "one_request", "run_canary"]
