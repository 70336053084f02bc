"""`ServeConfig`: everything `ddtune serve` needs to start, from flags and/or a TOML file.

The TOML file uses the flag names as keys (dashes or underscores), e.g.

    target = "models/target"
    drafter = "models/drafter"
    mode = "ddtree"
    budget = 32
    topk = 4
    window = "none"
    port = 8000
    max_queue = 64
    grace_seconds = 10

Unknown keys are an error; flags given on the command line override the file.
"""

from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ddtune.errors import UserError
from ddtune.params import DecodeParams

PARAM_KEYS = ("mode", "budget", "topk", "window")


@dataclass(frozen=True)
class ServeConfig:
    target: Path | None = None  # None = the bundled target model
    drafter: Path | None = None  # None = the bundled drafter (if present)
    params: DecodeParams = field(default_factory=DecodeParams)
    host: str = "127.0.0.1"
    port: int = 8000  # 0 = any free port (the ready line tells which)
    max_queue: int = 64  # requests waiting behind the running one
    grace_seconds: float = 10.0  # SIGTERM: time to finish in-flight requests
    model_name: str | None = None  # None = the target folder's name
    health_timeout_s: float = 30.0  # /health_generate deadline

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise UserError(f"port must be between 0 and 65535; got {self.port}")
        if self.max_queue < 1:
            raise UserError(f"max_queue must be at least 1; got {self.max_queue}")
        if self.grace_seconds < 0:
            raise UserError(f"grace_seconds must be >= 0; got {self.grace_seconds}")

    @classmethod
    def from_toml(cls, path: Path) -> ServeConfig:
        try:
            data = tomllib.loads(Path(path).read_text())
        except FileNotFoundError:
            raise UserError(f"config file not found: {path}") from None
        except tomllib.TOMLDecodeError as exc:
            raise UserError(f"config file {path} is not valid TOML: {exc}") from None
        return cls().with_overrides(data, source=str(path))

    def with_overrides(self, values: dict[str, Any], source: str = "flags") -> ServeConfig:
        """Apply `{key: value}` (None values are skipped); strict about key names."""
        values = {k.replace("-", "_"): v for k, v in values.items() if v is not None}
        known = set(PARAM_KEYS) | {f.name for f in fields(self)} - {"params"}
        unknown = sorted(set(values) - known)
        if unknown:
            raise UserError(
                f"unknown serve setting(s) {', '.join(unknown)} in {source}; "
                f"expected some of {', '.join(sorted(known))}"
            )
        params = self.params.with_updates({k: values.pop(k) for k in PARAM_KEYS if k in values})
        for key in ("target", "drafter"):
            if key in values:
                values[key] = Path(values[key]).expanduser()
        for key, kind in (("port", int), ("max_queue", int), ("grace_seconds", float)):
            if key in values:
                values[key] = _coerce(key, values[key], kind)
        return replace(self, params=params, **values)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["params"] = self.params.to_dict()
        for key in ("target", "drafter"):
            out[key] = None if out[key] is None else str(out[key])
        return out


def _coerce(key: str, value: Any, kind: type) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UserError(f"{key} must be a number; got {value!r}")
    if kind is int and not isinstance(value, int):
        raise UserError(f"{key} must be an integer; got {value!r}")
    return kind(value)
