"""A schedule: the config to run for each range of concurrent requests, and how engines take it.

    schedule = Schedule.from_wire([{"max_concurrency": 2, "config": {"mode": "ddtree", ...}},
                                   {"max_concurrency": None, "config": {"mode": "ar"}}])
    schedule.pick(active=3)          # the tier for 3 requests in flight (here the open-ended one)
    schedule.to_wire()               # the same list: `report.schedule` in results.json
    read_schedule(path)              # a JSON file: that list, {"schedule": [...]} or results.json
    vllm_schedule(schedule)          # speculative_config fields, or why vLLM cannot take it
    sglang_adaptive(schedule)        # --speculative-adaptive-config JSON, or why not

Tiers ascend by `max_concurrency` (inclusive); the last is open-ended (None).
A tier's config is `DecodeParams` in wire form plus the config's user `vars`
(`{"vars": {"K": 3}}`), as a sweep's configs carry them.

Engines take a schedule in their own terms, only where the varied knob is the
number of speculative tokens (`token_count`, the one place that links a config
to that number: the method's knob, `ddtune.methods.drafted_tokens`, else a var): vLLM's `num_speculative_tokens_per_batch_size` (inclusive
batch-size ranges `[start, end, K]`, K = 0 for no drafting, K capped at
`num_speculative_tokens`, vLLM >= 0.32) and SGLang's `--speculative-adaptive`
config (candidate steps per batch-size tier, keyed by the tier's smallest batch
size; EAGLE/EAGLE3 with topk 1 only). `ddtune serve --schedule FILE` takes any
schedule (`ddtune.server.state`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ddtune.errors import UserError
from ddtune.methods import drafted_tokens, tied_knobs
from ddtune.params import DecodeParams

# user vars that hold the number of speculative tokens, by engine spelling
TOKEN_COUNT_VARS = ("K", "num_speculative_tokens", "steps", "speculative_num_steps")
METHOD_VARS = ("algorithm", "speculative_algorithm")  # `method` is the config's own field
TOPK_VARS = ("eagle_topk", "speculative_eagle_topk")  # SGLang EAGLE's topk (unset: SGLang's)
OPEN_END = 1 << 16  # the end of vLLM's last range: any batch size vLLM can run


@dataclass(frozen=True)
class Tier:
    """The config to run while at most `max_concurrency` requests are in flight."""

    max_concurrency: int | None  # None = open-ended (the last tier)
    params: DecodeParams
    vars: Mapping[str, Any] = field(default_factory=dict)

    def config_wire(self) -> dict[str, Any]:
        return {**self.params.to_wire(), **({"vars": dict(self.vars)} if self.vars else {})}

    def label(self) -> str:
        extra = "".join(f" {k}={v}" for k, v in sorted(self.vars.items()))
        return self.params.label() + extra


@dataclass(frozen=True)
class Schedule:
    tiers: tuple[Tier, ...]

    def __post_init__(self) -> None:
        _check_tiers(self.tiers)

    @classmethod
    def single(cls, params: DecodeParams, user_vars: Mapping[str, Any] | None = None) -> Schedule:
        return cls((Tier(None, params, dict(user_vars or {})),))

    @property
    def is_single(self) -> bool:
        return len(self.tiers) == 1

    def pick(self, active: int) -> Tier:
        """The tier for `active` requests in flight (the request being admitted included)."""
        for tier in self.tiers:
            if tier.max_concurrency is None or active <= tier.max_concurrency:
                return tier
        return self.tiers[-1]

    def ranges(self) -> list[tuple[int, int | None, Tier]]:
        """`(first, last, tier)` concurrency ranges, inclusive; last None = open-ended."""
        out, start = [], 1
        for tier in self.tiers:
            out.append((start, tier.max_concurrency, tier))
            start = (tier.max_concurrency or start) + 1
        return out

    def to_wire(self) -> list[dict[str, Any]]:
        return [
            {"max_concurrency": t.max_concurrency, "config": t.config_wire()} for t in self.tiers
        ]

    @classmethod
    def from_wire(cls, data: Any, where: str = "schedule") -> Schedule:
        """Strict: a list of `{"max_concurrency": n | null, "config": {...}}` (`UserError`)."""
        if not isinstance(data, list) or not data:
            raise UserError(f"{where} must be a non-empty list of {{max_concurrency, config}}")
        return cls(tuple(_tier(item, f"{where}[{i}]") for i, item in enumerate(data)))

    def describe(self) -> str:
        """'ddtree b16 k4 wnone for 1-2 concurrent requests, ar for 3 and more'."""
        if self.is_single:
            return f"{self.tiers[0].label()} at every concurrency"
        parts = []
        for first, last, tier in self.ranges():
            parts.append(f"{tier.label()} for {span(first, last)}")
        return parts[0] + " concurrent requests, " + ", ".join(parts[1:])


def span(first: int, last: int | None) -> str:
    """'1', '2-7' or '8 and more' (concurrent requests)."""
    if last is None:
        return f"{first} and more"
    return f"{first}-{last}" if last > first else str(first)


def read_schedule(path: Path) -> Schedule:
    """A schedule file: the list, `{"schedule": [...]}`, or a report's results.json."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UserError(f"schedule file not found: {path}") from None
    except (OSError, ValueError) as exc:
        raise UserError(f"schedule file {path} is not readable JSON: {exc}") from None
    if isinstance(data, dict) and isinstance(data.get("report"), dict):
        data = data["report"]
    if isinstance(data, dict) and "schedule" in data:
        data = data["schedule"]
    if data is None:
        raise UserError(f"{path} holds no schedule (the report measured no load levels)")
    return Schedule.from_wire(data, where=str(path))


