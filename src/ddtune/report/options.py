"""`ReportOptions`: the knobs of the report, with defaults that suit a sweep."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from ddtune.errors import UserError


@dataclass(frozen=True)
class ReportOptions:
    title: str = "ddtune sweep report"
    confidence: float = 0.95  # level of every interval in the report
    alpha: float = 0.05  # significance level of the tests (Welch t, Fisher exact)
    power: float = 0.80  # target power of the "repeats needed" estimate
    tie_tolerance: float = 0.02  # relative: means within 2% of the best count as tied
    plots: bool = True  # write PNG plots and embed them in report.html

    def __post_init__(self) -> None:
        for name in ("confidence", "power"):
            if not 0.5 <= getattr(self, name) < 1.0:
                raise UserError(f"report {name} must lie in [0.5, 1); got {getattr(self, name)}")
        if not 0.0 < self.alpha < 0.5:
            raise UserError(f"report alpha must lie in (0, 0.5); got {self.alpha}")
        if not 0.0 <= self.tie_tolerance < 0.5:
            raise UserError(f"report tie_tolerance must lie in [0, 0.5); got {self.tie_tolerance}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReportOptions:
        """Strict: unknown keys are an error."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise UserError(
                f"unknown report option(s) {', '.join(unknown)}; expected some of {', '.join(sorted(known))}"
            )
        return cls(**data)
