"""Restart-bound measurements: config effects under a start effect, bench noise and drift in time.

When every config change is a server restart, configs cannot take turns by
request, and a pass over all of them takes hours. What blocking cannot
remove is modelled instead (docs/sweeps.md "Restart-bound races"):

    log y[bench b of start s of config c] = effect[c] + drift(t_s) + start[s] + noise[b]

    noise  ~ N(0, bench_var)  inside one start: pooled over every start with 2+ benches
    start  ~ N(0, start_var)  one server start's own level: a random effect pooled over configs
    drift  Brownian motion in hours (drift_var per hour), shared by every config

1. `within_variance`: bench_var from the spread inside starts, moderated by a prior.
2. `estimate_components`: start_var and drift_var by restricted maximum
   likelihood on the start means of configs with 2+ starts (the mode under
   scaled-inverse-chi-square priors: the stated prior holds until second
   starts say otherwise).
   `fit_effects`: the config effects by generalised least squares under those
   components, with their covariance.
3. `MixedFit.contrast(a, b)`: the log ratio a/b as a `RatioInterval` (se, df),
   the input of Holm, TOST and the verdict.
4. `benches_per_start`: how many benches one start is worth (two-stage sampling:
   sqrt(start cost / bench cost x bench_var / start_var)).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from scipy import linalg, optimize

from ddtune.stats.intervals import RatioInterval, ratio_interval


@dataclass(frozen=True)
class VariancePrior:
    """A stated guess of a log-sd, worth `df` degrees of freedom of data (inf: fixed)."""

    sd: float
    df: float


@dataclass(frozen=True)
class Priors:
    """The stated guesses before the data: per bench, per start, drift per hour (log-sd)."""

    bench: VariancePrior
    start: VariancePrior
    drift: VariancePrior


@dataclass(frozen=True)
class Component:
    var: float
    df: float  # prior df + data df

    @property
    def sd(self) -> float:
        return math.sqrt(self.var)


@dataclass(frozen=True)
class StartMean:
    """One server start: the mean log value of its `benches` benches, at `hours`."""

    label: str
    log_mean: float
    benches: int
    hours: float


@dataclass(frozen=True)
class Components:
    bench: Component  # per bench, inside one start
    start: Component  # between starts of one config at the same moment
    drift: Component  # per hour of the random walk shared by every config


@dataclass(frozen=True)
class MixedFit:
    labels: tuple[str, ...]
    effects: np.ndarray  # log scale; only differences carry meaning
    cov: np.ndarray
    components: Components

    def effect(self, label: str) -> float:
        return float(self.effects[self.labels.index(label)])

    def contrast(self, a: str, b: str, confidence: float = 0.95) -> RatioInterval:
        """a / b with the GLS standard error and the start variance's degrees of freedom."""
        i, j = self.labels.index(a), self.labels.index(b)
        var = self.cov[i, i] + self.cov[j, j] - 2 * self.cov[i, j]
        se = math.sqrt(max(float(var), 0.0))
        estimate = float(self.effects[i] - self.effects[j])
        return ratio_interval("mixed", estimate, se, self.components.start.df, 1, confidence)


def start_means(
    starts: Iterable[tuple[str, Sequence[tuple[float, float]]]],
) -> tuple[list[StartMean], list[list[float]]]:
    """Each start (its config's label, its benches as (log value, hours)) as a `StartMean`,
    and each start's log values (what `estimate_components` reads); empty starts skipped."""
    means, logs = [], []
    for label, benches in starts:
        if benches:
            values = [v for v, _ in benches]
            hours = math.fsum(h for _, h in benches) / len(benches)
            means.append(StartMean(label, math.fsum(values) / len(values), len(values), hours))
            logs.append(values)
    return means, logs