def token_count(tier: Tier) -> int | None:
    """The number of speculative tokens a tier's config drafts: its method's knob first
    (`ddtune.methods.drafted_tokens`: vLLM's num_speculative_tokens, SGLang's num_steps),
    else its token-count var (`TOKEN_COUNT_VARS`), else 0 for mode ar; None when a drafting
    config names none."""
    if tier.params.method is not None:
        count = drafted_tokens(tier.params.method_config())
        if count is not None:
            return count
    for name in TOKEN_COUNT_VARS:
        value = tier.vars.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return 0 if tier.params.mode == "ar" else None


def _shared_params(tier: Tier) -> DecodeParams:
    """The tier's parameters without the method knobs that follow the token count."""
    if tier.params.method is None:
        return tier.params
    tied = tied_knobs(tier.params.method_config())
    knobs = tuple((k, v) for k, v in tier.params.method_knobs if k not in tied)
    return replace(tier.params, method_knobs=knobs)


@dataclass(frozen=True)
class EngineSchedule:
    """How one engine takes a schedule: `fields` to merge into the speculative config of
    `base` (the drafting tier's config), or None and `reason` why the engine cannot."""

    fields: dict[str, Any] | None
    base: Tier | None  # the drafting tier whose launch command the fields extend
    reason: str | None = None


def vllm_schedule(schedule: Schedule) -> EngineSchedule:
    """`num_speculative_tokens` (the largest K) and `num_speculative_tokens_per_batch_size`."""
    base, why = _token_tiers(schedule)
    if base is None:
        return EngineSchedule(None, None, why)
    counts = [token_count(t) or 0 for t in schedule.tiers]
    ranges = [
        [first, last or max(first, OPEN_END), k]
        for (first, last, _), k in zip(schedule.ranges(), counts, strict=True)
    ]
    fields = {
        "num_speculative_tokens": max(counts),
        "num_speculative_tokens_per_batch_size": ranges,
    }
    return EngineSchedule(fields, base)


def sglang_adaptive(schedule: Schedule) -> EngineSchedule:
    """`--speculative-adaptive-config` JSON: per tier (keyed by its smallest batch size) the
    measured step count as the only candidate, so SGLang's EMA cannot move away from it."""
    base, why = _token_tiers(schedule)
    if base is None:
        return EngineSchedule(None, None, why)
    method = _method(base)
    if method not in ("eagle", "eagle3"):
        return EngineSchedule(
            None,
            None,
            f"SGLang adapts only EAGLE/EAGLE3 (this config: {method or base.params.mode})",
        )
    if _topk(base) != 1:
        return EngineSchedule(None, None, "SGLang adapts EAGLE only with topk 1")
    config = {
        str(first): {"candidate_steps": [token_count(t) or 0]} for first, _, t in schedule.ranges()
    }
    return EngineSchedule(
        {"speculative_adaptive": True, "speculative_adaptive_config": config}, base
    )


