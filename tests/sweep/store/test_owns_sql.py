"""The store owns SQL: no module outside `sweep/store/` imports sqlite3 or holds SQL text.

Rows leave the store typed (`sweep/store/rows.py`); a new query is a store
method, so a schema change is one folder's business.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[3] / "src" / "ddtune"
STORE = SRC / "sweep" / "store"
SQL = re.compile(
    r"\b(SELECT\s.+\sFROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|"
    r"(CREATE|DROP|ALTER)\s+(TABLE|INDEX)|PRAGMA\s+\w+)\b",
    re.S,
)


def outside_the_store() -> list[Path]:
    return [p for p in sorted(SRC.rglob("*.py")) if STORE not in p.parents]


def sqlite_uses(tree: ast.AST) -> list[int]:
    return [node.lineno for node in ast.walk(tree) if names_sqlite3(node)]


def names_sqlite3(node: ast.AST) -> bool:
    if isinstance(node, ast.Import):
        return any(alias.name == "sqlite3" for alias in node.names)
    if isinstance(node, ast.ImportFrom):
        return node.module == "sqlite3"
    return isinstance(node, ast.Name) and node.id == "sqlite3"


def sql_strings(tree: ast.AST) -> list[int]:
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL.search(node.value)
    ]


def test_the_finders_find_what_they_look_for():
    tree = ast.parse('import sqlite3\nq = "SELECT id FROM sweeps WHERE name=?"\nx = "select a"\n')
    assert sqlite_uses(tree) == [1]
    assert sql_strings(tree) == [2]


def test_no_sqlite3_outside_the_store():
    found = {
        str(p.relative_to(SRC)): lines
        for p in outside_the_store()
        if (lines := sqlite_uses(ast.parse(p.read_text())))
    }
    assert found == {}


def test_no_sql_text_outside_the_store():
    found = {
        str(p.relative_to(SRC)): lines
        for p in outside_the_store()
        if (lines := sql_strings(ast.parse(p.read_text())))
    }
    assert found == {}
    assert len(outside_the_store()) > 150  # the scan saw the package
