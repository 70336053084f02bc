"""What a round costs: seconds per verify round, fitted from measured trials, with its uncertainty.

A trace fixes each config's rounds; a measured trial adds what they took. On
workload w (short, long) config c commits R_w(c) tokens a round on average
(`Shape.tokens_per_round`, from the trace: mean over requests of (n - 1) / rounds,
the decode tokens the bench's tok/s counts) and its bench measured tps_w, so one
round took s_w = R_w(c) / tps_w seconds. The model, per workload:

    s_w(c) = b_mode(c) + b_v·(verify tokens - 1) + b_d·(drafter's share of the context)

b_ar: one plain target step; b_dflash, b_ddtree: a draft-verify round's fixed part
(the drafter's forward, the chain or the tree, the walk); b_v: each further token
the target verifies (budget, or the chain's length); b_d: the drafter's attention
over its window (min(W, L) / L for a context of L). Every coefficient is >= 0: more verify tokens or a wider
window never make a round cheaper, so what the data leave open can only make a
config slower than its best case, and a config whose best case cannot beat the
leader is out on that alone.

Fit: weighted least squares on the relative scale (a round's noise is a share
of its time), a weak prior on every coefficient (mean 0, sd: 3 typical rounds
over the most its feature reaches, so no config's round is presumed cheap), the residual variance moderated by a stated prior (3% a start, 4 df).
The draws are of that posterior (a t) restricted to coefficients >= 0, by
rejection: what the data leave open spreads over what is physically possible
(seeded, so a resumed sweep decides as an uninterrupted one); a config's
predicted tok/s and the sweep's objective come from the same draws.
See docs/traces.md "Traces".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ddtune.params import MODES, DecodeParams

WORKLOADS = ("short", "long")  # what the objectives read: short_tps, long_tps
PRIOR_SD = 0.03  # the relative spread of one start's rounds before the data (4 df)
PRIOR_DF = 4.0
DRAWS = 4000
MAX_BATCHES = 50  # rejection batches of DRAWS before the draws are clipped instead
PRIOR_SCALE = 3.0  # each coefficient's prior sd, in units of the typical round
FEATURES = len(MODES) + 2


@dataclass(frozen=True)
class Shape:
    """One config's rounds on one workload, from the trace."""

    mode: str  # ar | dflash | ddtree
    tokens_per_round: float  # R: mean over requests of (tokens - 1) / rounds
    verify_tokens: int  # 1 (ar), the chain's block (dflash), budget + 1 (ddtree)
    drafter_share: float  # min(window, context) / context, averaged; 0 for ar
    acceptance: float | None = None  # τ as the served kind reports it (None: it reports none)

    def features(self) -> list[float]:
        """[ar, dflash, ddtree, verify tokens - 1, drafter share]: the model's regressors."""
        modes = [1.0 if self.mode == m else 0.0 for m in MODES]
        return [*modes, float(self.verify_tokens - 1), self.drafter_share]


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
    ) -> None:
        self.shapes = shapes
        self.observations = list(observations)
        rng = np.random.default_rng(seed)
        self.coef: dict[str, np.ndarray] = {}  # workload -> [DRAWS, FEATURES]
        self.sigma: dict[str, float] = {}  # workload -> relative sd of one start's rounds
        for w in self.workloads():
            self.coef[w], self.sigma[w] = _fit(self._rows(w), self._reach(w), rng)

    def workloads(self) -> list[str]:
        found = {w for shapes in self.shapes.values() for w in shapes}
        return [w for w in WORKLOADS if w in found]

    def _rows(self, workload: str) -> tuple[np.ndarray, np.ndarray]:
        """(features [n, FEATURES], seconds [n]) of the observations on `workload`."""
        rows = [o for o in self.observations if o.workload == workload and o.label in self.shapes]
        x = [self.shapes[o.label][workload].features() for o in rows]
        return np.array(x, dtype=float).reshape(-1, FEATURES), np.array([o.seconds for o in rows])

    def _reach(self, workload: str) -> np.ndarray:
        """The largest value each feature takes over the configs (scales each prior)."""
        x = [s[workload].features() for s in self.shapes.values() if workload in s]
        return np.maximum(np.abs(np.array(x, dtype=float)).max(axis=0), 1e-9)

    def seconds(self, label: str, workload: str) -> np.ndarray:
        """Draws of the config's seconds per round on `workload`."""
        x = np.array(self.shapes[label][workload].features())
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
        """The relative sd of one start's objective around the model (largest workload's)."""
        return max(self.sigma.values(), default=PRIOR_SD)


def _fit(
    rows: tuple[np.ndarray, np.ndarray], reach: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, float]:
    """Draws [DRAWS, FEATURES] of the coefficients and the residual relative sd; each
    coefficient's prior sd is PRIOR_SCALE typical rounds over the most its feature reaches."""
    x, y = rows
    scale = float(np.median(y)) if len(y) else 1.0
    prior_var = (PRIOR_SCALE * scale / reach) ** 2
    weights = 1.0 / np.maximum(y, 1e-12) ** 2  # relative noise
    precision, moment = x.T @ (weights[:, None] * x), x.T @ (weights * y)
    first, _ = _posterior(precision, moment, prior_var, PRIOR_SD**2)
    resid = (y - x @ first) * np.sqrt(weights)
    identified = int(np.linalg.matrix_rank(precision)) if len(y) else 0
    df = PRIOR_DF + max(0, len(y) - identified)
    sigma2 = (PRIOR_DF * PRIOR_SD**2 + float(resid @ resid)) / df
    mean, cov = _posterior(precision, moment, prior_var, sigma2)
    return _nonnegative_draws(mean, cov, df, rng), math.sqrt(sigma2)


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
    precision: np.ndarray, moment: np.ndarray, prior_var: np.ndarray, sigma2: float
) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian posterior of the coefficients given the noise variance (prior N(0, prior_var))."""
    a = precision / sigma2 + np.diag(1.0 / prior_var)
    cov = np.linalg.inv(a)
    return cov @ (moment / sigma2), (cov + cov.T) / 2


def verify_tokens(params: DecodeParams, block_size: int) -> int:
    """Tokens one verify forward runs: the root plus the tree (or chain)."""
    if params.mode == "ar":
        return 1
    if params.mode == "dflash":
        return block_size
    return params.budget + 1


__all__ = ["DRAWS", "WORKLOADS", "CostModel", "Interval", "Observation", "Shape", "verify_tokens"]
