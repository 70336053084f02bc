"""`ServerState`: the one object the HTTP app talks to.

It owns the lifecycle (loading → serving → shutting_down), the engine and its
worker, the live decoding config (hot-reconfigurable, with a generation
counter; with `--schedule` one config per range of requests in flight, the
first range's being the reported one until a POST sets one config), the
identity and the metrics. Loading runs on a background thread so that
`/health` can answer 503 while weights load. See docs/server.md
"Server".
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ddtune.ddtree.batch.budget import check_round_fits
from ddtune.engines.schedule import Schedule, read_schedule
from ddtune.errors import UserError
from ddtune.params import DecodeParams, SamplingParams
from ddtune.server.api.chat import ChatTemplate
from ddtune.server.api.errors import ApiError, invalid, unavailable
from ddtune.server.api.prompts import PromptContext
from ddtune.server.config import ServeConfig
from ddtune.server.identity import Identity, versions, weights_sha256
from ddtune.server.metrics import ServerMetrics
from ddtune.server.worker import GenerationWorker, Job, JobOutcome

log = logging.getLogger("ddtune.server")

WARMUP_PROMPT = "def"


class ServerState:
    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        self.identity = Identity()
        self.metrics = ServerMetrics()
        self.phase = "loading"  # loading | serving | shutting_down | failed
        self.load_error: BaseException | None = None
        self.engine: Any = None
        self.worker: GenerationWorker | None = None
        self.chat: ChatTemplate | None = None
        self.prompt_context: PromptContext | None = None
        self.target_dir, self.drafter_dir = resolve_model_dirs(config)
        self.model_name = config.model_name or self.target_dir.name
        self.target_sha256: str | None = None
        self.drafter_sha256: str | None = None
        self._schedule: Schedule | None = None
        if config.schedule is not None:
            self._schedule = read_schedule(config.schedule)
        self._params = self._schedule.tiers[0].params if self._schedule else config.params
        self._generation = 0
        self._lock = threading.Lock()
        self.block_size = drafter_block_size(self.drafter_dir)
        for params in self._all_params():
            self._check_drafter(params)
            self._check_step_budget(params)

    # -- lifecycle -----------------------------------------------------------

    def load(self) -> None:
        """Load weights, start the worker, run a 1-token warm-up (blocking)."""
        from ddtune.ddtree.engine import Engine  # heavy import (torch) only here

        self.engine = Engine.load(self.target_dir, self.drafter_dir)
        self.target_sha256 = weights_sha256(self.target_dir)
        self.drafter_sha256 = weights_sha256(self.drafter_dir)
        self.chat = ChatTemplate.from_model_dir(self.target_dir)
        tokenizer = self.engine.tokenizer
        self.prompt_context = PromptContext(
            model_name=self.model_name,
            max_context=int(self.engine.max_context),
            encode=tokenizer.encode,
            render_chat=self.chat.render,
            vocab_size=_vocab_size(self.engine),
            max_token_chars=longest_token_bytes(tokenizer),
            strict=self.config.strict_requests,
        )
        for params in self._all_params():
            self._check_fits(params)
        self.worker = GenerationWorker(
            self.engine,
            self.for_requests,
            self.metrics,
            self.config.max_queue,
            self.config.max_batch,
            self.config.max_step_tokens,
        )
        self.worker.start()
        outcome = self.generate_blocking(self.warmup_ids(), max_new_tokens=1, timeout=600)
        if outcome is None or outcome.error is not None:
            raise RuntimeError(f"the warm-up generation failed: {outcome and outcome.error}")

    def mark_serving(self) -> None:
        self.identity.ready_at = time.time()
        self.phase = "serving"

    def begin_shutdown(self) -> None:
        if self.phase != "failed":
            self.phase = "shutting_down"

    def close(self) -> None:
        if self.worker is not None:
            self.worker.stop()

    # -- generation helpers --------------------------------------------------

    def warmup_ids(self) -> list[int]:
        ids = self.engine.tokenizer.encode(WARMUP_PROMPT)
        return ids or [0]

    def generate_blocking(
        self, prompt_ids: list[int], max_new_tokens: int, timeout: float
    ) -> JobOutcome | None:
        """Queue one greedy generation and wait for it; None on timeout (then cancelled)."""
        done = threading.Event()
        box: list[JobOutcome] = []

        def on_done(outcome: JobOutcome) -> None:
            box.append(outcome)
            done.set()

        sampling = SamplingParams(max_new_tokens=max_new_tokens, seed=0, ignore_eos=True)
        job = Job(prompt_ids=prompt_ids, sampling=sampling, on_done=on_done)
        worker = self.loaded_worker()
        worker.submit(job)
        if not done.wait(timeout):
            worker.cancel(job)
            return None
        return box[0]

    # -- decoding config -----------------------------------------------------

    def current(self) -> tuple[DecodeParams, int]:
        with self._lock:
            return self._params, self._generation

    def for_requests(self, in_flight: int) -> tuple[DecodeParams, int]:
        """The config for a request admitted with `in_flight` requests running or queued."""
        with self._lock:
            if self._schedule is None:
                return self._params, self._generation
            return self._schedule.pick(in_flight).params, self._generation

    @property
    def schedule(self) -> Schedule | None:
        with self._lock:
            return self._schedule

    def _all_params(self) -> list[DecodeParams]:
        return [t.params for t in self._schedule.tiers] if self._schedule else [self._params]

    def reconfigure(self, updates: Mapping[str, Any]) -> tuple[DecodeParams, int]:
        """Apply wire-form `{mode, budget, topk, window}` (any subset); 400 naming the key.
        A schedule gives way: from now on every request runs the one config set here."""
        with self._lock:
            try:
                params = self._params.with_updates(updates)
                self._check_drafter(params)
                self._check_fits(params)
                self._check_step_budget(params, key="budget")
            except UserError as exc:
                raise invalid(exc.key, str(exc)) from None
            if self._schedule is not None:
                log.info("the schedule is off: one config from now on")
            self._params, self._schedule = params, None
            self._generation += 1
            self.metrics.config_generation.set(self._generation)
            return params, self._generation

    def _check_drafter(self, params: DecodeParams) -> None:
        if params.mode != "ar" and self.drafter_dir is None:
            raise UserError(
                f"mode {params.mode!r} needs a drafter; start the server with --drafter DIR "
                "or use mode 'ar'",
                key="mode",
            )

    def _check_fits(self, params: DecodeParams) -> None:
        """Window and budget bounded by the loaded model's context (as `ddtune serve` flags)."""
        context = getattr(self.engine, "max_context", None)
        if context is None:
            return
        if params.window is not None and params.window > context:
            raise UserError(
                f"window must be at most the model's context of {context} tokens (or 'none'); "
                f"got {params.window}",
                key="window",
            )
        if params.budget >= context:
            raise UserError(
                f"budget must be below the model's context of {context} tokens; "
                f"got {params.budget}",
                key="budget",
            )

    def _check_step_budget(self, params: DecodeParams, key: str | None = None) -> None:
        """One request's round (tree + root) must fit `max_step_tokens` (`UserError`)."""
        try:
            check_round_fits(params, self.block_size, self.config.max_step_tokens)
        except UserError as exc:
            raise UserError(str(exc), key=key or exc.key) from None

    # -- reports -------------------------------------------------------------

    def config_dict(self) -> dict[str, Any]:
        params, _ = self.current()
        return {
            **params.to_wire(),
            "block_size": getattr(self.engine, "block_size", None),
            "label": params.label(),
            "max_queue": self.config.max_queue,
            "max_batch": self.config.max_batch,
            "max_step_tokens": self.config.max_step_tokens,
            "grace_seconds": self.config.grace_seconds,
            "schedule": None if self.schedule is None else self.schedule.to_wire(),
        }

    def server_info(self) -> dict[str, Any]:
        params, generation = self.current()
        return {
            "instance_id": self.identity.instance_id,
            "pid": self.identity.pid,
            "started_at": self.identity.started_at,
            "ready_at": self.identity.ready_at,
            "state": self.phase,
            "model": self.model_name,
            "config": self.config_dict(),
            "config_hash": params.hash(),
            "config_generation": generation,
            "target_dir": str(self.target_dir),
            "drafter_dir": None if self.drafter_dir is None else str(self.drafter_dir),
            "target_sha256": self.target_sha256,
            "drafter_sha256": self.drafter_sha256,
            "max_context": getattr(self.engine, "max_context", None),
            "versions": versions(),
        }

    def require_serving(self) -> None:
        if self.phase == "loading":
            raise _loading()
        if self.phase != "serving":
            raise unavailable("the server is shutting down", "shutting_down")

    def loaded_worker(self) -> GenerationWorker:
        if self.worker is None:
            raise _loading()
        return self.worker

    def loaded_context(self) -> PromptContext:
        if self.prompt_context is None:
            raise _loading()
        return self.prompt_context


