"""`Engine`: load a target (and drafter) folder once, then `generate()` one request at a time.

    engine = Engine.load(target_dir, drafter_dir)
    result = engine.generate(
        engine.tokenizer.encode("def f("),
        DecodeParams("ddtree", budget=16),
        SamplingParams(max_new_tokens=32),
    )
    result.token_ids, result.text, result.finish_reason, result.stats

`DecodeParams` and `SamplingParams` (ddtune.params) validate their own values;
`generate` checks what needs the model (a drafter for speculative modes, the
prompt's length and token ids) and raises `UserError` when those are wrong.
It holds a lock for the whole request (one at a time; callers such as
the server serialise requests anyway) and keeps no state between requests.
`on_tokens(new_ids)` is called as tokens become final; returning False
cancels (finish "cancelled"). The first token comes from the prefill; every
round after it is counted in the stats. See docs/ddtree.md "Engine".
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from ddtune.ddtree.choice import TokenChooser
from ddtune.ddtree.decoding import STAGES, Session
from ddtune.ddtree.logprobs import TokenLogprob
from ddtune.ddtree.models.drafter import DFlashDrafter
from ddtune.ddtree.models.linear import worth_copying
from ddtune.ddtree.models.loading import load_decoder, load_drafter
from ddtune.ddtree.models.model import Decoder
from ddtune.ddtree.models.tokenizer import Tokenizer
from ddtune.ddtree.sampling import Sampler
from ddtune.ddtree.stops import OutputBuilder
from ddtune.errors import UserError
from ddtune.params import DecodeParams, SamplingParams

OnTokens = Callable[[list[int]], bool | None]  # gets newly final ids; returning False cancels


@dataclass
class GenerationStats:
    rounds: int = 0  # verify rounds after the prefill
    acceptance_lengths: list[int] = field(default_factory=list)  # tokens per round, bonus incl.
    tree_sizes: list[int] = field(default_factory=list)  # draft nodes verified per round
    stage_seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    prefill_seconds: float = 0.0
    total_seconds: float = 0.0
    prompt_tokens: int = 0
    generated_tokens: int = 0
    batch_rows: int = 0  # requests in each of its rounds, summed (= rounds when unbatched)

    @property
    def mean_acceptance_length(self) -> float:
        """Mean tokens committed per round (bonus included), in [1, block_size]."""
        return sum(self.acceptance_lengths) / self.rounds if self.rounds else 0.0

    @property
    def mean_batch_size(self) -> float:
        """Mean number of requests that shared this request's rounds (1 when unbatched)."""
        return self.batch_rows / self.rounds if self.rounds else 0.0

    @property
    def tokens_per_second(self) -> float:
        return self.generated_tokens / self.total_seconds if self.total_seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["mean_acceptance_length"] = self.mean_acceptance_length
        d["mean_batch_size"] = self.mean_batch_size
        d["tokens_per_second"] = self.tokens_per_second
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GenerationStats:
        derived = {"mean_acceptance_length", "mean_batch_size", "tokens_per_second"}
        return cls(**{k: v for k, v in d.items() if k not in derived})


@dataclass
class RequestSetup:
    """What one request needs besides its prompt and params (`Engine.setup`)."""

    out: OutputBuilder  # stop tokens/strings, max/min tokens, what may stream
    capacity: int  # context slots: prompt + max_new_tokens + budget + block, capped
    chooser: TokenChooser  # sampler, seeded generator, min_tokens ban, logprobs


@dataclass
class GenerationResult:
    token_ids: list[int]  # generated ids only (stop token excluded)
    text: str
    finish_reason: str  # "stop" | "length" | "cancelled"
    stats: GenerationStats
    stop_token: int | None = None  # the stop token (EOS or a stop_token_id) that ended it
    logprobs: list[TokenLogprob] | None = None  # one per token_ids entry (`sampling.logprobs`)
    prompt_logprobs: list[TokenLogprob] | None = None  # prompt[1:] (`sampling.prompt_logprobs`)

    def to_dict(self) -> dict[str, Any]:
        out = {
            "token_ids": self.token_ids,
            "text": self.text,
            "finish_reason": self.finish_reason,
            "stats": self.stats.to_dict(),
        }
        for key in ("logprobs", "prompt_logprobs"):
            value = getattr(self, key)
            if value is not None:
                out[key] = [asdict(entry) for entry in value]
        return out


