"""What a round costs: seconds per verify round, fitted from measured trials, with its uncertainty.

A trace (or, for n-gram and chains, one run's outputs and counters) fixes each
config's rounds; a measured trial adds what they took. On workload w (short,
long) config c commits R_w(c) tokens a round on average (`Shape.tokens_per_round`,
the decode tokens the bench's tok/s counts) and its bench measured tps_w, so one
round took s_w = R_w(c) / tps_w seconds. One model over both workloads:

    s_w(c) = b_step,w + b_method(c) + v·F(verify tokens) + b_d·D_w(c) + b_s·(draft steps)

b_step,w: one plain target step at workload w's context (what an AR round is);
b_method: the method's own
fixed part of a round (dflash, ddtree: the drafter's forward, the tree, the walk;
ngram: the lookup; chain: EAGLE-style heads), 0 for ar; F(n): what a target
forward over n tokens costs beyond one token. Without probes F(n) = n - 1 and v
is a slope to fit; with probes (`ForwardProbe`: seconds of a forward over n tokens,
measured on the running baseline without a restart, e.g. a request whose prompt
extends a cached prefix by n tokens) F is their interpolation, in seconds, and v ≈ 1
(a tight prior): the measured curve, convex or with a step, not a straight line.
D_w: the positions the drafter attends, in thousands (min(W, L) for a context of
L: `Shape.drafter_positions`; where a shape holds only the share min(W, L) / L, the
share), so one config measured on two workloads of other lengths tells the
drafter's part from the method's; b_s: each sequential drafter step of a chain. Every coefficient is >= 0: more
verify tokens, a wider window or more draft steps never make a round cheaper, so
what the data leave open can only make a config slower than its best case, and a
config whose best case cannot beat the leader is out on that alone.

Fit: weighted least squares on the relative scale (a round's noise is a share
of its time), a weak prior on every coefficient (mean 0, sd: 3 typical rounds
over the most its feature reaches, so no config's round is presumed cheap). A
start's level is shared by its workloads (a server that came up slow is slow on
both): each start is an effect of its own (sd `start_sd`, the sweep's start
spread; `START_SD` where none is known), so what differs between a start's
workloads (the drafter's window against the context) is measured within the
start, free of the start's level; the workloads' own residual variance is
moderated by a stated prior (`ROUND_SD`, 4 df). The draws are of that posterior
(a t) restricted to coefficients >= 0, by rejection (seeded, so a resumed sweep
decides as an uninterrupted one); a config's predicted tok/s and the sweep's
objective come from the same draws. Every measured trial refits it: the model
learns as trials land. See docs/traces.md "Traces".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

WORKLOADS = ("short", "long")  # what the objectives read: short_tps, long_tps
METHODS = ("dflash", "ddtree", "ngram", "chain")  # methods with a fixed part of their own
START_SD = 0.03  # the relative spread of a start's level, shared by its workloads (default)
ROUND_SD = 0.015  # ... and of one workload's rounds within a start, before the data (4 df)
PRIOR_DF = 4.0
DRAWS = 4000
MAX_BATCHES = 50  # rejection batches of DRAWS before the draws are clipped instead
PRIOR_SCALE = 3.0  # each coefficient's prior sd, in units of the typical round
PROBED_SD = 0.1  # the prior sd of v (around 1) where probes measured F
FEATURES = len(WORKLOADS) + len(METHODS) + 3
VERIFY = len(WORKLOADS) + len(METHODS)  # the column of F(verify tokens)


@dataclass(frozen=True)
class Shape:
    """One config's rounds on one workload, from its prediction source."""

    mode: str  # ar, or a method of METHODS (its fixed part)
    tokens_per_round: float  # R: mean over requests of (tokens - 1) / rounds
    # tokens a verify forward runs: 1 (ar), the block (dflash), budget + 1 (ddtree), K + 1
    # (chains); n-gram: 1 + the tokens proposed, on average over its steps
    verify_tokens: float
    drafter_share: float  # min(window, context) / context, averaged; 0 without a drafter
    acceptance: float | None = None  # τ as the served engine reports it (None: none)
    draft_steps: int = 0  # sequential drafter forwards a round (chains: K)
    drafter_positions: float = 0.0  # context positions the drafter attends, mean (0: unknown)

    def features(self, workload: str, forward: Forward | None = None) -> list[float]:
        """[step short, step long, dflash, ddtree, ngram, chain, F(verify), drafter,
        draft steps]."""
        steps = [1.0 if workload == w else 0.0 for w in WORKLOADS]
        methods = [1.0 if self.mode == m else 0.0 for m in METHODS]
        extra = (forward or Forward()).extra(self.verify_tokens)
        drafter = self.drafter_positions / 1000 if self.drafter_positions else self.drafter_share
        return [*steps, *methods, extra, drafter, float(self.draft_steps)]


@dataclass(frozen=True)
class ForwardProbe:
    """Seconds of one target forward over `tokens` tokens (`tokens` = 1: a plain step)."""

    tokens: int
    seconds: float


