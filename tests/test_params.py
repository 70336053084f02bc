"""The parameter vocabulary: the DDTree knobs ride in `DecodeParams` without changing what
configs without knobs are (their wire form, label and hash stay as they were)."""

from __future__ import annotations

import pytest

from ddtune.errors import UserError
from ddtune.params import KNOB_KEYS, DecodeParams, knob_to_text, parse_knob


def test_a_config_without_knobs_keeps_its_wire_form_label_and_hash():
    params = DecodeParams("ddtree", 16, 4, None)
    assert params.to_wire() == {"mode": "ddtree", "budget": 16, "topk": 4, "window": "none"}
    assert params.label() == "ddtree b16 k4 wnone"
    assert params.hash() == "8b69823d52f2fc67"  # the hash stores recorded before the knobs


def test_knobs_round_trip_and_show_in_label_and_hash():
    wire = {"mode": "ddtree", "budget": 8, "topk": 4, "window": 64}
    params = DecodeParams.from_wire({**wire, "depth_bonus": 0, "rank_probe": True})
    assert params.depth_bonus == 0.0 and isinstance(params.depth_bonus, float)  # TOML's `0`
    assert params.to_wire() == {**wire, "depth_bonus": 0.0, "rank_probe": True}
    assert DecodeParams.from_wire(params.to_wire()) == params
    assert params.label() == "ddtree b8 k4 w64 bonus0 probe"
    assert params.hash() != DecodeParams.from_wire(wire).hash()
    assert params.knobs() == {"depth_bonus": 0.0, "rank_probe": True}


def test_knobs_shape_ddtree_trees_only():
    for mode in ("ar", "dflash"):
        canonical = DecodeParams.from_wire({"mode": mode, "depth_bonus": 0.5}).canonical()
        assert canonical.knobs() == {} and "bonus" not in canonical.label()


def test_placeholders_render_a_knob_that_is_not_set_as_default():
    values = DecodeParams("ddtree", 8, 4, None, rank_probe=False).placeholder_values()
    assert (values["depth_bonus"], values["rank_probe"], values["window"]) == (
        "default",
        "false",
        "none",
    )
    for key in KNOB_KEYS:
        assert parse_knob(key, values[key]) == getattr(
            DecodeParams("ddtree", rank_probe=False), key
        )


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        ({"depth_bonus": "x"}, "depth_bonus: must be a valid number"),
        ({"depth_bonus": float("inf")}, "depth_bonus: must be a finite number"),
        ({"rank_probe": 1}, "rank_probe: must be a valid boolean"),
        ({"depth_bonus": 0.2, "rank_probes": True}, "unknown decoding parameter rank_probes"),
    ],
)
def test_bad_knobs_are_user_errors(wire, message):
    with pytest.raises(UserError, match=message):
        DecodeParams.from_wire(wire)


def test_the_launchers_text_form():
    assert [knob_to_text(v) for v in (None, True, False, -0.25)] == [
        "default",
        "true",
        "false",
        "-0.25",
    ]
    assert parse_knob("rank_probe", "off") is False and parse_knob("depth_bonus", "1e-1") == 0.1
    for key, text in (("rank_probe", "maybe"), ("depth_bonus", "nan")):
        with pytest.raises(UserError, match=key):
            parse_knob(key, text)