class Engine:
    def __init__(
        self,
        target: Decoder,
        tokenizer: Tokenizer,
        drafter: DFlashDrafter | None = None,
        eos_token_ids: Sequence[int] = (),
        max_context: int | None = None,
    ) -> None:
        if drafter is not None:
            drafter.cfg.check_target(target.cfg)
        copies = worth_copying(target, *([drafter] if drafter is not None else []))
        target.fuse(copies)  # inference weights (fused projections, packed copies): layers.py
        if drafter is not None:
            drafter.fuse(copies)
        self.target, self.drafter, self.tokenizer = target, drafter, tokenizer
        self.eos_token_ids = sorted(set(eos_token_ids))
        self.max_context = min(max_context or 1 << 30, target.cfg.max_position_embeddings)
        self.block_size = drafter.cfg.block_size if drafter is not None else 1
        self._lock = threading.Lock()

    @classmethod
    def load(
        cls,
        target_dir: str | Path,
        drafter_dir: str | Path | None = None,
        dtype: torch.dtype = torch.float32,
        max_context: int | None = None,
    ) -> Engine:
        target = load_decoder(target_dir, dtype)
        drafter = load_drafter(drafter_dir, dtype) if drafter_dir is not None else None
        return cls(
            target,
            Tokenizer.load(target_dir),
            drafter,
            eos_ids(Path(target_dir), target),
            max_context,
        )

    def generate(
        self,
        prompt_ids: Sequence[int],
        params: DecodeParams,
        sampling: SamplingParams,
        on_tokens: OnTokens | None = None,
    ) -> GenerationResult:
        """One request: decode `prompt_ids` with `params`, sample and stop per `sampling`."""
        prompt = self._check(prompt_ids, params, sampling)
        setup = self.setup(prompt, params, sampling)
        with self._lock, torch.inference_mode():
            session = Session(
                self.target,
                self.drafter,
                params,
                setup.chooser,
                setup.capacity,
                prompt_logprobs=sampling.prompt_logprobs,
            )
            stats = _run(session, prompt, setup.out, on_tokens)
        return build_result(
            setup.out, stats, session.token_logprobs, session.prompt_token_logprobs, sampling
        )

    def setup(
        self, prompt: list[int], params: DecodeParams, sampling: SamplingParams
    ) -> RequestSetup:
        """A checked request's output rules, context capacity and token chooser."""
        stops = list(sampling.stop_token_ids) + ([] if sampling.ignore_eos else self.eos_token_ids)
        out = OutputBuilder(
            self.tokenizer.decode,
            sampling.max_new_tokens,
            stops,
            sampling.stop_strings,
            sampling.min_tokens,
        )
        capacity = min(
            self.max_context,
            len(prompt) + sampling.max_new_tokens + params.budget + self.block_size,
        )
        seed = sampling.seed if sampling.seed is not None else random.getrandbits(63)
        chooser = TokenChooser(
            Sampler(sampling.temperature, sampling.top_p, sampling.top_k),
            torch.Generator().manual_seed(seed),
            sampling.min_tokens,
            tuple(stops),
            sampling.logprobs,
        )
        return RequestSetup(out, capacity, chooser)

    def _check(
        self, prompt_ids: Sequence[int], params: DecodeParams, sampling: SamplingParams
    ) -> list[int]:
        """The prompt as a list, after the checks that need the model."""
        if not isinstance(params, DecodeParams) or not isinstance(sampling, SamplingParams):
            raise TypeError("generate() takes a DecodeParams and a SamplingParams")
        if params.mode != "ar" and self.drafter is None:
            raise UserError(f"mode {params.mode!r} needs a drafter; load one or use mode 'ar'")
        prompt = list(prompt_ids)
        if not prompt:
            raise UserError("the prompt is empty; give at least one token")
        if len(prompt) >= self.max_context:
            raise UserError(
                f"the prompt has {len(prompt)} tokens but the context holds {self.max_context}; "
                "shorten the prompt"
            )
        vocab = self.target.cfg.vocab_size
        if min(prompt) < 0 or max(prompt) >= vocab:
            raise UserError(f"prompt token ids must be in 0..{vocab - 1}")
        if sampling.min_tokens > sampling.max_new_tokens:
            raise UserError(
                f"min_tokens ({sampling.min_tokens}) exceeds max_new_tokens "
                f"({sampling.max_new_tokens})"
            )
        return prompt


def build_result(
    out: OutputBuilder,
    stats: GenerationStats,
    token_logprobs: list[TokenLogprob],
    prompt_logprobs: list[TokenLogprob],
    sampling: SamplingParams,
) -> GenerationResult:
    """The result of a finished request (also built by the batch scheduler)."""
    return GenerationResult(
        out.ids,
        out.final_text(),
        out.finish_reason or "length",
        stats,
        stop_token=out.stop_token,
        logprobs=None if sampling.logprobs is None else token_logprobs[: len(out.ids)],
        prompt_logprobs=None if sampling.prompt_logprobs is None else prompt_logprobs,
    )


def _run(
    session: Session, prompt: list[int], out: OutputBuilder, on_tokens: OnTokens | None
) -> GenerationStats:
    """Prefill, then rounds until a finish reason; returns the stats."""
    stats = GenerationStats(prompt_tokens=len(prompt))
    start = time.perf_counter()
    cancelled = _emit(out, [session.prefill(prompt)], on_tokens)
    stats.prefill_seconds = time.perf_counter() - start
    while out.finish_reason is None and not cancelled:
        if session.pos >= session.capacity:  # no slot left for the root: context is full
            out.finish_reason = "length"
            break
        outcome = session.step(out.remaining)
        stats.rounds += 1
        stats.acceptance_lengths.append(len(outcome.tokens))
        stats.tree_sizes.append(outcome.tree_size)
        stats.batch_rows += 1
        cancelled = _emit(out, outcome.tokens, on_tokens)
    if cancelled:
        out.finish_reason = "cancelled"
    stats.total_seconds = time.perf_counter() - start
    stats.stage_seconds = dict(session.seconds)
    stats.generated_tokens = len(out.ids)
    return stats


def _emit(out: OutputBuilder, tokens: list[int], on_tokens: OnTokens | None) -> bool:
    """Add a round's tokens; stream what became final. True when the caller cancelled."""
    new = out.add(tokens)
    if on_tokens is not None and new and on_tokens(new) is False:
        return out.finish_reason is None
    return False


def eos_ids(folder: Path, target: Decoder) -> list[int]:
    """EOS ids from generation_config.json, else from config.json (both may be int or list)."""
    path = folder / "generation_config.json"
    value: Any = target.cfg.eos_token_id
    if path.is_file():
        value = json.loads(path.read_text()).get("eos_token_id", value)
    if value is None:
        return []
    return [int(v) for v in (value if isinstance(value, list) else [value])]