def decision_chance(
    estimate: float, se: float, se_then: float, margin: float, alpha: float
) -> float:
    """The chance that a log ratio measured at `estimate` (`se`) is separated from 0 (two-sided,
    `alpha`) or proven inside +-`margin` (TOST) once more data bring its se to `se_then`, if
    `estimate` is the truth (conditional power: the data so far are kept, and the estimate
    then varies only by what is added, sd `se_then * sqrt(1 - se_then**2 / se**2)`)."""
    unit, gap = NormalDist(), abs(estimate)
    sd = se_then * math.sqrt(max(0.0, 1 - (se_then / se) ** 2))
    separate_at = unit.inv_cdf(1 - alpha / 2) * se_then
    equal_below = margin - unit.inv_cdf(1 - alpha) * se_then
    if sd == 0:
        return float(gap > separate_at or gap < equal_below)
    separate = unit.cdf((gap - separate_at) / sd) + unit.cdf((-gap - separate_at) / sd)
    equal = 0.0
    if equal_below > 0:
        equal = unit.cdf((equal_below - gap) / sd) - unit.cdf((-equal_below - gap) / sd)
    return separate + equal


def within_variance(groups: Sequence[Sequence[float]], prior: VariancePrior) -> Component:
    """Pooled variance of log values inside their group (start), moderated by `prior`."""
    ss, df = 0.0, 0
    for group in groups:
        if len(group) >= 2:
            mean = math.fsum(group) / len(group)
            ss += math.fsum((v - mean) ** 2 for v in group)
            df += len(group) - 1
    return Component((prior.df * prior.sd**2 + ss) / (prior.df + df), prior.df + df)


def estimate_components(
    starts: Sequence[StartMean],
    groups: Sequence[Sequence[float]],
    priors: Priors,
) -> Components:
    """bench_var from `groups` (log values per start); start_var and drift_var from the
    configs with 2+ starts (REML), each moderated by its prior."""
    bench = within_variance(groups, priors.bench)
    counts: dict[str, int] = {}
    for s in starts:
        counts[s.label] = counts.get(s.label, 0) + 1
    repeated = [s for s in starts if counts[s.label] >= 2]
    start, drift = _start_and_drift(repeated, bench.var, priors.start, priors.drift)
    return Components(bench, start, drift)


def fit_effects(starts: Sequence[StartMean], components: Components) -> MixedFit:
    """Every config's effect by GLS under `components`, with the covariance of the effects."""
    labels, effects, cov = _gls(
        starts, components.bench.var, components.start.var, components.drift.var
    )
    return MixedFit(labels, effects, cov, components)


def benches_per_start(components: Components, start_s: float, bench_s: float, most: int) -> int:
    """The benches that minimise cost per unit of information about a config (1..most)."""
    if bench_s <= 0 or components.start.var <= 0:
        return most
    ideal = math.sqrt(start_s / bench_s * components.bench.var / components.start.var)
    return max(1, min(most, math.floor(ideal + 0.5)))


def _start_and_drift(
    repeated: Sequence[StartMean],
    bench_var: float,
    start_prior: VariancePrior,
    drift_prior: VariancePrior,
) -> tuple[Component, Component]:
    """(start, drift) variance: the priors' modes, moved by the repeated configs' REML."""
    labels = sorted({s.label for s in repeated})
    residual_df = len(repeated) - len(labels)
    if residual_df <= 0:
        return (
            Component(start_prior.sd**2, start_prior.df),
            Component(drift_prior.sd**2, drift_prior.df),
        )
    y, x, noise, kernel = _design(repeated, bench_var)
    priors = (start_prior, drift_prior)
    axes = _axes(priors, max(float(kernel.max()), 1e-6))
    free = [i for i, axis in enumerate(axes) if len(axis) > 1]

    def full(theta: np.ndarray) -> np.ndarray:
        values = [float(axis[0]) for axis in axes]
        for i, value in zip(free, theta, strict=True):
            values[i] = float(value)
        return np.array(values)

    def objective(theta: np.ndarray) -> float:
        return _objective(full(theta), y, x, noise, kernel, priors)

    grid = [np.array(point) for point in itertools.product(*(axes[i] for i in free))]
    x0 = min(grid, key=objective)  # a coarse grid first: the drift's scale varies a lot
    bounds = [_BOUNDS[i] for i in free]
    theta = optimize.minimize(
        objective, x0, method="Nelder-Mead", bounds=bounds, options=_SIMPLEX
    ).x
    start_var, drift_var = (float(math.exp(v)) for v in full(theta))
    return (
        Component(start_var, start_prior.df + residual_df),
        Component(drift_var, drift_prior.df + residual_df),
    )


