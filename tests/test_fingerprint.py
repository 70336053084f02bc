"""Model fingerprints: fast, identical for identical folders, different when a model changes."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest

from ddtune.fingerprint import UnreadableFolder, config_of, model_fingerprint


def shard(path: Path, tensors: dict[str, tuple[str, list[int]]], data_bytes: int) -> None:
    """A safetensors file: a real header naming `tensors`, then `data_bytes` of data (sparse)."""
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        size = 2 * max(1, int(__import__("math").prod(shape)))
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header).encode()
    with path.open("wb") as out:
        out.write(struct.pack("<Q", len(text)) + text)
    with path.open("r+b") as out:
        out.truncate(8 + len(text) + data_bytes)


def folder(tmp_path: Path, name: str = "m") -> Path:
    model = tmp_path / name
    model.mkdir()
    (model / "config.json").write_text('{"hidden_size": 64}')
    (model / "tokenizer.json").write_text('{"model": {}}')
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors"}}
    (model / "model.safetensors.index.json").write_text(json.dumps(index))
    shard(model / "model-00001-of-00002.safetensors", {"a": ("BF16", [4, 4])}, 1 << 20)
    shard(model / "model-00002-of-00002.safetensors", {"b": ("BF16", [4])}, 1 << 20)
    return model


def test_identical_folders_share_a_fingerprint(tmp_path):
    a = folder(tmp_path, "a")
    b = tmp_path / "b"
    shutil.copytree(a, b)
    assert model_fingerprint(a).digest == model_fingerprint(b).digest
    fp = model_fingerprint(a)
    assert fp.weight_files == 2 and fp.weight_bytes > 2 << 20
    assert fp.short() in fp.describe() and str(a) in fp.describe()


@pytest.mark.parametrize(
    "change",
    [
        lambda m: (m / "config.json").write_text('{"hidden_size": 65}'),
        lambda m: (m / "tokenizer.json").write_text('{"model": {"x": 1}}'),
        lambda m: (m / "model.safetensors.index.json").write_text("{}"),
        lambda m: shard(m / "model-00002-of-00002.safetensors", {"b": ("F32", [4])}, 1 << 20),
        lambda m: shard(m / "model-00002-of-00002.safetensors", {"b": ("BF16", [4])}, 2 << 20),
        lambda m: (m / "model-00002-of-00002.safetensors").rename(m / "model-3.safetensors"),
        lambda m: _poke(m / "model-00001-of-00002.safetensors", offset=-10),
        lambda m: _poke(m / "model-00001-of-00002.safetensors", offset=200),
    ],
    ids=["config", "tokenizer", "index", "dtype", "size", "renamed", "last-bytes", "first-bytes"],
)
def test_a_changed_model_has_another_fingerprint(tmp_path, change):
    model = folder(tmp_path)
    before = model_fingerprint(model).digest
    change(model)
    assert model_fingerprint(model).digest != before


def _poke(path: Path, offset: int) -> None:
    with path.open("r+b") as handle:
        handle.seek(offset, 2 if offset < 0 else 0)
        handle.write(b"\x01")


def test_a_folder_that_cannot_be_read_says_so(tmp_path):
    with pytest.raises(UnreadableFolder, match="not a folder"):
        model_fingerprint(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UnreadableFolder, match="no config.json"):
        model_fingerprint(tmp_path / "empty")


def test_a_broken_header_still_fingerprints(tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"\xff" * 100)  # a length far past the file
    (model / "other.safetensors").write_bytes(b"abc")  # shorter than the length field
    assert len(model_fingerprint(model).digest) == 64


def test_config_of(tmp_path):
    model = folder(tmp_path)
    assert config_of(model) == {"hidden_size": 64}
    assert config_of(tmp_path) is None
