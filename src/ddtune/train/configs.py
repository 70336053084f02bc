"""The training settings, each declared once: default, bounds and help text of every field.

`TargetTrainConfig`, `DrafterTrainConfig` and `Eagle3TrainConfig` are strict
pydantic dataclasses.
Their fields drive everything else:

- `add_arguments(parser, cls)`: one `--flag` per field for `ddtune train
  target|drafter|eagle3` (flag from the name, or `folder(flag=...)`; default and help
  from the field).
- `from_args(cls, args)` / `build(cls, values)`: the config, with a bad value
  turned into a one-line `UserError` whose `.key` names the field.
- `cfg.run_dict()`: the settings that change the result (fields not marked
  `run=False`), saved with each checkpoint and compared on `--resume`.

Direct construction with a bad value raises pydantic's `ValidationError`, as
for `ddtune.params`. No torch here, so the CLI can read the fields cheaply.
See docs/ddtree.md "Train".
"""

from __future__ import annotations

import argparse
import types
import typing
from typing import Any, ClassVar, TypeVar

from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass
from pydantic.fields import FieldInfo

from ddtune.errors import UserError
from ddtune.params import build

_STRICT = ConfigDict(strict=True, extra="forbid")
S = TypeVar("S", bound="RunSettings")


def setting(default: Any, text: str, *, run: bool = True, **bounds: Any) -> Any:
    """A field with a default and help `text`; `run=False`: it does not change the result."""
    return Field(default, description=text, json_schema_extra={"run": run}, **bounds)


def folder(flag: str, text: str) -> Any:
    """A required folder, given on the command line as `flag`; not a run setting."""
    return Field(description=text, json_schema_extra={"run": False, "flag": flag})


class RunSettings:
    """Base of the training configs: the part of a config that a resume must match."""

    __pydantic_fields__: ClassVar[dict[str, FieldInfo]]  # set by pydantic's dataclass

    def run_dict(self) -> dict[str, Any]:
        fields = self.__pydantic_fields__
        return {name: getattr(self, name) for name, info in fields.items() if _extra(info, "run")}


@dataclass(frozen=True, config=_STRICT)
class TargetTrainConfig(RunSettings):
    tokenizer_dir: str = folder("--tokenizer", "folder with tokenizer.json")
    out_dir: str = folder("--out", "output Hugging Face folder")
    checkpoint_dir: str = folder("--checkpoint-dir", "folder for checkpoint.pt and summary.json")
    seed: int = setting(0, "seed of the initial weights and of the data order")
    hidden_size: int = setting(256, "model width", ge=1)
    num_layers: int = setting(6, "decoder layers", ge=1)
    num_heads: int = setting(4, "attention heads", ge=1)
    num_kv_heads: int = setting(2, "key/value heads", ge=1)
    intermediate_size: int = setting(768, "MLP width", ge=1)
    max_context: int = setting(512, "context length of the model", ge=1)
    seq_len: int = setting(512, "training sequence length", ge=1)
    batch_size: int = setting(8, "sequences per step", ge=1)
    steps: int = setting(1000, "optimizer steps", ge=1)
    lr: float = setting(2e-3, "peak learning rate", gt=0)
    warmup: int = setting(50, "linear warmup steps", ge=0)
    weight_decay: float = setting(0.1, "AdamW weight decay", ge=0)
    task_share: float = setting(0.7, "share of task characters in the corpus", ge=0, le=1)
    checkpoint_every: int = setting(50, "steps between checkpoints", run=False, ge=1)
    threads: int = setting(2, "torch CPU threads", run=False, ge=1)
    init_from: str | None = setting(None, "trained target folder to continue (a second stage)")

    def __post_init__(self) -> None:
        if self.hidden_size % self.num_heads or self.num_heads % self.num_kv_heads:
            raise UserError("hidden_size must divide by num_heads, and num_heads by num_kv_heads")
        if self.seq_len > self.max_context:
            raise UserError(f"seq_len {self.seq_len} exceeds max_context {self.max_context}")


