"""The reference of every spec key, generated from the spec's own models: `docs/spec.md`.

    python -m ddtune.sweep.reference            # rewrite docs/spec.md
    python -m ddtune.sweep.reference --check    # exit 1 when docs/spec.md is stale

Each table of `SpecDocument` (and `[service]`, which `ServiceSpec` reads) is
walked field by field: the key's TOML path, its type and constraints, its
default, and what it means. The meaning is the field's `Field(description=)`,
else its attribute docstring, else the comment written beside (or just above)
the field in its model's source; a key with none of them reads "(no
description)", which a test refuses. `tests/sweep/test_reference.py`
regenerates the page and compares, so the page cannot drift from the code.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import sys
import textwrap
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from ddtune.services.spec import ServiceSpec
from ddtune.sweep.plan.strategies import STRATEGIES
from ddtune.sweep.spec.schema import SpecDocument, SweepTable

DOC = Path(__file__).parents[3] / "docs" / "spec.md"
NO_DESCRIPTION = "(no description)"
REPLACED = {("service",): ServiceSpec}  # keys SpecDocument keeps as a plain table
CHOICES: dict[tuple[type[BaseModel], str], tuple[str, ...]] = {
    (SweepTable, "strategy"): tuple(STRATEGIES)
}  # words a plain str takes, from its table
HEAD = """# Spec reference

Every key of a sweep spec (TOML), generated from the models that read it by
`python -m ddtune.sweep.reference` (a test regenerates it and compares:
do not edit by hand). A key not listed here is refused with its path. How
the pieces fit together: [production.md](production.md) and the examples in
`examples/`; `ddtune sweep init` writes a spec from a running service.
"""


@dataclass(frozen=True)
class Key:
    """One documented key."""

    path: str
    type: str
    default: str
    meaning: str


@dataclass(frozen=True)
class Section:
    """One model's keys, and every table path it reads (`[[x]]` for an array of tables)."""

    paths: tuple[str, ...]
    model: type[BaseModel]
    keys: tuple[Key, ...]


def reference() -> str:
    """The whole page."""
    lines = [HEAD]
    for section in sections():
        lines += ["## " + ", ".join(f"`{p}`" for p in section.paths), ""]
        if summary(section.model):
            lines += [summary(section.model), ""]
        lines += ["| key | type | default | meaning |", "|---|---|---|---|"]
        lines += [f"| `{k.path}` | {k.type} | {k.default} | {k.meaning} |" for k in section.keys]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def sections() -> list[Section]:
    """Each model once, with every table path that it reads, in document order."""
    order: dict[type[BaseModel], list[str]] = {}
    for path, model in _tables():
        order.setdefault(model, []).append(path)
    return [Section(tuple(paths), model, tuple(_keys(model))) for model, paths in order.items()]


def tables() -> list[tuple[str, list[Key]]]:
    """(table path, its keys) for every table path."""
    return [(path, list(_keys(model))) for path, model in _tables()]


def _tables() -> Iterator[tuple[str, type[BaseModel]]]:
    for name, info in SpecDocument.model_fields.items():
        model = REPLACED.get((name,)) or table_model(info.annotation)
        if model is not None:
            yield from _walk(info.alias or name, model, _is_array(info.annotation))


def _walk(
    path: str, model: type[BaseModel], array: bool = False
) -> Iterator[tuple[str, type[BaseModel]]]:
    """`[a.b]` for a table, `[[a.b]]` for an array of tables; then the tables inside it."""
    yield (f"[[{path}]]" if array else f"[{path}]"), model
    for name, info in model.model_fields.items():
        sub = table_model(info.annotation)
        if sub is not None and sub is not model:
            yield from _walk(f"{path}.{info.alias or name}", sub, _is_array(info.annotation))


