"""Who this server is: a fresh instance id per process, weight fingerprints, versions.

The readiness protocol trusts `/server_info` only because these values cannot
be stale: `instance_id` is a new uuid4 at every start, and the weight hashes
are computed from the files actually loaded.

See docs/server.md "Server".
"""

from __future__ import annotations

import hashlib
import os
import platform
import time
import uuid
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ddtune.params import DecodeParams

WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.pt")
VERSIONED_PACKAGES = ("ddtune", "torch", "fastapi", "uvicorn", "prometheus-client")


@dataclass
class Identity:
    instance_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    pid: int = field(default_factory=os.getpid)
    started_at: float = field(default_factory=time.time)  # unix seconds
    ready_at: float | None = None


def system_fingerprint(params: DecodeParams | None, generation: int) -> str:
    """What every response served under config `generation` carries as `system_fingerprint`.

    The config reply names it too, so a client that switched configs between two
    requests checks that the next response was decoded under the config it set."""
    return "" if params is None else f"ddtune-{params.hash()}-g{generation}"


def weights_sha256(model_dir: Path | None) -> str | None:
    """Fingerprint of a folder's weight files.

    One file: its plain sha256 (what `sha256sum model.safetensors` prints).
    Several (sharded): the sha256 of the `sha256sum`-style listing
    "<hex>  <name>\\n" of every file, sorted by name.
    """
    if model_dir is None:
        return None
    files = sorted({p for pattern in WEIGHT_PATTERNS for p in Path(model_dir).glob(pattern)})
    if not files:
        return None
    digests = [(file_sha256(path), path.name) for path in files]
    if len(digests) == 1:
        return digests[0][0]
    listing = "".join(f"{hex_}  {name}\n" for hex_, name in digests)
    return hashlib.sha256(listing.encode()).hexdigest()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in VERSIONED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "absent"
    return out