@dataclass(frozen=True, config=_STRICT)
class DrafterTrainConfig(RunSettings):
    target_dir: str = folder("--target", "trained target folder")
    out_dir: str = folder("--out", "output drafter folder")
    checkpoint_dir: str = folder("--checkpoint-dir", "folder for checkpoint.pt and distill.pt")
    seed: int = setting(0, "seed of the weights, the distillation prompts and the batches")
    num_layers: int = setting(2, "drafter layers", ge=1)
    block_size: int = setting(8, "tokens per drafted block (anchor + masks)", ge=2)
    intermediate_size: int = setting(768, "MLP width", ge=1)
    gamma: float = setting(4.0, "loss weight decay over block positions", gt=0)
    prompts: int = setting(2048, "distillation prompts", ge=1)
    gen_tokens: int = setting(96, "target tokens generated per prompt", ge=1)
    anchors: int = setting(16, "blocks per sequence and step", ge=1)
    batch_size: int = setting(16, "sequences per step", ge=1)
    steps: int = setting(1200, "optimizer steps", ge=1)
    lr: float = setting(1e-3, "peak learning rate", gt=0)
    warmup: int = setting(50, "linear warmup steps", ge=0)
    checkpoint_every: int = setting(100, "steps between checkpoints", run=False, ge=1)
    threads: int = setting(2, "torch CPU threads", run=False, ge=1)
    stop_at_eos: bool = setting(
        False, "distill only up to the target's EOS (default: continue past it)"
    )


@dataclass(frozen=True, config=_STRICT)
class Eagle3TrainConfig(RunSettings):
    target_dir: str = folder("--target", "trained target folder")
    out_dir: str = folder("--out", "output EAGLE-3 head folder")
    checkpoint_dir: str = folder("--checkpoint-dir", "folder for checkpoint.pt and distill.pt")
    seed: int = setting(0, "seed of the weights, the distillation prompts and the batches")
    aux_layers: str = setting(
        "",
        "target layers the head reads, vLLM's ids (j: the stream entering layer j), "
        "e.g. '2,4,5'; empty: 2, n/2 + 1 and n - 1 for an n-layer target",
    )
    draft_vocab: int = setting(2048, "tokens the head can draft (the target's most written)", ge=2)
    intermediate_size: int = setting(0, "MLP width (0: the target's)", ge=0)
    ttt_steps: int = setting(5, "draft steps unrolled in training (the training-time test)", ge=1)
    step_decay: float = setting(0.8, "loss weight of draft step k is step_decay ** k", gt=0, le=1)
    prompts: int = setting(2048, "distillation prompts", ge=1)
    gen_tokens: int = setting(96, "target tokens generated per prompt", ge=1)
    batch_size: int = setting(16, "sequences per step", ge=1)
    steps: int = setting(400, "optimizer steps", ge=1)
    lr: float = setting(2e-3, "peak learning rate", gt=0)
    warmup: int = setting(20, "linear warmup steps", ge=0)
    checkpoint_every: int = setting(25, "steps between checkpoints", run=False, ge=1)
    threads: int = setting(2, "torch CPU threads", run=False, ge=1)
    stop_at_eos: bool = setting(
        False, "distill only up to the target's EOS (default: continue past it)"
    )


def add_arguments(parser: argparse.ArgumentParser, cls: type[RunSettings]) -> None:
    """One flag per field of the config class `cls` (dest = the field name)."""
    for name, info in cls.__pydantic_fields__.items():
        flag = _extra(info, "flag") or "--" + name.replace("_", "-")
        kind = _arg_type(info.annotation)
        if info.is_required():
            parser.add_argument(
                flag, dest=name, type=kind, required=True, metavar="DIR", help=info.description
            )
        elif kind is bool:
            action = argparse.BooleanOptionalAction if info.default else "store_true"
            parser.add_argument(flag, dest=name, action=action, help=info.description)
        else:
            text = f"{info.description} (default: {info.default})"
            parser.add_argument(flag, dest=name, type=kind, default=info.default, help=text)


def from_args(cls: type[S], args: argparse.Namespace) -> S:
    """The config `cls` from parsed arguments; a bad value is a `UserError` naming the field."""
    config: S = build(cls, {name: getattr(args, name) for name in cls.__pydantic_fields__})
    return config


def _extra(info: FieldInfo, key: str) -> Any:
    extra = info.json_schema_extra
    return extra.get(key) if isinstance(extra, dict) else None


def _arg_type(annotation: Any) -> type:
    """int, float, str or bool; `X | None` reads as X."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        (annotation,) = [a for a in typing.get_args(annotation) if a is not type(None)]
    if annotation not in (int, float, str, bool):
        raise TypeError(f"no command-line type for {annotation!r}")
    return typing.cast(type, annotation)


__all__ = [
    "DrafterTrainConfig",
    "Eagle3TrainConfig",
    "TargetTrainConfig",
    "add_arguments",
    "build",
    "from_args",
]