def _is_array(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    return origin is list and table_model(annotation) is not None


def _keys(model: type[BaseModel]) -> Iterator[Key]:
    for name, info in model.model_fields.items():
        if info.exclude:
            continue  # filled by the model itself (e.g. a method's knobs), never written
        key = info.alias or name
        words = CHOICES.get((model, name))
        kind = " \\| ".join(f'"{w}"' for w in words) if words else type_text(info.annotation, info)
        yield Key(key, kind, default_text(info), meaning(model, name))


def summary(model: type[BaseModel]) -> str:
    """The first paragraph of the model's own docstring (not a base's), on one line."""
    doc = inspect.cleandoc(model.__dict__.get("__doc__") or "")
    return " ".join(doc.split("\n\n", 1)[0].split())


def table_model(annotation: Any) -> type[BaseModel] | None:
    """The model of a table-valued field (`X`, `X | None`, `list[X]` for `[[X]]`)."""
    for arg in _flat(annotation):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
    return None


def _flat(annotation: Any) -> Iterator[Any]:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        yield from _flat(typing.get_args(annotation)[0])
    elif origin in (typing.Union, types.UnionType, list, tuple):
        for arg in typing.get_args(annotation):
            yield from _flat(arg)
    else:
        yield annotation


def type_text(annotation: Any, info: FieldInfo | None = None) -> str:
    """A reader's form of a type: `int ≥ 1`, `"a" \\| "b"`, `list of int`, `table`."""
    text = _type(annotation)
    bounds = _bounds(info.metadata if info else [])
    return (text + " " + bounds).strip().replace("|", "\\|")


def _type(annotation: Any) -> str:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        inner = _type(args[0])
        bounds = _bounds(args[1:])
        return f"{inner} {bounds}".strip()
    if origin is typing.Literal:
        return " | ".join(f'"{a}"' if isinstance(a, str) else str(a).lower() for a in args)
    if origin in (typing.Union, types.UnionType):
        parts = [_type(a) for a in args if a is not type(None)]
        return " | ".join(dict.fromkeys(parts)) + (" or unset" if type(None) in args else "")
    if origin in (list, tuple):
        return f"list of {_type(args[0])}" if args else "list"
    if origin is dict:
        return f"table of {_type(args[1])}" if len(args) == 2 else "table"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "table"
    if annotation is Any:
        return "any"
    return getattr(annotation, "__name__", str(annotation))


def _bounds(metadata: Any) -> str:
    signs = {Ge: ("≥", "ge"), Gt: (">", "gt"), Le: ("≤", "le"), Lt: ("<", "lt")}
    words = []
    for item in metadata:
        for kind, (sign, attr) in signs.items():
            if isinstance(item, kind):
                words.append(f"{sign} {getattr(item, attr)}")
        if isinstance(item, FieldInfo):
            words.append(_bounds(item.metadata))
    return ", ".join(w for w in words if w)


def default_text(info: FieldInfo) -> str:
    """The default as TOML would spell it; `required` where there is none."""
    if info.is_required():
        return "required"
    value = info.default_factory() if info.default_factory else info.default  # type: ignore[call-arg]
    if value is PydanticUndefined:
        return "required"
    return f"`{_value(value)}`"


def _value(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, BaseModel):
        return "{…}" if value.model_fields_set or value.model_dump() else "{}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{…}" if value else "{}"
    return str(value)


def meaning(model: type[BaseModel], name: str) -> str:
    """The field's description, attribute docstring or source comment (module doc)."""
    info = model.model_fields[name]
    if info.description:
        return _cell(info.description)
    for cls in model.__mro__:
        if isinstance(cls, type) and issubclass(cls, BaseModel) and name in _comments(cls):
            return _cell(_comments(cls)[name])
    return NO_DESCRIPTION


@cache
def _comments(cls: type) -> dict[str, str]:
    """Field name -> the comment beside it (or just above it), or its attribute docstring."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    lines = source.splitlines()
    body = ast.parse(source).body[0]
    assert isinstance(body, ast.ClassDef)
    found: dict[str, str] = {}
    for i, node in enumerate(body.body):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        text = _beside(lines, node.lineno, node.end_lineno or node.lineno) or _above(
            lines, node.lineno
        )
        after = body.body[i + 1] if i + 1 < len(body.body) else None
        if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
            text = text or str(after.value.value)
        if text:
            found[node.target.id] = text
    return found


def _beside(lines: list[str], first: int, last: int) -> str:
    comments = [_comment(lines[n - 1]) for n in range(first, last + 1)]
    return " ".join(c for c in comments if c)


def _above(lines: list[str], lineno: int) -> str:
    block: list[str] = []
    n = lineno - 2
    while n >= 0 and lines[n].strip().startswith("#"):
        block.insert(0, lines[n].strip().lstrip("#").strip())
        n -= 1
    return " ".join(block)


def _comment(line: str) -> str:
    """The `# comment` at the end of a code line (a `#` inside a string is not one)."""
    try:
        tokens = list(_tokens(line))
    except SyntaxError:
        return ""
    return next((t[1:].strip() for t in tokens if t.startswith("#")), "")


def _tokens(line: str) -> Iterator[str]:
    import io
    import tokenize

    try:
        for token in tokenize.generate_tokens(io.StringIO(line).readline):
            if token.type == tokenize.COMMENT:
                yield token.string
    except tokenize.TokenError:
        return


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def missing() -> list[str]:
    """Keys without a description (`table.key`)."""
    return [
        f"{t.strip('[]')}.{k.path}"
        for t, keys in tables()
        for k in keys
        if k.meaning == NO_DESCRIPTION
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ddtune.sweep.reference")
    parser.add_argument("--check", action="store_true", help="exit 1 when the page is stale")
    parser.add_argument("--out", type=Path, default=DOC)
    args = parser.parse_args(argv)
    text = reference()
    if args.check:
        current = args.out.read_text() if args.out.is_file() else ""
        if current != text:
            print(f"{args.out} is stale: run python -m ddtune.sweep.reference", file=sys.stderr)
            return 1
        return 0
    args.out.write_text(text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

__all__ = ["Key", "Section", "main", "missing", "reference", "sections", "tables"]
