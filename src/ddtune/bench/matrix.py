"""`BenchMatrix`: what one benchmark run sends, parsed strictly from the `[bench]` TOML table.

Defaults are sized for the bundled tiny CPU model (context 512 tokens) so that
one sweep trial takes well under a minute. Example:

    [bench]
    temperature = 0
    concurrency = 1
    [bench.short]
    n_prompts = 4
    prompt_tokens = 100
    max_tokens = 32
    repeats = 2
    [bench.long]
    prompt_tokens = 320
    [bench.coding]
    limit = 10          # first N tasks; 0 or enabled = false skips coding
    n_samples = 1

Prompt lengths are counted in characters: `prompt_tokens * chars_per_token`
characters of code (the server's tokenizer is not queried; `/tokenize` is not a
standard endpoint). The real prompt token counts the server reports are kept
in each sample as `prompt_tokens`.
"""

from __future__ import annotations

import tomllib
import types
import typing
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

from ddtune.errors import UserError


@dataclass(frozen=True)
class ThroughputWorkload:
    enabled: bool = True
    n_prompts: int = 4
    prompt_tokens: int = 100
    max_tokens: int = 32
    repeats: int = 2  # passes over the prompt set

    def validate(self, where: str) -> None:
        for name in ("n_prompts", "prompt_tokens", "max_tokens", "repeats"):
            _positive(f"{where}.{name}", getattr(self, name))


@dataclass(frozen=True)
class CodingWorkload:
    enabled: bool = True
    tasks_file: str | None = None  # None: the bundled held-out tasks
    n_samples: int = 1  # per task; pass@k for k = n_samples when > 1
    max_tokens: int = 96
    timeout_s: float = 5.0  # per test run
    limit: int | None = 10  # first N tasks; None = all
    memory_mb: int = 1024

    def validate(self, where: str) -> None:
        for name in ("n_samples", "max_tokens", "memory_mb"):
            _positive(f"{where}.{name}", getattr(self, name))
        _positive(f"{where}.timeout_s", self.timeout_s)
        if self.limit is not None and self.limit < 0:
            raise UserError(f"{where}.limit must be >= 0 (0 skips coding); got {self.limit}")


@dataclass(frozen=True)
class BenchMatrix:
    model: str | None = None  # None: the first model of /v1/models
    temperature: float = 0.0
    seed: int = 0
    warmup: int = 2  # requests before measuring, excluded from every figure
    concurrency: int = 1
    ignore_eos: bool = True  # sent where the server kind supports it
    chars_per_token: float = 3.0
    prompts_file: str | None = None  # JSONL {"prompt", "workload": "short"|"long"}
    request_timeout_s: float = 300.0
    short: ThroughputWorkload = field(default_factory=ThroughputWorkload)
    long: ThroughputWorkload = field(
        default_factory=lambda: ThroughputWorkload(n_prompts=2, prompt_tokens=320, max_tokens=32)
    )
    coding: CodingWorkload = field(default_factory=CodingWorkload)

    def __post_init__(self) -> None:
        if not 0.0 <= self.temperature <= 2.0:
            raise UserError(f"bench.temperature must be between 0 and 2; got {self.temperature}")
        if self.warmup < 0:
            raise UserError(f"bench.warmup must be >= 0; got {self.warmup}")
        _positive("bench.concurrency", self.concurrency)
        _positive("bench.chars_per_token", self.chars_per_token)
        _positive("bench.request_timeout_s", self.request_timeout_s)
        self.short.validate("bench.short")
        self.long.validate("bench.long")
        self.coding.validate("bench.coding")

    @classmethod
    def from_dict(cls, table: dict[str, Any]) -> BenchMatrix:
        """Strict: an unknown key or a wrong type is a UserError naming `bench.<key>`."""
        return _build(cls, table, "bench")

    @classmethod
    def from_toml(cls, path: str | Path) -> BenchMatrix:
        """The `[bench]` table of a TOML file (or the whole file when it has none).

        Relative `prompts_file` / `coding.tasks_file` paths are resolved against the file's folder.
        """
        path = Path(path)
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UserError(f"bench matrix file {path} does not exist") from None
        except tomllib.TOMLDecodeError as exc:
            raise UserError(f"{path} is not valid TOML: {exc}") from None
        table = data.get("bench", data)
        matrix = cls.from_dict(table)
        return matrix.resolve_paths(path.parent)

    def resolve_paths(self, base: Path) -> BenchMatrix:
        def resolve(value: str | None) -> str | None:
            return None if value is None else str((base / value).resolve())

        coding = CodingWorkload(
            **{**asdict(self.coding), "tasks_file": resolve(self.coding.tasks_file)}
        )
        data = {
            **asdict(self),
            "prompts_file": resolve(self.prompts_file),
            "coding": asdict(coding),
        }
        return BenchMatrix.from_dict(data)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _positive(name: str, value: float) -> None:
    if value <= 0:
        raise UserError(f"{name} must be positive; got {value}")


def _build(cls: type, table: Any, where: str) -> Any:
    """Construct dataclass `cls` from `table`, checking keys and types recursively."""
    if not isinstance(table, dict):
        raise UserError(f"{where} must be a table; got {type(table).__name__}")
    hints = typing.get_type_hints(cls)
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(table) - known)
    if unknown:
        raise UserError(
            f"unknown key(s) {', '.join(f'{where}.{k}' for k in unknown)}; "
            f"expected some of {', '.join(sorted(known))}"
        )
    values = {}
    for name, value in table.items():
        hint = hints[name]
        if is_dataclass(hint):
            values[name] = _build(hint, value, f"{where}.{name}")
        else:
            values[name] = _check_type(value, hint, f"{where}.{name}")
    return cls(**values)


def _check_type(value: Any, hint: Any, where: str) -> Any:
    allowed = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    if value is None and type(None) in allowed:
        return None
    for kind in allowed:
        if kind is bool and isinstance(value, bool):
            return value
        if kind is int and isinstance(value, int) and not isinstance(value, bool):
            return value
        if kind is float and isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if kind is str and isinstance(value, str):
            return value
    names = " or ".join("none" if k is type(None) else k.__name__ for k in allowed)
    raise UserError(f"{where} must be {names}; got {value!r}")
