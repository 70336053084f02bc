"""Issue 37's depth check: a config that drafts more tokens a round than its drafter's block
allows is refused before the first stop (`sweep plan`/`sweep run` exit 2, one line naming the
setting and the fix), and the FAKE service (which counts its starts in $FAKE_COUNT_STARTS) is
never started. Where the drafter's block cannot be read here, nothing is said."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddtune.cli import main


def drafter(tmp_path: Path, block: int | None) -> Path:
    """A drafter folder whose config.json holds `block_size` (None: no config.json)."""
    folder = tmp_path / "drafter"
    folder.mkdir(exist_ok=True)
    if block is not None:
        (folder / "config.json").write_text(json.dumps({"block_size": block}))
    return folder


def spec(tmp_path, writer, port, engine: str, configs: str, args: str, defaults: str = ""):
    ledger = tmp_path / "starts.txt"
    service = f'engine = "{engine}"\nenv = {{ FAKE_COUNT_STARTS = "{ledger}" }}'
    path = writer(tmp_path, "depth", configs, port, service=service, args=args, defaults=defaults)
    return path, ledger


def vllm_method(block_size: int, folder: Path) -> dict:
    configs = f"""
        [[configs]]
        method = "dflash"
        block_size = {block_size}
        drafter = "{folder}"
    """
    return {"engine": "vllm", "configs": configs, "args": '"{method_args}"'}


def vllm_var(tokens: int, folder: Path) -> dict:
    """A hand-written template: num_speculative_tokens as the variable K inside the JSON."""
    body = f'{{{{"method":"dflash","model":"{folder}","num_speculative_tokens":{{K}}}}}}'
    configs = f'[[configs]]\nmode = "ar"\nvars = {{ K = {tokens} }}'
    return {
        "engine": "vllm",
        "configs": configs,
        "args": f'"--speculative-config", {json.dumps(body)}',
        "defaults": "K = 1",
    }


def sglang_var(tokens: int, folder: Path) -> dict:
    configs = f'[[configs]]\nmode = "ar"\nvars = {{ draft = {tokens} }}'
    args = (
        '"--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", '
        f'"{folder}", "--speculative-num-draft-tokens", "{{draft}}"'
    )
    return {"engine": "sglang", "configs": configs, "args": args, "defaults": "draft = 1"}


CASES = {
    # case: (its spec, the first value past a block of 16, what the refusal names)
    "vllm method dflash": (vllm_method, 17, "use block_size <= 16"),
    "vllm num_speculative_tokens var": (vllm_var, 16, "use num_speculative_tokens <= 15"),
    "sglang DFLASH draft tokens var": (
        sglang_var,
        17,
        "use --speculative-num-draft-tokens <= 16",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("command", ["plan", "run"])
def test_a_round_deeper_than_the_drafters_block_is_refused_before_any_start(
    case, command, tmp_path, fake_spec_writer, port, capsys
):
    make, deep, fix = CASES[case]
    path, ledger = spec(tmp_path, fake_spec_writer, port, **make(deep, drafter(tmp_path, 16)))
    store = tmp_path / "s" / "store.sqlite"
    flag = "--store"
    code = main(["sweep", command, str(path), flag, str(store)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert len(err) == 1 and fix in err[0] and "drafter's block allows (16 tokens" in err[0], err
    assert not ledger.exists(), "the service was started before the refusal"


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_round_within_the_block_or_an_unreadable_block_passes_the_check(
    case, tmp_path, fake_spec_writer, port, capsys
):
    from ddtune.sweep.checks.drafter_depth import check_depth, config_depth
    from ddtune.sweep.plan import read_spec

    make, deep, _ = CASES[case]
    within, _ = spec(tmp_path, fake_spec_writer, port, **make(deep - 1, drafter(tmp_path, 16)))
    loaded = read_spec(within)
    depth = config_depth(loaded.all_configs()[0][0], loaded.service)
    assert depth is not None and depth.drafted == 15  # read, and exactly the block's 15
    check_depth(loaded, tmp_path / "store.sqlite")
    (tmp_path / "drafter" / "config.json").unlink()  # the block cannot be read here
    unread, _ = spec(tmp_path, fake_spec_writer, port, **make(deep, drafter(tmp_path, None)))
    check_depth(read_spec(unread), tmp_path / "store.sqlite")


def test_topk_0_is_refused_before_any_start(tmp_path, fake_spec_writer, port, capsys):
    configs = '[[configs]]\nmode = "ddtree"\nbudget = 4\ntopk = 0\nwindow = "none"'
    path, ledger = spec(tmp_path, fake_spec_writer, port, "ddtune", configs, "")
    assert main(["sweep", "plan", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        len(err) == 1 and "configs.0.topk" in err[0] and "greater than or equal to 1" in err[0]
    ), err
    assert not ledger.exists()