class Forward:
    """F(n), what a forward over n tokens costs beyond one token: n - 1 without probes, the
    interpolated probes (seconds) with them (flat past the largest probed n + its slope)."""

    def __init__(self, probes: Sequence[ForwardProbe] = ()) -> None:
        by_n: dict[int, list[float]] = {}
        for probe in probes:
            by_n.setdefault(probe.tokens, []).append(probe.seconds)
        self.points = sorted((n, float(np.median(v))) for n, v in by_n.items())
        self.probed = len(self.points) >= 2

    def extra(self, tokens: float) -> float:
        if not self.probed:
            return float(tokens - 1)
        ns = np.array([n for n, _ in self.points], dtype=float)
        ys = np.array([y for _, y in self.points])
        at = float(np.interp(tokens, ns, ys, left=ys[0], right=ys[-1]))
        if tokens > ns[-1] and len(ns) >= 2:  # past the probes: their last slope
            at += (tokens - ns[-1]) * (ys[-1] - ys[-2]) / (ns[-1] - ns[-2])
        base = float(np.interp(1.0, ns, ys, left=ys[0], right=ys[-1]))
        return max(at - base, 0.0)


@dataclass(frozen=True)
class Observation:
    """One start of one config on one workload: seconds per round, from its benches' tok/s."""

    label: str
    workload: str
    seconds: float
    start: int


@dataclass(frozen=True)
class Interval:
    point: float
    low: float
    high: float

    def text(self, digits: int = 1) -> str:
        return f"{self.point:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"


class CostModel:
    """Posterior draws of seconds per round for every config the trace describes."""

    def __init__(
        self,
        shapes: Mapping[str, Mapping[str, Shape]],  # label -> workload -> shape
        observations: Sequence[Observation],
        seed: int = 0,
        probes: Sequence[ForwardProbe] = (),
        start_sd: float = START_SD,  # what a start moves a config's level by (relative sd)
    ) -> None:
        self.shapes = shapes
        self.observations = list(observations)
        self.forward = Forward(probes)
        rng = np.random.default_rng(seed)
        x, y = self._rows()
        starts = _start_columns([(o.label, o.start) for o in self._kept()], y)
        prior = _prior_mean(self.forward)
        draws, within = _fit((x, y), self._reach(), rng, prior, (starts, start_sd))
        self.sd = math.sqrt(within**2 + start_sd**2)  # a new start: its level and its rounds
        self.coef: dict[str, np.ndarray] = {w: draws for w in self.workloads()}  # [DRAWS, F]
        self.sigma: dict[str, float] = {w: self.sd for w in self.workloads()}

    def workloads(self) -> list[str]:
        found = {w for shapes in self.shapes.values() for w in shapes}
        return [w for w in WORKLOADS if w in found]

    def _kept(self) -> list[Observation]:
        rows = [o for o in self.observations if o.label in self.shapes]
        return [o for o in rows if o.workload in self.shapes[o.label]]

    def _rows(self) -> tuple[np.ndarray, np.ndarray]:
        """(features [n, FEATURES], seconds [n]) of the observations, every workload."""
        rows = self._kept()
        x = [self.shapes[o.label][o.workload].features(o.workload, self.forward) for o in rows]
        return np.array(x, dtype=float).reshape(-1, FEATURES), np.array([o.seconds for o in rows])

    def _reach(self) -> np.ndarray:
        """The largest value each feature takes over the configs (scales each prior)."""
        x = [s.features(w, self.forward) for by in self.shapes.values() for w, s in by.items()]
        return np.maximum(np.abs(np.array(x, dtype=float)).max(axis=0), 1e-9)

    def seconds(self, label: str, workload: str) -> np.ndarray:
        """Draws of the config's seconds per round on `workload`."""
        x = np.array(self.shapes[label][workload].features(workload, self.forward))
        return np.maximum(self.coef[workload] @ x, 1e-12)

    def tps(self, label: str, workload: str) -> np.ndarray:
        return self.shapes[label][workload].tokens_per_round / self.seconds(label, workload)

    def objective(self, label: str, objective: str) -> np.ndarray:
        """Draws of the sweep's objective (tok/s; throughput = geometric mean of short, long)."""
        if objective == "short_context":
            return self.tps(label, "short")
        if objective == "long_context":
            return self.tps(label, "long")
        values = [np.log(self.tps(label, w)) for w in self.workloads()]
        return np.exp(np.mean(values, axis=0))

    def interval(self, label: str, objective: str, level: float = 0.95) -> Interval:
        draws = self.objective(label, objective)
        tail = (1 - level) / 2 * 100
        low, mid, high = np.percentile(draws, [tail, 50.0, 100 - tail])
        return Interval(float(mid), float(low), float(high))

    def noise_sd(self) -> float:
        """The relative sd of a new start's rounds around the model (its level and its own)."""
        return self.sd


