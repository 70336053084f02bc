"""Which models `ddtune trace record` loads: the spec's own, never a silent default.

    models = trace_models(args.target, args.drafter, spec)
    models.target, models.drafter, models.trust_remote_code

With a spec (`--spec`, or the spec a `--store` keeps) the target and drafter
are the folders its service loads (`sweep.spec.served.spec_models`: the model
and drafter paths of the launch command or unit), and `trust_remote_code`
follows the command. `--target`/`--drafter` may name a copy of them (the
service's own folders on another machine); a folder readable here whose
fingerprint differs from the service's is refused, naming both. A spec whose
command names no folder, or names one this machine cannot read, is a one-line
error saying what to pass. Without a spec (`--prompt`, `--prompts-file`) the
bundled models are the default.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ddtune.errors import UserError
from ddtune.fingerprint import UnreadableFolder, model_fingerprint

if TYPE_CHECKING:
    from ddtune.services.models import ServedModels

FLAGS = {"target": "--target", "drafter": "--drafter"}
NAMED_BY = {
    "target": "--model, --model-path, --target or `vllm serve MODEL`",
    "drafter": "--drafter, --draft-model-path, --speculative-draft-model-path or "
    "--speculative-config's model",
}


@dataclass(frozen=True)
class TraceModels:
    target: Path
    drafter: Path
    trust_remote_code: bool = False
    dtype: str | None = None  # the dtype the spec's service computes in (None: no spec, unknown)


def trace_models(
    target: Path | None, drafter: Path | None, served: ServedModels | None
) -> TraceModels:
    """The folders to trace (UserError: what to pass instead); `served`: what the spec's
    service loads (`sweep.spec.served.spec_models`), None without a spec."""
    if served is None:
        from ddtune import assets

        return TraceModels(
            target or assets.default_target_dir(), drafter or assets.default_drafter_dir()
        )
    return TraceModels(
        _side("target", target, served),
        _side("drafter", drafter, served),
        served.trust_remote_code,
        served.dtype,
    )


def _side(side: str, given: Path | None, served: ServedModels) -> Path:
    flag = FLAGS[side]
    named: Path | None = getattr(served, side)
    if given is not None:
        if named is not None and named.is_dir() and Path(given).resolve() != named.resolve():
            _same_model(side, Path(given), named)
        return Path(given)
    if named is None:
        raise UserError(
            f"{served.source} names no {side} folder ({NAMED_BY[side]}); pass {flag} DIR"
        )
    if not named.is_dir():
        raise UserError(
            f"the spec's service loads the {side} {named}, which is not a folder on this "
            f"machine; pass {flag} DIR (a copy of it) to trace it here"
        )
    return named


def _same_model(side: str, given: Path, named: Path) -> None:
    """A UserError unless `given` holds the model the service loads (by fingerprint)."""
    try:
        mine, theirs = model_fingerprint(given), model_fingerprint(named)
    except UnreadableFolder as exc:
        raise UserError(f"{FLAGS[side]}: {exc}") from None
    if mine.digest != theirs.digest:
        raise UserError(
            f"{FLAGS[side]} {mine.describe()} is not the {side} the spec's service loads, "
            f"{theirs.describe()}; drop {FLAGS[side]} to trace the served one"
        )


__all__ = ["TraceModels", "trace_models"]