def _token_tiers(schedule: Schedule) -> tuple[Tier | None, str]:
    """The one drafting config the tiers share but for the token count, or why there is none.

    Tiers that draft no tokens become K = 0. Variables holding the engine's speculative
    settings as text (e.g. a `--speculative-config=...` argument) are left to the launch
    command's own check (`ddtune.services.scheduled`)."""
    if schedule.is_single:
        return None, "the schedule has one config: nothing to switch"
    missing = [t.label() for t in schedule.tiers if token_count(t) is None]
    if missing:
        names = "/".join(TOKEN_COUNT_VARS)
        why = (
            f"{missing[0]} names no token count (a method's num_steps/block_size or a var {names})"
        )
        return None, why + ": the varied knob is not the token count"
    drafting = [t for t in schedule.tiers if token_count(t)]
    if not drafting:
        return None, "no tier drafts"
    base = max(drafting, key=lambda t: token_count(t) or 0)  # the engine's largest K
    for tier in drafting:
        same = _shared_params(tier) == _shared_params(base) and _shared(tier) == _shared(base)
        if not same:
            return None, f"{base.label()} and {tier.label()} differ in more than the token count"
    return base, ""


def _shared(tier: Tier) -> dict[str, Any]:
    """The vars that must agree between tiers: not the token count, not speculative text."""
    return {
        k: v
        for k, v in tier.vars.items()
        if k not in TOKEN_COUNT_VARS and not (isinstance(v, str) and "speculative" in v)
    }


def _method(tier: Tier) -> str | None:
    """The method the tier's config names (`DecodeParams.method`), else a method var."""
    if tier.params.method is not None:
        return tier.params.method
    for name in METHOD_VARS:
        value = tier.vars.get(name)
        if isinstance(value, str):
            return value.lower()
    return None


def _topk(tier: Tier) -> Any:
    """SGLang EAGLE's topk: the method's knob, else a topk var (unset: 1, SGLang's)."""
    knob = tier.params.method_config().get("topk") if tier.params.method else None
    if knob is not None:
        return knob
    return next((tier.vars[n] for n in TOPK_VARS if n in tier.vars), 1)


def _tier(item: Any, where: str) -> Tier:
    if not isinstance(item, Mapping) or set(item) != {"max_concurrency", "config"}:
        raise UserError(f'{where} must be {{"max_concurrency": n or null, "config": {{...}}}}')
    limit, config = item["max_concurrency"], item["config"]
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise UserError(
            f"{where}.max_concurrency must be a whole number >= 1 or null; got {limit!r}"
        )
    if not isinstance(config, Mapping):
        raise UserError(f"{where}.config must be a table of mode/budget/topk/window (and vars)")
    user_vars = config.get("vars", {})
    if not isinstance(user_vars, Mapping):
        raise UserError(f"{where}.config.vars must be a table")
    params = DecodeParams.from_wire(
        {k: v for k, v in config.items() if k != "vars"}, f"{where}.config"
    )
    return Tier(limit, params, dict(user_vars))


def _check_tiers(tiers: Sequence[Tier]) -> None:
    if not tiers:
        raise UserError("a schedule needs at least one tier")
    if tiers[-1].max_concurrency is not None:
        raise UserError("the last tier of a schedule must be open-ended (max_concurrency null)")
    limits = [t.max_concurrency for t in tiers[:-1]]
    if any(n is None for n in limits):
        raise UserError("only the last tier of a schedule may be open-ended (max_concurrency null)")
    ints = [n for n in limits if n is not None]
    if any(b <= a for a, b in zip(ints, ints[1:], strict=False)):
        raise UserError(f"schedule tiers must ascend by max_concurrency; got {ints}")


__all__ = [
    "EngineSchedule",
    "Schedule",
    "Tier",
    "read_schedule",
    "span",
    "sglang_adaptive",
    "token_count",
    "vllm_schedule",
]