def _axes(priors: tuple[VariancePrior, VariancePrior], span: float) -> list[np.ndarray]:
    """Starting log variances per component: a grid, or the one value of a fixed prior
    (df = inf). The drift's grid is scaled to `span`, the hours its data cover."""
    grids = (
        np.linspace(math.log(1e-6), math.log(0.04), 7),
        np.linspace(math.log(1e-7), 0.0, 8) - math.log(span),
    )
    return [
        np.array([2 * math.log(p.sd)]) if math.isinf(p.df) else grid
        for p, grid in zip(priors, grids, strict=True)
    ]


_BOUNDS = [(-20.0, 0.0), (-20.0, 12.0)]  # log start var, log drift var per hour
_SIMPLEX = {"xatol": 0.02, "fatol": 1e-6}  # log-variance steps of 2%: far below what decides


def _objective(
    theta: np.ndarray,
    y: np.ndarray,
    x: np.ndarray,
    noise: np.ndarray,
    kernel: np.ndarray,
    priors: tuple[VariancePrior, VariancePrior],
) -> float:
    """Negative restricted log likelihood plus the priors (scaled inverse chi-square, log scale)."""
    log_start, log_drift = float(theta[0]), float(theta[1])
    v = np.diag(noise + math.exp(log_start)) + math.exp(log_drift) * kernel
    try:
        factor = linalg.cho_factor(v, lower=True)
    except linalg.LinAlgError:
        return 1e12
    vi_x, vi_y = linalg.cho_solve(factor, x), linalg.cho_solve(factor, y)
    info = x.T @ vi_x
    beta = np.linalg.solve(info, x.T @ vi_y)
    residual = y - x @ beta
    quad = float(residual @ linalg.cho_solve(factor, residual))
    logdet = 2 * float(np.sum(np.log(np.diag(factor[0])))) + float(np.linalg.slogdet(info)[1])
    penalty = sum(
        p.df / 2 * (t + p.sd**2 / math.exp(t))
        for p, t in zip(priors, (log_start, log_drift), strict=True)
        if math.isfinite(p.df)  # a fixed component (df = inf) is not estimated
    )
    return 0.5 * (logdet + quad) + penalty


def _design(
    starts: Sequence[StartMean], bench_var: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(y, config indicator X, per-start bench noise variance, Brownian kernel in hours)."""
    labels = list(dict.fromkeys(s.label for s in starts))
    y = np.array([s.log_mean for s in starts])
    x = np.zeros((len(starts), len(labels)))
    for row, s in enumerate(starts):
        x[row, labels.index(s.label)] = 1.0
    noise = np.array([bench_var / max(s.benches, 1) for s in starts])
    t = np.array([s.hours for s in starts])
    t = t - t.min()
    kernel = np.minimum.outer(t, t)
    return y, x, noise, kernel


def _gls(
    starts: Sequence[StartMean], bench_var: float, start_var: float, drift_var: float
) -> tuple[tuple[str, ...], np.ndarray, np.ndarray]:
    """Config effects and their covariance: (X' V^-1 X)^-1 X' V^-1 y."""
    labels = tuple(dict.fromkeys(s.label for s in starts))
    y, x, noise, kernel = _design(starts, bench_var)
    v = np.diag(noise + start_var) + drift_var * kernel
    factor = linalg.cho_factor(v, lower=True)
    info = x.T @ linalg.cho_solve(factor, x)
    cov = np.linalg.inv(info)
    effects = cov @ (x.T @ linalg.cho_solve(factor, y))
    return labels, effects, cov


__all__ = [
    "Component",
    "Components",
    "MixedFit",
    "StartMean",
    "VariancePrior",
    "Priors",
    "benches_per_start",
    "decision_chance",
    "estimate_components",
    "fit_effects",
    "start_means",
    "within_variance",
]
