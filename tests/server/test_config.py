"""ServeConfig: TOML + flags, strict keys naming the key, flags win."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddtune.cli import build_parser
from ddtune.cli.serve import flag_settings
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
        {"mode": "ddtree", "window": 32, "grace_seconds": 2, "port": None}
    )
    assert config.params == DecodeParams("ddtree", 8, 4, 32)
    assert (config.port, config.grace_seconds) == (0, 2.0)
    assert config.with_overrides({"window": "none"}).params.window is None


def test_flags_are_read_in_wire_form(tmp_path: Path) -> None:
    parser = build_parser()
    args = parser.parse_args(
        ["serve", "--window", "32", "--budget", "3", "--target", "~/m", "--max-queue", "2"]
    )
    config = ServeConfig().with_overrides(flag_settings(args))
    assert config.params == DecodeParams("ddtree", 3, 4, 32)
    assert (config.target, config.max_queue) == (Path("~/m").expanduser(), 2)
    none = flag_settings(parser.parse_args(["serve", "--window", "NONE"]))
    assert ServeConfig(params=DecodeParams(window=8)).with_overrides(none).params.window is None


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("mdoe = 'ar'\n", "mdoe"),
        ("budget = -1\n", "budget"),
        ("window = 'wide'\n", "window"),
        ("port = 'eighty'\n", "port"),
        ("port = 70000\n", "port"),
        ("max-queue = 0\n", "max_queue"),
        ("grace_seconds = true\n", "grace_seconds"),
        ("target = 3\n", "target"),
        ("params = {}\n", "params"),
    ],
)
def test_bad_settings_are_named(tmp_path: Path, text: str, key: str) -> None:
    path = tmp_path / "serve.toml"
    path.write_text(text)
    with pytest.raises(UserError, match=key) as info:
        ServeConfig.from_toml(path)
    assert info.value.key == key
    assert str(path) in str(info.value)


def test_invalid_toml(tmp_path: Path) -> None:
    path = tmp_path / "serve.toml"
    path.write_text("port = [\n")
    with pytest.raises(UserError, match="not valid TOML"):
        ServeConfig.from_toml(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not found"):
        ServeConfig.from_toml(tmp_path / "nope.toml")


def test_example_file_lists_the_defaults() -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "serve.toml"
    assert ServeConfig.from_toml(example) == ServeConfig()