def _prior_mean(forward: Forward) -> tuple[np.ndarray, np.ndarray | None]:
    """(prior means, fixed prior sds or None): all 0 and from the data's scale, but v
    around 1 with sd PROBED_SD where probes measured F in seconds."""
    mean = np.zeros(FEATURES)
    if not forward.probed:
        return mean, None
    mean[VERIFY] = 1.0
    sd = np.full(FEATURES, np.nan)
    sd[VERIFY] = PROBED_SD
    return mean, sd


def _start_columns(starts: list[tuple[str, int]], y: np.ndarray) -> np.ndarray:
    """[n, starts]: observation i's share of its start's level (y_i on its start's column),
    so a start's effect u moves each of its rounds by u of its time."""
    keys = list(dict.fromkeys(starts))
    z = np.zeros((len(starts), len(keys)))
    for i, key in enumerate(starts):
        z[i, keys.index(key)] = y[i]
    return z


def _fit(
    rows: tuple[np.ndarray, np.ndarray],
    reach: np.ndarray,
    rng: np.random.Generator,
    prior: tuple[np.ndarray, np.ndarray | None],
    starts: tuple[np.ndarray, float],
) -> tuple[np.ndarray, float]:
    """Draws [DRAWS, FEATURES] of the coefficients and the relative sd of a workload's rounds
    within a start; each coefficient's prior sd is PRIOR_SCALE typical rounds over the most
    its feature reaches (where `prior` fixes none), each start's effect N(0, start_sd)
    (`starts`: the observations' start columns and start_sd), the effects integrated out
    (the coefficients' block of the joint posterior)."""
    x, y = rows
    columns, start_sd = starts
    active = reach > 1e-9  # a feature no config has is no coefficient (its draws stay 0)
    if not active.all():
        draws, sigma = _fit((x[:, active], y), reach[active], rng, _subset(prior, active), starts)
        full = np.zeros((len(draws), len(active)))
        full[:, active] = draws
        return full, sigma
    scale = float(np.median(y)) if len(y) else 1.0
    prior_mean, fixed_sd = prior
    prior_var = (PRIOR_SCALE * scale / reach) ** 2
    if fixed_sd is not None:
        prior_var = np.where(np.isnan(fixed_sd), prior_var, np.nan_to_num(fixed_sd) ** 2)
    k = len(prior_var)
    xz = np.hstack([x, columns])  # the coefficients, then one effect per start
    joint_var = np.concatenate([prior_var, np.full(columns.shape[1], start_sd**2)])
    joint_mean = np.concatenate([prior_mean, np.zeros(columns.shape[1])])
    weights = 1.0 / np.maximum(y, 1e-12) ** 2  # relative noise
    precision, moment = xz.T @ (weights[:, None] * xz), xz.T @ (weights * y)
    first, _ = _posterior(precision, moment, joint_var, ROUND_SD**2, joint_mean)
    resid = (y - xz @ first) * np.sqrt(weights)
    identified = int(np.linalg.matrix_rank(precision)) if len(y) else 0
    df = PRIOR_DF + max(0, len(y) - identified)
    sigma2 = (PRIOR_DF * ROUND_SD**2 + float(resid @ resid)) / df
    mean, cov = _posterior(precision, moment, joint_var, sigma2, joint_mean)
    return _nonnegative_draws(mean[:k], cov[:k, :k], df, rng), math.sqrt(sigma2)


def _subset(
    prior: tuple[np.ndarray, np.ndarray | None], keep: np.ndarray
) -> tuple[np.ndarray, np.ndarray | None]:
    mean, sd = prior
    return mean[keep], None if sd is None else sd[keep]


def _nonnegative_draws(
    mean: np.ndarray, cov: np.ndarray, df: float, rng: np.random.Generator
) -> np.ndarray:
    """DRAWS draws of the t posterior restricted to coefficients >= 0 (rejection; where the
    data themselves leave that region, the draws clipped at 0 instead)."""
    kept: list[np.ndarray] = []
    total = 0
    for _ in range(MAX_BATCHES):
        z = rng.multivariate_normal(np.zeros(len(mean)), cov, size=DRAWS, method="cholesky")
        draws = mean + z * np.sqrt(df / rng.chisquare(df, size=DRAWS))[:, None]
        kept.append(draws[(draws >= 0).all(axis=1)])
        total += len(kept[-1])
        if total >= DRAWS:
            return np.concatenate(kept)[:DRAWS]
    return np.maximum(draws, 0.0)


def _posterior(
    precision: np.ndarray,
    moment: np.ndarray,
    prior_var: np.ndarray,
    sigma2: float,
    prior_mean: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian posterior of the coefficients given the noise variance (prior
    N(prior_mean, prior_var))."""
    mean0 = np.zeros(len(prior_var)) if prior_mean is None else prior_mean
    a = precision / sigma2 + np.diag(1.0 / prior_var)
    cov = np.linalg.inv(a)
    return cov @ (moment / sigma2 + mean0 / prior_var), (cov + cov.T) / 2


__all__ = [
    "DRAWS",
    "METHODS",
    "WORKLOADS",
    "CostModel",
    "Forward",
    "ForwardProbe",
    "Interval",
    "Observation",
    "Shape",
]
