"""A trace speaks for a sweep only if it was recorded with the models the sweep's service loads.

    notes = bind_trace(trace.header, served, trace.folder)   # UserError: other models

`served` is what the service's launch command (or unit) names
(`services.models.served_models`). Each side (target, drafter) is compared by
fingerprint (`ddtune.fingerprint`: config, tokenizer, index, shard headers;
seconds for hundreds of GB):

  - a folder readable here with another fingerprint: refused, naming both
    (`sweep.trace`, exit 2, before anything is stopped);
  - a folder not readable here (the service runs on another machine): said so
    in a note; the sweep then checks the model the service reports at its
    first READY (`forecast.identity_mismatch`) and races everything if it is
    not the traced one;
  - a trace recorded before fingerprints: its weights' sha256 where it has one.
"""

from __future__ import annotations

from pathlib import Path

from ddtune.errors import UserError
from ddtune.fingerprint import UnreadableFolder, model_fingerprint
from ddtune.services.models import ServedModels
from ddtune.trace.files import ModelInfo, TraceHeader

SIDES = ("target", "drafter")


def bind_trace(header: TraceHeader, served: ServedModels, folder: Path | str) -> list[str]:
    """Notes on what could not be checked here; a UserError when a model differs."""
    notes = []
    for side in SIDES:
        traced: ModelInfo = getattr(header, side)
        path: Path | None = getattr(served, side)
        if path is None:
            notes.append(
                f"{served.source} names no {side} folder; the trace's {side} {traced.path} "
                "is checked against what the service reports at its first READY"
            )
            continue
        note = _bind_side(side, traced, path, folder)
        if note is not None:
            notes.append(note)
    return notes


def _bind_side(side: str, traced: ModelInfo, path: Path, folder: Path | str) -> str | None:
    try:
        found = model_fingerprint(path)
    except UnreadableFolder as exc:
        return (
            f"the service's {side} cannot be read here ({exc}): the trace's {side} "
            f"{traced.path} is checked against the model the service reports at its first READY"
        )
    if traced.fingerprint is not None:
        if traced.fingerprint == found.digest:
            return None
        recorded = f"{traced.path} (fingerprint {traced.fingerprint[:12]})"
    else:
        from ddtune.server.identity import weights_sha256

        if traced.sha256 is None or traced.sha256 == weights_sha256(path):
            return None
        recorded = f"{traced.path} (weights sha256 {traced.sha256[:12]})"
    raise UserError(
        f"sweep.trace: the trace {folder} was recorded with the {side} {recorded}, but the "
        f"service loads {found.describe()}; record the trace of the served models: "
        f"ddtune trace record --spec SPEC --out {folder} --fresh",
        key="sweep.trace",
    )


def traced_identity(header: TraceHeader) -> dict[str, str | None]:
    """What a forecast keeps to check the served models at READY (`forecast.weights`)."""
    return {
        "target": header.target.sha256,
        "drafter": header.drafter.sha256,
        "target_path": header.target.path,
        "drafter_path": header.drafter.path,
    }


__all__ = ["bind_trace", "traced_identity"]
