"""ServeConfig: TOML + flags, strict keys, flags win."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddtune.errors import UserError
from ddtune.params import DecodeParams
from ddtune.server.config import ServeConfig


def test_toml_then_flags(tmp_path: Path) -> None:
    path = tmp_path / "serve.toml"
    path.write_text('mode = "dflash"\nwindow = "none"\nbudget = 8\nport = 0\nmax-queue = 3\n')
    config = ServeConfig.from_toml(path)
    assert config.params == DecodeParams("dflash", 8, 4, None)
    assert (config.port, config.max_queue) == (0, 3)
    config = config.with_overrides(
        {"mode": "ddtree", "window": "32", "grace_seconds": 2, "port": None}
    )
    assert config.params == DecodeParams("ddtree", 8, 4, 32)
    assert (config.port, config.grace_seconds) == (0, 2.0)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("mdoe = 'ar'\n", "mdoe"),
        ("budget = -1\n", "budget"),
        ("window = 'wide'\n", "window"),
        ("port = 'eighty'\n", "port"),
        ("max_queue = 0\n", "max_queue"),
        ("port = [\n", "not valid TOML"),
    ],
)
def test_bad_settings_are_named(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "serve.toml"
    path.write_text(text)
    with pytest.raises(UserError, match=needle):
        ServeConfig.from_toml(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not found"):
        ServeConfig.from_toml(tmp_path / "nope.toml")


def test_example_file_lists_the_defaults() -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "serve.toml"
    assert ServeConfig.from_toml(example) == ServeConfig()
