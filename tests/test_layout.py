"""The package layout: no import cycles, no private names across modules, small folders, faces.

The graph is `tools/import_graph.py` (the same report `make lint` prints); the
layer contract between packages is import-linter's (`lint-imports`).
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("import_graph", REPO / "tools" / "import_graph.py")
assert _spec is not None and _spec.loader is not None
import_graph = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(import_graph)

MAX_MODULES = 14  # per folder, __init__ included
NOT_MIRRORED = {"integration"}  # tests across packages (live engines, real clients)


def test_no_import_cycles_counting_faces_functions_and_type_checking():
    edges, _ = import_graph.graph()
    assert len(edges) > 150  # the graph saw the package
    assert import_graph.cycles(edges) == []


def test_the_cycle_finder_finds_a_cycle_through_a_face(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from pkg.sub.b import B\n")
    (package / "sub" / "b.py").write_text("from pkg.a import A\nB = 1\n")
    (package / "a.py").write_text("def f():\n    from pkg.sub.b import B\nA = 2\n")
    edges, private = import_graph.graph(tmp_path, package="pkg")
    assert import_graph.cycles(edges) == [["pkg.a", "pkg.sub", "pkg.sub.b"]]
    assert private == []


def test_a_type_only_import_that_closes_a_circle_is_a_cycle(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "db.py").write_text("from pkg.rows import read\n")
    (package / "rows.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.db import Store\n"
    )
    edges, _ = import_graph.graph(tmp_path, package="pkg")
    assert import_graph.cycles(edges) == [["pkg.db", "pkg.rows"]]
    assert import_graph.import_kinds(tmp_path, package="pkg") == {
        "module": 1,
        "function": 0,
        "type-checking": 1,
    }


def test_no_private_name_is_imported_from_another_module():
    _, private = import_graph.graph()
    assert private == []


def test_no_folder_holds_more_than_a_reading_of_modules():
    sizes = import_graph.folders()
    assert {f: n for f, (n, _) in sizes.items() if n > MAX_MODULES} == {}


def test_every_package_has_a_face_with_a_docstring_and_its_public_names():
    for init in sorted((REPO / "src" / "ddtune").rglob("__init__.py")):
        tree = ast.parse(init.read_text())
        docstring = ast.get_docstring(tree) or ""
        assert len(docstring.split()) >= 5, f"{init}: the face says what the folder is for"
        if init.parent.name in {"assets", "launchers"}:  # data locators, `python -m` entry
            continue
        names = [node for node in tree.body if isinstance(node, ast.Assign) and _targets_all(node)]
        assert names, f"{init}: no __all__"


def test_tests_mirror_the_packages():
    src = REPO / "src" / "ddtune"
    for folder in sorted(p for p in (REPO / "tests").rglob("*") if p.is_dir()):
        relative = folder.relative_to(REPO / "tests")
        if relative.parts[0] in NOT_MIRRORED | {"fixtures"} or "fixtures" in relative.parts:
            continue
        if folder.name.startswith((".", "__")):
            continue
        assert (src / relative).is_dir(), f"tests/{relative} has no package src/ddtune/{relative}"


def _targets_all(node: ast.Assign) -> bool:
    return any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)


@pytest.mark.parametrize(
    ("module", "heavy"),
    [
        ("ddtune.cli", "torch"),  # `ddtune --help`
        ("ddtune.ddtree.models.config", "torch"),  # the server's checks before it binds
        ("ddtune.ddtree.batch", "torch"),
        ("ddtune.sweep.spec.parse", "optuna"),  # a spec check
        ("ddtune.sweep.run.common", "ddtune.sweep.run.loop"),  # a Ray slot, sweep watch
    ],
)
def test_light_imports_stay_light(module: str, heavy: str) -> None:
    """The lazy faces keep what these imports need from loading a heavy module."""
    code = f"import sys, {module}; print({heavy!r} in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", f"importing {module} loads {heavy}"
