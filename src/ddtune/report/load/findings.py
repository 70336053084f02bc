"""What the load levels show across levels: the AR/DFlash/DDTree crossover
sentences and whether the server serialised requests.

Crossover: for DFlash and DDTree, the config of that mode with the best output
tok/s at the lowest concurrency, against the AR baseline (and DDTree against
DFlash), level by level: "ddtree b16 k4 wnone beats ar up to concurrency 4;
from concurrency 16 ar is faster (1.80x at 1, 1.21x at 4, 0.93x at 16)". A
level where the interval of the ratio (paired by pass, `stats/blocked.py`)
includes 1 is marked "not separated" (and one with a single repeat "n=1").

Serialisation: a level where the config streamed one request at a time while
several were in flight (`ddtune.bench.load.latency.generating_at_once`, in at least
half of its repeats) means the server queues requests; the report says so,
with the aggregate tok/s and e2e growth between the lowest and highest
concurrency, instead of presenting queueing as a property of the config.
See docs/report.md "How the report is built".
"""

from __future__ import annotations

from collections.abc import Sequence

from ddtune.report.load.figures import LevelFigures, LoadReport
from ddtune.report.summarize import ConfigSummary
from ddtune.stats.blocked import BlockedOptions, compare

SPECULATIVE = ("dflash", "ddtree")


def crossovers(
    report: LoadReport, configs: Sequence[ConfigSummary], options: BlockedOptions
) -> list[str]:
    """One sentence per (best config of a speculative mode, its reference) over closed levels."""
    closed = [lv for lv in report.levels if lv.startswith("c")]
    if len(closed) < 2:
        return []
    ar = next((c for c in configs if c.is_baseline and c.params.mode == "ar"), None)
    ar = ar or next((c for c in configs if c.params.mode == "ar"), None)
    best = {mode: _best_of_mode(report, configs, mode, closed[0]) for mode in SPECULATIVE}
    pairs = [(best[m], ar.label) for m in SPECULATIVE if best[m] and ar is not None]
    if best["ddtree"] and best["dflash"]:
        pairs.append((best["ddtree"], best["dflash"]))
    sentences = []
    for label, reference in pairs:
        sentence = crossover_sentence(report, label or "", reference, closed, options)
        if sentence:
            sentences.append(sentence)
    return sentences


def crossover_sentence(
    report: LoadReport, label: str, reference: str, levels: list[str], options: BlockedOptions
) -> str | None:
    """`label` against `reference` in output tok/s at each level where both were measured."""
    points = []
    for level in levels:
        a, b = report.figure(label, level), report.figure(reference, level)
        if (
            a is None
            or b is None
            or not a.samples.get("output_tps")
            or not b.samples.get("output_tps")
        ):
            continue
        ratio = (a.mean("output_tps") or 0.0) / (b.mean("output_tps") or 1.0)
        points.append((level[1:], ratio, _separation(a, b, options)))
    if len(points) < 2:
        return None
    ratios = ", ".join(f"{r:.2f}x at {n}{note}" for n, r, note in points)
    wins = [r > 1 for _, r, _ in points]
    if all(wins):
        return f"{label} beats {reference} at every measured concurrency (up to {points[-1][0]}): {ratios}."
    if not wins[0]:
        later = next((n for (n, _, _), w in zip(points, wins, strict=True) if w), None)
        tail = f"; it does from concurrency {later}" if later else ""
        return (
            f"{label} does not beat {reference} even at concurrency {points[0][0]}{tail}: {ratios}."
        )
    last = wins.index(False)
    return (
        f"{label} beats {reference} up to concurrency {points[last - 1][0]}; from concurrency "
        f"{points[last][0]} {reference} is faster: {ratios}."
    )


def serialisation(report: LoadReport) -> list[str]:
    """Sentences for configs whose server streamed one request at a time under load."""
    serial: dict[str, list[str]] = {}
    for fig in report.figures:
        if fig.is_serialised:
            serial.setdefault(fig.label, []).append(fig.level)
    if not serial:
        return []
    loaded = {f.label for f in report.figures if _several_in_flight(f)}
    evidence = _scaling(report, next(iter(serial)))
    why = (
        "latency that grows with load is queueing in the server (e.g. `ddtune serve --max-batch 1`, "
        "or any server that does not batch), not a property of the decoding config; compare "
        "configs by their single-stream figures."
    )
    if loaded and set(serial) >= loaded:
        levels = sorted({lv for lvs in serial.values() for lv in lvs}, key=report.levels.index)
        return [
            f"The server serialises requests: at {', '.join(levels)} every config streamed one "
            f"request at a time while others waited{evidence}. So {why}"
        ]
    return [
        f"{label}: the server serialised requests at {', '.join(levels)}{_scaling(report, label)}; {why}"
        for label, levels in serial.items()
    ]


def _several_in_flight(fig: LevelFigures) -> bool:
    return (fig.concurrency or 0) > 1 or fig.rate is not None


def _scaling(report: LoadReport, label: str) -> str:
    """' (aggregate tok/s 1.02x from c1 to c16 while mean e2e latency grew 15.3x, label)'."""
    closed = [lv for lv in report.levels if lv.startswith("c") and report.figure(label, lv)]
    if len(closed) < 2:
        return ""
    low, high = report.figure(label, closed[0]), report.figure(label, closed[-1])
    if low is None or high is None:
        return ""
    tps = (low.mean("output_tps"), high.mean("output_tps"))
    e2e = (low.mean("e2e_mean_s"), high.mean("e2e_mean_s"))
    if not tps[0] or not e2e[0] or tps[1] is None or e2e[1] is None:
        return ""
    return (
        f" (aggregate tok/s {tps[1] / tps[0]:.2f}x from {closed[0]} to {closed[-1]} while mean "
        f"e2e latency grew {e2e[1] / e2e[0]:.1f}x, {label})"
    )


def _best_of_mode(
    report: LoadReport, configs: Sequence[ConfigSummary], mode: str, level: str
) -> str | None:
    scored = [
        (fig.mean("output_tps") or 0.0, c.label)
        for c in configs
        if c.params.mode == mode
        and (fig := report.figure(c.label, level))
        and fig.mean("output_tps")
    ]
    return max(scored)[1] if scored else None


def _separation(a: LevelFigures, b: LevelFigures, options: BlockedOptions) -> str:
    """'' when the interval of the ratio (paired by pass, else Welch) excludes 1, else why not."""
    x, y = a.by_pass.get("output_tps", {}), b.by_pass.get("output_tps", {})
    if len(x) < 2 or len(y) < 2:
        return " (n=1)"
    return "" if compare(x, y, options).separated else " (not separated)"


__all__ = ["crossover_sentence", "crossovers", "serialisation"]
