"""A model folder's fingerprint in seconds, whatever its size, without torch.

    fingerprint = model_fingerprint(Path("/models/Kimi-K2-Instruct"))
    fingerprint.digest            # "3f9c..." (sha256 hex), identical for identical folders
    fingerprint.short()           # "3f9c0a1b2c3d"

What it hashes, file by file, in name order:
  - the folder's small description files whole: config.json, generation_config.json,
    the tokenizer's files (tokenizer.json, tokenizer_config.json, tokenizer.model,
    vocab/merges, special tokens) and every weight index (*.index.json);
  - every weight file's name and size; for a safetensors shard its header (the JSON
    that names every tensor, its dtype, shape and byte range) and three 64 KiB samples
    of its data (first, middle, last); for other weight files the same samples.

So a re-saved, re-quantized, re-sharded, truncated or retyped checkpoint, or one
whose config or tokenizer changed, has another fingerprint; two copies of one
folder have the same one. A shard edited in place to other values of the same
dtypes and shapes is caught only where the samples fall: the full sha256 of the
weights (`ddtune.server.identity.weights_sha256`, what `ddtune serve` reports)
reads every byte, minutes per hundred GB; this reads a few MB, well under a
second for a checkpoint of hundreds of GB (docs/benchmarks.md "Traces at scale").
"""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

DESCRIPTION_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "tiktoken.model",
    "special_tokens_map.json",
    "vocab.json",
    "vocab.txt",
    "merges.txt",
    "added_tokens.json",
    "chat_template.jinja",
)
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
SAMPLE_BYTES = 64 * 1024
MAX_HEADER_BYTES = 100 * 1024 * 1024  # safetensors' own limit on its JSON header


@dataclass(frozen=True)
class Fingerprint:
    """A model folder's fingerprint: the digest and what went into it (for messages)."""

    folder: str
    digest: str
    weight_files: int
    weight_bytes: int

    def short(self) -> str:
        return self.digest[:12]

    def describe(self) -> str:
        """`/models/x (fingerprint 3f9c0a1b2c3d, 163 weight files, 548.0 GB)`."""
        return (
            f"{self.folder} (fingerprint {self.short()}, {self.weight_files} weight file(s), "
            f"{self.weight_bytes / 1e9:.1f} GB)"
        )


class UnreadableFolder(Exception):
    """The folder does not exist here or holds neither a config nor weights."""


def model_fingerprint(folder: Path) -> Fingerprint:
    """The fingerprint of one model folder (UnreadableFolder: nothing to fingerprint here)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UnreadableFolder(f"{folder} is not a folder on this machine")
    files = sorted(p for p in folder.iterdir() if p.is_file())
    described = [p for p in files if _is_description(p.name)]
    weights = [p for p in files if p.name.endswith(WEIGHT_SUFFIXES)]
    if not described and not weights:
        raise UnreadableFolder(f"{folder} holds no config.json and no weight files")
    digest = hashlib.sha256(b"ddtune-model-fingerprint-1\n")
    for path in described:
        digest.update(f"file {path.name} {path.stat().st_size}\n".encode())
        digest.update(path.read_bytes())
    total = 0
    for path in weights:
        size = path.stat().st_size
        total += size
        digest.update(f"weights {path.name} {size}\n".encode())
        with path.open("rb") as handle:
            start = (
                _safetensors_header(handle, size, digest) if path.suffix == ".safetensors" else 0
            )
            for offset, length in _samples(start, size):
                handle.seek(offset)
                digest.update(handle.read(length))
    return Fingerprint(str(folder), digest.hexdigest(), len(weights), total)


def _is_description(name: str) -> bool:
    return name in DESCRIPTION_FILES or name.endswith(".index.json")


def _safetensors_header(handle: BinaryIO, size: int, digest: Any) -> int:
    """Hash the shard's header (8-byte length, then JSON); where its data starts."""
    head = handle.read(8)
    if len(head) < 8:
        digest.update(b"short-file")
        return size
    (length,) = struct.unpack("<Q", head)
    if length > min(MAX_HEADER_BYTES, size - 8):
        digest.update(b"bad-header" + head)
        return 8
    digest.update(head + handle.read(length))
    return 8 + length


def _samples(start: int, size: int) -> list[tuple[int, int]]:
    """(offset, length): the first, middle and last SAMPLE_BYTES of [start, size), or all of
    it when it is shorter than three samples."""
    span = size - start
    if span <= 0:
        return []
    if span <= 3 * SAMPLE_BYTES:
        return [(start, span)]
    middle = start + (span - SAMPLE_BYTES) // 2
    return [(start, SAMPLE_BYTES), (middle, SAMPLE_BYTES), (size - SAMPLE_BYTES, SAMPLE_BYTES)]


def config_of(folder: Path) -> dict[str, Any] | None:
    """The folder's config.json (None when it has none or it does not parse)."""
    path = Path(folder) / "config.json"
    try:
        loaded = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None


__all__ = ["Fingerprint", "UnreadableFolder", "config_of", "model_fingerprint"]