def resolve_model_dirs(config: ServeConfig) -> tuple[Path, Path | None]:
    """Explicit dirs win; with neither given, use the bundled target and drafter.

    A given --target without --drafter gets no drafter (never a bundled drafter
    trained for another target).
    """
    from ddtune.assets import MODELS_DIR, default_drafter_dir, default_target_dir

    if config.target is not None:
        target = config.target
        if not (target / "config.json").is_file():
            raise UserError(f"{target} is not a model folder (config.json is missing)")
        drafter = config.drafter
    else:
        target = default_target_dir()
        bundled = MODELS_DIR / "drafter"
        drafter = config.drafter or (default_drafter_dir() if bundled.is_dir() else None)
    if drafter is not None and not (drafter / "config.json").is_file():
        raise UserError(f"{drafter} is not a drafter folder (config.json is missing)")
    return target, drafter


def drafter_block_size(drafter_dir: Path | None) -> int:
    """The drafter's block size from its config.json (1 without a drafter): no weights needed."""
    if drafter_dir is None:
        return 1
    from ddtune.ddtree.models.config import DrafterConfig

    return DrafterConfig.from_file(drafter_dir / "config.json").block_size


def _vocab_size(engine: Any) -> int | None:
    """Token ids a prompt may use: both the tokenizer and the target must know them."""
    sizes = [getattr(engine.tokenizer, "vocab_size", None)]
    target = getattr(engine, "target", None)
    sizes.append(getattr(getattr(target, "cfg", None), "vocab_size", None))
    known = [int(s) for s in sizes if isinstance(s, int)]
    return min(known) if known else None


def longest_token_bytes(tokenizer: Any) -> int:
    """The most UTF-8 bytes one token decodes to: no token stands for more characters.

    (Byte-level BPE and character tokenizers; a lossy decode's U+FFFD is 3 bytes, at
    least the 1-3 raw bytes it replaces.) So a text longer than context x this cannot
    fit the context, whatever it tokenizes to.
    """
    decode = tokenizer.decode
    return max(
        (len(decode([i]).encode("utf-8")) for i in range(int(tokenizer.vocab_size))), default=1
    )


def _loading() -> ApiError:
    return unavailable("the model is still loading; retry shortly", "loading", 1)


__all__ = ["ServerState", "resolve_model_dirs"]
