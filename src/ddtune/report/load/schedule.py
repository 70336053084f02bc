"""The schedule: for each range of concurrent requests the config to run, and what it gains.

    found = load_schedule_report(load, configs, options)   # None without closed-loop levels
    found.schedule        # ddtune.engines.schedule.Schedule: `report.schedule` in results.json
    found.gain            # schedule / best single config on the load mix, paired by pass
    found.text            # the sentence the report prints

Per closed-loop level (cN) the config is that level's recommendation
(`recommend.py`; a leaning where the level is inconclusive). A level's config
runs from its concurrency up to one below the next measured level; the first
also covers concurrencies below it, the last is open-ended. Open-loop levels
(a request rate, no concurrency) are left out.

The gain: per pass, the schedule's score is the weighted sum over the levels of
its config's objective value relative to the best mean at that level (as the
load mix, `recommend.py`), and so is each single config's; the best single
config is the one with the highest mean score. The gain is their ratio, paired
over the passes where every config measured every weighted level (Welch
without blocks), with its interval. Weights: `report.load_weights` (the
user's mix), else every closed level alike (said as such). A switch is worth
it only when the configs differ between levels, the interval of the gain
excludes 1 and the gain is at least `report.schedule_min_gain`; otherwise the
schedule is the best single config alone, said as such.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from ddtune.engines.schedule import Schedule, Tier, sglang_adaptive, vllm_schedule
from ddtune.report.load.figures import LoadReport
from ddtune.report.load.per_level import objective
from ddtune.report.options import ReportOptions
from ddtune.report.recommend import blocked_options
from ddtune.report.summarize import ConfigSummary
from ddtune.stats.blocked import compare
from ddtune.stats.intervals import RatioInterval

Scores = dict[int, float]  # pass -> score


@dataclass
class ScheduleReport:
    schedule: Schedule
    picks: dict[str, str]  # closed level -> the config it runs
    weights: dict[str, float]
    best_single: str | None
    typical: str  # the level of the highest weight
    gain: RatioInterval | None  # schedule / best single on the mix
    switched: bool  # the schedule has more than one config
    text: str
    engines: list[str] = field(default_factory=list)  # how vLLM / SGLang / ddtune take it
    notes: list[str] = field(default_factory=list)

    def to_wire(self) -> dict[str, object]:
        """The gain and the choices beside `report.schedule` in results.json."""
        gain = self.gain
        return {
            "picks": self.picks,
            "weights": self.weights,
            "best_single": self.best_single,
            "typical_level": self.typical,
            "switched": self.switched,
            "gain": None if gain is None else gain.ratio,
            "gain_low": None if gain is None else gain.low,
            "gain_high": None if gain is None else gain.high,
            "gain_method": None if gain is None else gain.method,
            "gain_passes": None if gain is None else gain.n,
            "text": self.text,
            "engines": self.engines,
            "notes": self.notes,
        }


def load_schedule_report(
    load: LoadReport, configs: Sequence[ConfigSummary], options: ReportOptions
) -> ScheduleReport | None:
    """The schedule over the closed-loop levels (None when none has a recommendation)."""
    picks = {
        r.level: r.label
        for r in load.recommendations
        if r.level.startswith("c") and r.label is not None
    }
    if not picks:
        return None
    notes: list[str] = []
    weights = _weights(picks, options, notes)
    relative = _relative(load, weights)
    singles = _single_scores(relative, weights)
    scheduled = _scores(relative, weights, lambda level: picks[level])
    best = max(singles, key=lambda k: sum(singles[k].values()) / len(singles[k]), default=None)
    gain = None
    if best is not None and scheduled and singles[best]:
        gain = compare(scheduled, singles[best], replace(blocked_options(options), maximize=True))
    typical = max(weights, key=lambda lv: weights[lv])
    by_label = {c.label: c for c in configs}
    worth = _worth_it(picks, gain, options.schedule_min_gain)
    single = best if best is not None else picks[typical]
    tiers = _tiers(picks, by_label) if worth else [_tier(None, single, by_label)]
    schedule = Schedule(tuple(tiers))
    text = _text(
        schedule,
        gain,
        worth,
        single,
        weights,
        options.schedule_min_gain,
        len(set(picks.values())) > 1,
    )
    found = ScheduleReport(schedule, picks, weights, best, typical, gain, worth, text, notes=notes)
    found.engines = engine_lines(schedule, picks[typical], typical, by_label)
    return found


def engine_lines(
    schedule: Schedule, typical_label: str, typical: str, by_label: dict[str, ConfigSummary]
) -> list[str]:
    """How each engine takes the schedule, or the single config it runs instead."""
    lines = [
        "ddtune serve: `--schedule results.json` (switches per request by the requests in flight)."
    ]
    fallback = f"run {typical_label}, the best config at {typical} (the typical concurrency)"
    for engine, rendered in (
        ("vLLM", vllm_schedule(schedule)),
        ("SGLang", sglang_adaptive(schedule)),
    ):
        if rendered.fields is not None and rendered.base is not None:
            fields = ", ".join(f"{k}={v}" for k, v in rendered.fields.items())
            lines.append(f"{engine}: {rendered.base.label()} with {fields}.")
        elif not schedule.is_single:
            lines.append(f"{engine} cannot take this schedule ({rendered.reason}): {fallback}.")
    return lines


def _weights(picks: dict[str, str], options: ReportOptions, notes: list[str]) -> dict[str, float]:
    given = {k: w for k, w in (options.load_weights or {}).items() if k in picks and w > 0}
    if given:
        return given
    notes.append(
        "the schedule's gain weighs every closed-loop level alike; set report.load_weights "
        "(e.g. {c1 = 0.2, c16 = 0.8}) for your load mix"
    )
    return dict.fromkeys(picks, 1.0)


def _relative(load: LoadReport, weights: dict[str, float]) -> dict[str, dict[str, Scores]]:
    """level -> label -> pass -> objective value over the level's best mean (higher is better)."""
    out: dict[str, dict[str, Scores]] = {}
    for level in weights:
        metric, higher, _ = objective(load, level)
        values = {f.label: f.by_pass.get(metric, {}) for f in load.at(level)}
        means = [sum(v.values()) / len(v) for v in values.values() if v]
        if not means:
            continue
        top = max(means) if higher else min(means)
        out[level] = {
            k: {p: (x / top if higher else top / x) for p, x in v.items()}
            for k, v in values.items()
            if v
        }
    return out


