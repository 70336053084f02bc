"""The acceptance landscape of a trace: τ over budget × topk per window, and where budget stops paying.

    land = landscape(trace, budgets=(4, 8, 16, 32, 64), topks=(2, 4, 6, 8))
    print(land.text())               # one table per window, DFlash's chain below it
    land.heatmap(Path("tau.png"))    # one panel per window

"Stops paying": per window and topk, the first doubling of the budget that
adds less than `PAYING` (2%) to τ. Whether a budget pays in tok/s also
depends on what a round costs on the service (`costs.py`, `sweep plan`). See
docs/traces.md "Traces".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ddtune.engines import ServerEngine
from ddtune.params import DecodeParams, window_to_wire
from ddtune.report.render.atomic import atomic_path
from ddtune.trace.predict import Trace

PAYING = 0.02  # a doubling of the budget that adds less τ than this has stopped paying
BUDGETS = (4, 8, 16, 32, 64)
TOPKS = (2, 4, 6, 8)


@dataclass
class Landscape:
    windows: list[int | None]
    budgets: list[int]
    topks: list[int]
    tau: dict[tuple[int | None, int, int], float]  # (window, budget, topk) -> τ
    dflash: dict[int | None, float]  # window -> τ of the top-1 chain

    def stops_paying(self, window: int | None, topk: int) -> int | None:
        """The budget after which doubling adds < PAYING to τ (None: it pays to the end)."""
        row = [(b, self.tau[(window, b, topk)]) for b in self.budgets]
        for (b, tau), (_, more) in zip(row, row[1:], strict=False):
            if more < tau * (1 + PAYING):
                return b
        return None

    def best(self, window: int | None) -> tuple[int, int, float]:
        """(budget, topk, τ) of the highest τ for `window` (the smaller budget, topk on ties)."""
        cells = [(b, k) for b in self.budgets for k in self.topks]
        b, k = max(cells, key=lambda c: (self.tau[(window, *c)], -c[0], -c[1]))
        return b, k, self.tau[(window, b, k)]

    def text(self) -> str:
        lines = []
        for w in self.windows:
            lines.append(f"window {window_to_wire(w)}: tau by budget (rows) x topk (columns)")
            lines.append("  budget " + "".join(f"{f'k{k}':>8}" for k in self.topks))
            for b in self.budgets:
                cells = "".join(f"{self.tau[(w, b, k)]:8.2f}" for k in self.topks)
                lines.append(f"  {b:>6} {cells}")
            lines.append(f"  dflash chain: {self.dflash[w]:.2f}")
            b, k, tau = self.best(w)
            lines.append(f"  best: budget {b} topk {k}, tau {tau:.2f}")
            for k in self.topks:
                stop = self.stops_paying(w, k)
                lines.append(
                    f"  topk {k}: "
                    + (
                        f"budget beyond {stop} adds < {PAYING:.0%} tau per doubling"
                        if stop is not None
                        else f"every doubling up to {self.budgets[-1]} adds >= {PAYING:.0%} tau"
                    )
                )
        return "\n".join(lines)

    def heatmap(self, path: Path) -> None:
        """One τ heatmap per window (budget × topk), numbers in the cells; written atomically."""
        from matplotlib.figure import Figure

        figure = Figure(figsize=(1.2 + 3.6 * len(self.windows), 3.6), layout="constrained")
        axes = figure.subplots(1, len(self.windows), squeeze=False)[0]
        top = max(self.tau.values())
        for ax, w in zip(axes, self.windows, strict=True):
            grid = [[self.tau[(w, b, k)] for k in self.topks] for b in self.budgets]
            image = ax.imshow(grid, vmin=1.0, vmax=top, cmap="viridis", aspect="auto")
            for i, row in enumerate(grid):
                for j, tau in enumerate(row):
                    ax.text(j, i, f"{tau:.2f}", ha="center", va="center", fontsize=8, color="w")
            ax.set_xticks(range(len(self.topks)), [str(k) for k in self.topks])
            ax.set_yticks(range(len(self.budgets)), [str(b) for b in self.budgets])
            ax.set_xlabel("topk")
            ax.set_ylabel("budget")
            ax.set_title(f"tau, window {window_to_wire(w)} (dflash {self.dflash[w]:.2f})")
        figure.colorbar(image, ax=axes.tolist(), label="acceptance length")
        with atomic_path(path) as tmp:
            figure.savefig(tmp, dpi=100, format="png")


def landscape(
    trace: Trace,
    budgets: Sequence[int] = BUDGETS,
    topks: Sequence[int] = TOPKS,
    engine: ServerEngine | None = None,
) -> Landscape:
    """τ of every (window, budget, topk) the trace holds (the engine's counting when given)."""
    windows = trace.header.window_values()

    def tau(params: DecodeParams) -> float:
        prediction = trace.predict(params, engine)
        counted = prediction.acceptance(engine) if engine is not None else None
        return counted if counted is not None else prediction.mean_acceptance_length()

    cells = {
        (w, b, k): tau(DecodeParams("ddtree", b, k, w))
        for w in windows
        for b in budgets
        for k in topks
    }
    chains = {w: tau(DecodeParams("dflash", 0, 1, w)) for w in windows}
    return Landscape(windows, list(budgets), list(topks), cells, chains)


__all__ = ["BUDGETS", "PAYING", "TOPKS", "Landscape", "landscape"]
