"""docs/spec.md is generated from the spec's models and kept current: regenerated and compared."""

from __future__ import annotations

from pathlib import Path

from ddtune.services.spec import ServiceSpec
from ddtune.sweep.reference import DOC, main, missing, reference, sections
from ddtune.sweep.spec.schema import SpecDocument

REPO = Path(__file__).parents[2]


def test_docs_spec_md_is_the_generated_reference():
    assert DOC == REPO / "docs" / "spec.md"
    assert DOC.read_text() == reference(), (
        "docs/spec.md is stale: run `python -m ddtune.sweep.reference`"
    )


def test_every_key_says_what_it_means():
    assert missing() == [], "give these keys a Field description or a comment beside them"


def test_every_table_and_key_of_the_models_is_listed():
    page = reference()
    for name in SpecDocument.model_fields:
        assert f"`[{name}]`" in page or f"`[[{name}]]`" in page
    service = next(s for s in sections() if s.model is ServiceSpec)
    assert [k.path for k in service.keys] == list(ServiceSpec.model_fields)
    row = next(k for k in service.keys if k.path == "engine_check")
    assert (row.type, row.default) == ("bool", "`true`")
    assert "engine's own parser" in row.meaning  # the comment beside the field


def test_check_mode_refuses_a_stale_page(tmp_path, capsys):
    page = tmp_path / "spec.md"
    assert main(["--out", str(page)]) == 0
    assert main(["--check", "--out", str(page)]) == 0
    page.write_text(page.read_text() + "edited\n")
    assert main(["--check", "--out", str(page)]) == 1
    assert "stale" in capsys.readouterr().err
