"""The docs stay a map a reader can follow: every section a reference names exists, the map stays short.

A reference is `docs/<name>.md "Section"` (or `docs/<name>.md ("Section")`), in a
docstring, a comment or a doc, possibly broken over two lines. It holds when
`docs/<name>.md` exists and one of its headings starts with "Section" (headings
carry a module or key in parentheses after their name: `## Engine (`ddtune.ddtree`)`).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
MAP_LIMIT = 300
# docs/X.md, then blanks, a comment marker or an opening parenthesis, then "Section"
REFERENCE = re.compile(
    r'docs/([\w-]+\.md)\)?[ \t]*\n?[ \t]*(?:#[ \t]*)?\(?"([^"\n]+(?:\n[ \t]*(?:#[ \t]*)?[^"\n]+)?)"'
)
LINE_BREAK = re.compile(r"[ \t]*\n[ \t]*(?:#[ \t]*)?")
HEADING = re.compile(r"^#{1,6} (.+)$", re.M)
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def searched_files() -> list[Path]:
    files = [*(ROOT / "src").rglob("*.py"), *(ROOT / "tests").rglob("*.py"), *DOCS.glob("*.md")]
    files += [
        ROOT / "README.md",
        *(ROOT / "benchmarks").glob("*.py"),
        *(ROOT / "tools").glob("*.py"),
    ]
    return sorted(f for f in files if f.is_file() and f != Path(__file__).resolve())


def headings(doc: Path) -> list[str]:
    text = FENCE.sub("", doc.read_text(encoding="utf-8"))
    return [h.strip() for h in HEADING.findall(text)]


def references(text: str) -> list[tuple[str, str]]:
    return [(m.group(1), LINE_BREAK.sub(" ", m.group(2))) for m in REFERENCE.finditer(text)]


def broken_references(files: list[Path], root: Path) -> list[str]:
    docs = root / "docs"
    broken = []
    for path in files:
        for doc_name, section in references(path.read_text(encoding="utf-8")):
            doc = docs / doc_name
            where = f"{path.relative_to(root)}: docs/{doc_name} {section!r}"
            if not doc.is_file():
                broken.append(f"{where}: no such doc")
            elif not any(h.startswith(section) for h in headings(doc)):
                broken.append(f"{where}: no heading starts with it")
    return broken


def test_every_section_reference_names_a_doc_and_a_heading_that_exist() -> None:
    assert broken_references(searched_files(), ROOT) == []


def test_the_reference_pattern_reads_every_written_form() -> None:
    text = (
        'see docs/sweeps.md "Scale out". Figures: docs/benchmarks.md ("Restart-bound races").\n'
        '    # and the rules (docs/report.md\n    # "Decision rules") apply\n'
        'the live part (docs/sweeps.md "Live\n    # report") and\n'
        'no section here: docs/load.md, "not a reference" in another sentence'
    )
    assert references(text) == [
        ("sweeps.md", "Scale out"),
        ("benchmarks.md", "Restart-bound races"),
        ("report.md", "Decision rules"),
        ("sweeps.md", "Live report"),
    ]


def test_a_missing_doc_or_heading_is_reported(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "engine.md").write_text(
        "# Title\n\n## Engine (`ddtune.ddtree`)\n\n```\n# Not a heading\n```\n"
    )
    source = tmp_path / "module.py"
    source.write_text(
        '"""docs/engine.md "Engine"; docs/engine.md "Not a heading"; docs/engine.md "Train"; docs/gone.md "X"."""'
    )
    assert broken_references([source], tmp_path) == [
        "module.py: docs/engine.md 'Not a heading': no heading starts with it",
        "module.py: docs/engine.md 'Train': no heading starts with it",
        "module.py: docs/gone.md 'X': no such doc",
    ]


def test_the_map_stays_short() -> None:
    lines = (DOCS / "architecture.md").read_text(encoding="utf-8").count("\n")
    assert lines <= MAP_LIMIT, (
        f"docs/architecture.md has {lines} lines; put details in a topic doc or a docstring"
    )


def top_level_names() -> list[str]:
    package = ROOT / "src" / "ddtune"
    packages = [p.name for p in package.iterdir() if (p / "__init__.py").is_file()]
    modules = [p.stem for p in package.glob("*.py") if p.stem != "__init__"]
    return sorted([*packages, *modules])


@pytest.mark.parametrize(
    "where",
    ["docs/architecture.md", "src/ddtune/__init__.py"],
)
def test_the_map_names_every_package(where: str) -> None:
    text = (ROOT / where).read_text(encoding="utf-8")
    missing = [name for name in top_level_names() if f"`{name}`" not in text]
    assert missing == [], f"{where} does not name {missing}"


def test_the_map_states_the_layer_contract_of_pyproject() -> None:
    with (ROOT / "pyproject.toml").open("rb") as f:
        contracts = tomllib.load(f)["tool"]["importlinter"]["contracts"]
    layers = [layer.replace("ddtune.", "") for layer in contracts[0]["layers"]]
    assert len(layers) > 5
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    graph = re.search(r"```mermaid\n(.*?)```", text, re.S)
    assert graph is not None
    for layer in layers:
        names = [n.strip() for n in layer.split("|")]
        assert all(name in graph.group(1) for name in names), (
            f"layer {layer!r} missing from the map's diagram"
        )
