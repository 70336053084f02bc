"""The package's import graph: cycles, private names across modules, and folder sizes.

    python tools/import_graph.py          # the report; exit 1 on a cycle or a private import
    python tools/import_graph.py --quiet  # only the verdict line (make lint)

Every `import` statement counts, inside functions and under `if TYPE_CHECKING:`
too: a type-only import that closes a circle never runs, but a reader
follows it all the same, so it is a circle here (break it with a Protocol of
what the lower module uses, as `services/readiness.py` does). Importing `a.b.c` runs the
faces (`__init__`) of `a.b` and `a` first, so it counts as importing each
face that is not already one of the importer's own packages; `from pkg
import name` counts as importing `pkg`, and `pkg.name` as well when `name`
is a submodule. So a face that imports its modules, which import a sibling
package whose face imports back, is a cycle here, as it is when Python
meets it in a fresh interpreter. The layer contract between packages is
import-linter's job (`lint-imports`, configured in pyproject.toml).
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "ddtune"


def module_files(root: Path = ROOT, package: str = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package (`__init__` = the package)."""
    modules = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


KINDS = ("module", "function", "type-checking")  # where an import statement stands


def _import_nodes(tree: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    """Every node with where it stands: at module level, inside a function, or under
    `if TYPE_CHECKING:` (never run, yet a dependency a reader follows all the same)."""
    stack: list[tuple[ast.AST, str]] = [(tree, "module")]
    while stack:
        node, kind = stack.pop()
        yield node, kind
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                stack += [(c, "type-checking") for c in child.body]
                stack += [(c, kind) for c in child.orelse]
                continue
            inner = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            stack.append((child, "function" if inner and kind == "module" else kind))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _absolute(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base[: len(base) - node.level + (1 if is_package else 0)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(
    module: str, path: Path, modules: set[str], is_package: bool = False
) -> list[tuple[str, str | None]]:
    """(imported module, private name or None) for each import of `module`, wherever it stands."""
    return [
        (target, name) for target, name, _ in imports_with_kind(module, path, modules, is_package)
    ]


def imports_with_kind(
    module: str, path: Path, modules: set[str], is_package: bool = False
) -> list[tuple[str, str | None, str]]:
    """(imported module, private name or None, one of KINDS) for each import of `module`."""
    found: list[tuple[str, str | None, str]] = []
    for node, kind in _import_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, None, kind) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(module, node, is_package)
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                if sub in modules:
                    found.append((sub, None, kind))
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                found.append((source, alias.name if private and sub not in modules else None, kind))
    return [(target, name, kind) for target, name, kind in found if target in modules]


def import_kinds(root: Path = ROOT, package: str = PACKAGE) -> dict[str, int]:
    """How many import statements of the package's own modules stand where (KINDS)."""
    files = module_files(root, package)
    packages = {m for m, p in files.items() if p.name == "__init__.py"}
    counts = dict.fromkeys(KINDS, 0)
    for module, path in files.items():
        for target, _, kind in imports_with_kind(module, path, set(files), module in packages):
            if target != module:
                counts[kind] += 1
    return counts


def graph(root: Path = ROOT, package: str = PACKAGE) -> tuple[dict[str, set[str]], list[str]]:
    """(module -> modules it imports, one line per private name imported across modules)."""
    files = module_files(root, package)
    packages = {m for m, p in files.items() if p.name == "__init__.py"}
    edges: dict[str, set[str]] = defaultdict(set)
    private = []
    for module, path in files.items():
        for target, name in imports_of(module, path, set(files), module in packages):
            for face in _faces_run(module, target, packages):
                edges[module].add(face)
            if target != module:
                edges[module].add(target)
            if name is not None and target != module:
                private.append(f"{module} imports {target}.{name}")
    return {m: edges[m] for m in files}, private


def _faces_run(importer: str, target: str, packages: set[str]) -> list[str]:
    """The package faces that importing `target` runs which `importer` is not inside."""
    own = {".".join(importer.split(".")[:i]) for i in range(1, importer.count(".") + 2)}
    parts = target.split(".")
    faces = [".".join(parts[:i]) for i in range(1, len(parts))]
    return [f for f in faces if f not in own and f in packages]


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    walk = _Tarjan(edges)
    for start in edges:
        if start not in walk.index:
            walk.visit(start)
    return walk.found


class _Tarjan:
    def __init__(self, edges: dict[str, set[str]]) -> None:
        self.edges = edges
        self.index: dict[str, int] = {}
        self.low: dict[str, int] = {}
        self.stack: list[str] = []
        self.on_stack: set[str] = set()
        self.found: list[list[str]] = []

    def _enter(self, node: str) -> tuple[str, Iterator[str]]:
        self.index[node] = self.low[node] = len(self.index)
        self.stack.append(node)
        self.on_stack.add(node)
        return node, iter(sorted(self.edges.get(node, ())))

    def visit(self, start: str) -> None:
        work = [self._enter(start)]
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    parent = work[-1][0]
                    self.low[parent] = min(self.low[parent], self.low[node])
                if self.low[node] == self.index[node]:
                    self._close(node)
            elif child not in self.index:
                work.append(self._enter(child))
            elif child in self.on_stack:
                self.low[node] = min(self.low[node], self.index[child])

    def _close(self, root: str) -> None:
        """Pop `root`'s component off the stack; keep it if it is a cycle."""
        component = []
        while True:
            member = self.stack.pop()
            self.on_stack.discard(member)
            component.append(member)
            if member == root:
                break
        if len(component) > 1:
            self.found.append(sorted(component))


def folders(root: Path = ROOT) -> dict[str, tuple[int, int]]:
    """Folder (relative to src/) -> (modules directly in it, their lines)."""
    sizes: dict[str, tuple[int, int]] = {}
    for folder in sorted({p.parent for p in (root / PACKAGE).rglob("*.py")}):
        files = sorted(folder.glob("*.py"))
        lines = sum(len(f.read_text().splitlines()) for f in files)
        sizes[str(folder.relative_to(root))] = (len(files), lines)
    return sizes


def main(argv: list[str]) -> int:
    edges, private = graph()
    found = cycles(edges)
    print(f"{len(edges)} modules, {sum(map(len, edges.values()))} imports")
    kinds = import_kinds()
    print("import statements: " + ", ".join(f"{kinds[k]} {k}-level" for k in KINDS))
    if "--quiet" not in argv:
        print(f"{'folder':<32} {'modules':>7} {'lines':>7}")
        for folder, (count, lines) in folders().items():
            print(f"{folder:<32} {count:>7} {lines:>7}")
    print(f"import cycles: {len(found)}")
    for component in found:
        print("  " + " <-> ".join(component))
    print(f"private names imported from another module: {len(private)}")
    for line in private:
        print("  " + line)
    return 1 if found or private else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
