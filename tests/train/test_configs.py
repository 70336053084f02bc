"""Training settings: the CLI flags come from the config fields, errors name the field."""

from __future__ import annotations

import argparse
from dataclasses import fields
from pathlib import Path

import pytest
from pydantic import ValidationError

from ddtune.cli import build_parser, main
from ddtune.errors import UserError
from ddtune.train.configs import DrafterTrainConfig, TargetTrainConfig, add_arguments, from_args

FOLDERS = {
    TargetTrainConfig: ["--tokenizer", "tok", "--out", "o", "--checkpoint-dir", "c"],
    DrafterTrainConfig: ["--target", "t", "--out", "o", "--checkpoint-dir", "c"],
}


@pytest.mark.parametrize("cls", [TargetTrainConfig, DrafterTrainConfig])
def test_flags_default_to_the_field_defaults(cls) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser, cls)
    from_flags = from_args(cls, parser.parse_args(FOLDERS[cls]))
    direct = cls(*[FOLDERS[cls][i] for i in (1, 3, 5)])
    assert from_flags == direct


def test_flags_set_fields_and_the_train_command_has_them() -> None:
    args = build_parser().parse_args(
        ["train", "drafter", *FOLDERS[DrafterTrainConfig], "--block-size", "4", "--gamma", "2.5"]
    )
    cfg = from_args(DrafterTrainConfig, args)
    assert (cfg.block_size, cfg.gamma, cfg.stop_at_eos, args.resume) == (4, 2.5, False, False)
    args = build_parser().parse_args(
        ["train", "target", *FOLDERS[TargetTrainConfig], "--init-from", "x", "--resume"]
    )
    cfg = from_args(TargetTrainConfig, args)
    assert (cfg.tokenizer_dir, cfg.init_from, args.resume) == ("tok", "x", True)


@pytest.mark.parametrize(
    "cfg, count",
    [(TargetTrainConfig("tok", "o", "c"), 15), (DrafterTrainConfig("t", "o", "c"), 13)],
)
def test_run_settings_are_what_changes_the_result(cfg, count) -> None:
    """A resume compares every setting but the folders, checkpoint_every and threads
    (the same keys as the checkpoints written before the settings moved to configs.py)."""
    other = {"tokenizer_dir", "target_dir", "out_dir", "checkpoint_dir", "checkpoint_every"}
    expected = {f.name for f in fields(cfg)} - other - {"threads"}
    assert set(cfg.run_dict()) == expected and len(expected) == count
    assert cfg.run_dict() == {k: getattr(cfg, k) for k in expected}


def test_bad_values_are_user_errors_naming_the_field(tmp_path: Path, capsys) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser, TargetTrainConfig)
    for flags, key in [(["--lr", "0"], "lr"), (["--task-share", "1.5"], "task_share")]:
        with pytest.raises(UserError) as caught:
            from_args(TargetTrainConfig, parser.parse_args([*FOLDERS[TargetTrainConfig], *flags]))
        assert caught.value.key == key
    with pytest.raises(ValidationError):  # direct construction: pydantic's own error
        DrafterTrainConfig("t", "o", "c", anchors=0)
    code = main(["train", "drafter", *FOLDERS[DrafterTrainConfig], "--anchors", "0"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "anchors" in err