def _scores(
    relative: dict[str, dict[str, Scores]], weights: dict[str, float], pick: Callable[[str], str]
) -> Scores:
    """Per pass: the weighted mean of the picked config's relative value at each level."""
    levels = [lv for lv in weights if lv in relative]
    if len(levels) < len(weights) or any(pick(lv) not in relative[lv] for lv in levels):
        return {}
    passes = set.intersection(*(set(relative[lv][pick(lv)]) for lv in levels))
    total = sum(weights[lv] for lv in levels)
    return {
        p: sum(weights[lv] * relative[lv][pick(lv)][p] for lv in levels) / total
        for p in sorted(passes)
    }


def _single_scores(
    relative: dict[str, dict[str, Scores]], weights: dict[str, float]
) -> dict[str, Scores]:
    labels = sorted({label for per in relative.values() for label in per})
    found = {label: _scores(relative, weights, _always(label)) for label in labels}
    return {k: v for k, v in found.items() if v}


def _always(label: str) -> Callable[[str], str]:
    return lambda _level: label


def _worth_it(picks: dict[str, str], gain: RatioInterval | None, threshold: float) -> bool:
    if len(set(picks.values())) < 2 or gain is None or gain.low is None:
        return False
    return gain.low > 1.0 and gain.ratio >= 1.0 + threshold


def _tiers(picks: dict[str, str], by_label: dict[str, ConfigSummary]) -> list[Tier]:
    """Level configs as tiers: each runs up to one below the next level; equal neighbours merge."""
    levels = sorted(picks, key=lambda lv: int(lv[1:]))
    tiers: list[Tier] = []
    for i, level in enumerate(levels):
        last = None if i == len(levels) - 1 else int(levels[i + 1][1:]) - 1
        if (
            tiers
            and tiers[-1].params == by_label[picks[level]].params
            and tiers[-1].vars == by_label[picks[level]].vars
        ):
            tiers[-1] = replace(tiers[-1], max_concurrency=last)
            continue
        tiers.append(_tier(last, picks[level], by_label))
    return tiers


def _tier(limit: int | None, label: str, by_label: dict[str, ConfigSummary]) -> Tier:
    config = by_label[label]
    return Tier(limit, config.params, dict(config.vars))


def _text(
    schedule: Schedule,
    gain: RatioInterval | None,
    worth: bool,
    single: str,
    weights: dict[str, float],
    threshold: float,
    differs: bool,
) -> str:
    mix = ", ".join(f"{k} {w:g}" for k, w in weights.items())
    how = _gain_words(gain)
    if worth:
        return f"Schedule: {schedule.describe()}; {how} over {single}, the best single config on the load mix ({mix})."
    if not differs:
        return f"One config: {single} is recommended at every measured concurrency, so there is nothing to switch."
    why = (
        "the gain could not be estimated (fewer than two passes in common)"
        if gain is None or gain.low is None
        else "the gain's interval includes 1"
        if gain.low <= 1.0
        else f"the gain is below {threshold:.0%} (report.schedule_min_gain)"
    )
    return f"One config: {single}. A schedule would switch configs by concurrency, but {why}: {how} on the load mix ({mix})."


def _gain_words(gain: RatioInterval | None) -> str:
    if gain is None:
        return "gain not measured"
    if gain.low is None or gain.high is None:
        return f"gain {gain.ratio:.3f}x (n={gain.n}, no interval)"
    return (
        f"gain {gain.ratio:.3f}x [{gain.low:.3f}, {gain.high:.3f}] ({gain.method}, {gain.n} passes)"
    )


__all__ = ["ScheduleReport", "engine_lines", "load_schedule_report"]
