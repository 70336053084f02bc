"""Config parsing: both families, the DFlash drafter fields, and clear errors."""

from __future__ import annotations

import json

import pytest

from ddtune.ddtree.models.config import DrafterConfig, ModelConfig
from ddtune.ddtree.testing import random_configs
from ddtune.errors import UserError


def test_round_trip_through_hf_dict():
    target, drafter = random_configs(
        family="llama",
        rope_scaling={
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 64,
        },
    )
    assert ModelConfig.from_dict(target.to_hf_dict()) == target
    assert DrafterConfig.from_dict(drafter.to_hf_dict()) == drafter


def test_drafter_dict_has_public_dflash_fields():
    _, drafter = random_configs(block_size=8)
    d = drafter.to_hf_dict()
    assert d["architectures"] == ["DFlashDraftModel"]
    assert d["block_size"] == 8
    assert set(d["dflash_config"]) == {"target_layer_ids", "mask_token_id"}


def test_v5_rope_parameters_are_read():
    target, _ = random_configs(family="qwen3")
    d = target.to_hf_dict()
    d.pop("rope_theta")
    d["rope_parameters"] = {"rope_type": "default", "rope_theta": 5e5}
    assert ModelConfig.from_dict(d).rope_theta == 5e5


def test_head_dim_defaults_to_hidden_over_heads():
    target, _ = random_configs(family="llama")
    d = target.to_hf_dict()
    d.pop("head_dim")
    assert ModelConfig.from_dict(d).head_dim == 64 // 4


@pytest.mark.parametrize(
    "change, words",
    [
        ({"architectures": ["GPT2LMHeadModel"]}, "architectures"),
        ({"hidden_size": None}, "hidden_size"),
        ({"hidden_act": "gelu"}, "hidden_act"),
        ({"rope_scaling": {"rope_type": "yarn", "factor": 2.0}}, "yarn"),
        ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, "low_freq_factor"),
        ({"use_sliding_window": True}, "use_sliding_window"),
        ({"layer_types": ["full_attention", "sliding_attention"]}, "layer_types"),
    ],
)
def test_bad_target_config_names_file_and_field(tmp_path, change, words):
    target, _ = random_configs(family="llama")
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**target.to_hf_dict(), **change}))
    with pytest.raises(UserError, match=words) as info:
        ModelConfig.from_file(path)
    assert str(path) in str(info.value)


def test_drafter_without_dflash_config_is_an_error(tmp_path):
    _, drafter = random_configs()
    d = drafter.to_hf_dict()
    del d["dflash_config"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(d))
    with pytest.raises(UserError, match="dflash_config"):
        DrafterConfig.from_file(path)


def test_missing_config_file_is_named(tmp_path):
    with pytest.raises(UserError, match="config.json"):
        ModelConfig.from_file(tmp_path / "config.json")


def test_drafter_must_fit_target():
    target, drafter = random_configs(num_layers=3)
    drafter.target_layer_ids = [0, 5]
    with pytest.raises(UserError, match="target_layer_ids"):
        drafter.check_target(target)
