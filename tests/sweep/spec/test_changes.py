"""Which spec changes a sweep resumes across (how it runs) and which it refuses, naming the
key (what it measures)."""

from __future__ import annotations

from ddtune.sweep.spec.changes import measured_change

SPEC = """
[sweep]
name = "s"
repeats = 2
[[configs]]
mode = "ddtree"
budget = 8
[service]
command = ["serve", "--budget", "{budget}"]
[service.timeouts]
start = 600
[bench.short]
prompt_tokens = 100
[retry]
attempts = 2
"""


def test_run_settings_may_change():
    changed = (
        SPEC.replace("repeats = 2", "repeats = 4\nbreaker = 5")
        .replace("start = 600", "start = 1200\nhealth = 900")
        .replace("attempts = 2", "attempts = 3")
        .replace("[service.timeouts]", 'engine_check = false\nmodel = "m"\n[service.timeouts]')
    )
    assert measured_change(SPEC, changed) is None


def test_what_is_measured_is_named():
    cases = {
        "budget = 8": ("budget = 16", "configs"),
        "prompt_tokens = 100": ("prompt_tokens = 200", "bench.short.prompt_tokens"),
        '"serve", ': ('"serve", "--tp", "8", ', "service.command"),
    }
    for old, (new, key) in cases.items():
        change = measured_change(SPEC, SPEC.replace(old, new))
        assert change is not None and change.key == key
        assert f"different {key}" in change.message("s.sqlite", "s")


def test_the_old_service_key_names_compare_as_the_new_ones():
    old = SPEC.replace("[service]\n", '[service]\nkind = "process"\nprofile = "ddtune"\n')
    new = SPEC.replace("[service]\n", '[service]\ncontrol = "process"\nengine = "ddtune"\n')
    assert measured_change(old, new) is None
    assert measured_change(new, old) is None
    hot = measured_change(old, new.replace('control = "process"', 'control = "hot"'))
    assert hot is not None and hot.key == "service.control"
    vllm = measured_change(old, new.replace('engine = "ddtune"', 'engine = "vllm"'))
    assert vllm is not None and vllm.key == "service.engine"
