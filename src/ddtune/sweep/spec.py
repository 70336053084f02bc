"""The sweep spec: a TOML file parsed strictly into dataclasses.

    [sweep]    name, repeats, order (interleaved|random|sequential), seed, baseline
    [space]    a grid: lists of mode/budget/topk/window (+ [space.vars] user variables),
               expanded to their cartesian product
    [[configs]] an explicit list of configurations (mode/budget/topk/window + vars)
    [service]  handed to `ddtune.services.ServiceSpec.from_dict`; a command argument
               "{python}" is replaced by the interpreter running ddtune
    [bench]    handed to `ddtune.bench.BenchMatrix.from_dict`
    [retry]    attempts, backoff (seconds between attempts)

Everything is validated before a sweep starts. An unknown key or a wrong type
is a `UserError` that names the key and its line in the file, e.g.
`demo.toml:7: [space] unknown key 'budgte'; expected one of ...`.
Configurations are canonicalised (`DecodeParams.canonical()`) and duplicates
dropped, so `ar` with ten budgets is one configuration.
"""

from __future__ import annotations

import itertools
import json
import re
import string
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddtune.errors import UserError
from ddtune.params import DecodeParams, config_hash, parse_window

ORDERS = ("interleaved", "random", "sequential")
TOP_KEYS = ("sweep", "space", "configs", "service", "bench", "retry")
SWEEP_KEYS = ("name", "repeats", "order", "seed", "baseline", "description")
PARAM_KEYS = ("mode", "budget", "topk", "window")
RETRY_KEYS = ("attempts", "backoff")
PYTHON_PLACEHOLDER = "{python}"  # service.command argument: the Python running ddtune
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_VAR_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Config:
    """One configuration to try: decoding parameters plus user variables."""

    params: DecodeParams
    vars: tuple[tuple[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """What the controller renders and the report shows: params + vars."""
        return {**self.params.to_dict(), **dict(self.vars)}

    def label(self) -> str:
        extra = " ".join(f"{k}={v}" for k, v in self.vars)
        return f"{self.params.label()} {extra}".strip()

    def hash(self) -> str:
        return config_hash(self.to_dict())


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 2
    backoff: float = 2.0  # seconds before the second attempt, doubled after each


@dataclass
class SweepSpec:
    name: str
    configs: list[Config]  # canonical, unique, baseline excluded
    baseline: Config | None
    service: Any  # ddtune.services.ServiceSpec
    bench: Any  # ddtune.bench.BenchMatrix
    repeats: int = 2
    order: str = "interleaved"
    seed: int = 0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    text: str = ""  # the TOML as written, stored with the sweep
    source: str = "<spec>"
    base_dir: str | None = None  # relative paths in the spec resolve here

    @property
    def hash(self) -> str:
        """Hash of the parsed content: comments and layout do not change it."""
        return config_hash(tomllib.loads(self.text)) if self.text else ""

    def all_configs(self) -> list[tuple[Config, bool]]:
        """(config, is_baseline), baseline first."""
        head = [(self.baseline, True)] if self.baseline else []
        return head + [(c, False) for c in self.configs]


class KeyLines:
    """Finds the line of `key` inside TOML table `table` by scanning the text."""

    _HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?")
    _KEY = re.compile(r"""^\s*("[^"]+"|'[^']+'|[A-Za-z0-9_\-]+)\s*=""")

    def __init__(self, text: str) -> None:
        self.lines: dict[tuple[str, int, str], int] = {}
        self.headers: dict[tuple[str, int], int] = {}
        table, index, counts = "", 0, {}
        for number, line in enumerate(text.splitlines(), start=1):
            if header := self._HEADER.match(line):
                table = header.group(2).replace('"', "").replace(" ", "")
                index = counts[table] = counts.get(table, -1) + 1 if header.group(1) == "[[" else 0
                self.headers.setdefault((table, index), number)
            elif key := self._KEY.match(line):
                self.lines.setdefault((table, index, key.group(1).strip("\"'")), number)

    def headers_named(self) -> set[str]:
        return {table for table, _ in self.headers}

    def find(self, table: str, key: str | None = None, index: int = 0) -> int | None:
        """Line of `table.key`; falls back to the enclosing key or the table header."""
        if key is not None and (table, index, key) in self.lines:
            return self.lines[(table, index, key)]
        sub_table = (f"{table}.{key}".strip("."), index)
        if key is not None and sub_table in self.headers:  # key is itself a [table]
            return self.headers[sub_table]
        if key is not None and "." in key:  # dotted: a sub-table or an inline table
            head, _, last = key.rpartition(".")
            return self.find(f"{table}.{head}".strip("."), last, index)
        if (table, index) in self.headers:
            return self.headers[(table, index)]
        parent, _, last = table.rpartition(".")
        return self.find(parent, last, index) if last else None


class SpecReader:
    """Checks one parsed TOML document, naming file:line in every error."""

    def __init__(self, text: str, source: str) -> None:
        self.text, self.source, self.lines = text, source, KeyLines(text)

    def fail(self, table: str, key: str | None, message: str, index: int = 0) -> UserError:
        line = self.lines.find(table, key, index)
        where = f"{self.source}:{line}" if line else self.source
        shown = f"[[{table}]] #{index + 1}" if table == "configs" else f"[{table}]"
        return UserError(f"{where}: {shown if table else 'top level'} {message}")

    def check_keys(self, table: str, data: dict, allowed: tuple[str, ...], index: int = 0) -> None:
        for key in data:
            if key not in allowed:
                expected = ", ".join(sorted(allowed))
                raise self.fail(
                    table, key, f"unknown key '{key}'; expected one of {expected}", index
                )

    def want(self, table: str, data: dict, key: str, kind: type | tuple, default: Any) -> Any:
        value = data.get(key, default)
        kinds = kind if isinstance(kind, tuple) else (kind,)
        bad_bool = isinstance(value, bool) and bool not in kinds
        if key in data and (bad_bool or not isinstance(value, kinds)):
            names = " or ".join(k.__name__ for k in kinds)
            raise self.fail(table, key, f"'{key}' must be {names}; got {value!r}")
        return value


def load_spec(path: str | Path) -> SweepSpec:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise UserError(f"cannot read sweep spec {path}: {exc.strerror}") from None
    return parse_spec(text, source=str(path), base_dir=path.parent.resolve())


def parse_spec(text: str, source: str = "<spec>", base_dir: Path | None = None) -> SweepSpec:
    """Parse and validate the whole spec (service and bench included).

    Relative file paths in [bench] resolve against `base_dir` (the spec's folder).
    """
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{source}: not valid TOML: {exc}") from None
    reader = SpecReader(text, source)
    reader.check_keys("", doc, TOP_KEYS)
    sweep = _dict(reader, doc, "sweep")
    reader.check_keys("sweep", sweep, SWEEP_KEYS)
    name = reader.want("sweep", sweep, "name", str, None)
    if name is None or not _NAME_RE.match(name):
        raise reader.fail(
            "sweep", "name", f"'name' must be 1-64 letters, digits, '.', '_' or '-'; got {name!r}"
        )
    baseline = _baseline(reader, sweep)
    configs = _configs(reader, doc)
    configs = [c for c in configs if c != baseline]
    if not configs and baseline is None:
        raise reader.fail("", None, "no configurations: add a [space] grid or [[configs]] tables")
    service = _service(reader, doc)
    _check_vars_used(reader, configs + ([baseline] if baseline else []), service)
    return SweepSpec(
        name=name,
        configs=configs,
        baseline=baseline,
        service=service,
        bench=_bench(reader, doc, base_dir),
        repeats=_repeats(reader, sweep),
        order=_order(reader, sweep),
        seed=reader.want("sweep", sweep, "seed", int, 0),
        retry=_retry(reader, doc),
        text=text,
        source=source,
        base_dir=str(base_dir) if base_dir else None,
    )


def _dict(reader: SpecReader, doc: dict, key: str) -> dict:
    value = doc.get(key, {})
    if not isinstance(value, dict):
        raise reader.fail("", key, f"'{key}' must be a table ([{key}])")
    return value


def _repeats(reader: SpecReader, sweep: dict) -> int:
    repeats = reader.want("sweep", sweep, "repeats", int, 2)
    if not 1 <= repeats <= 1000:
        raise reader.fail(
            "sweep", "repeats", f"'repeats' must be between 1 and 1000; got {repeats}"
        )
    return repeats


def _order(reader: SpecReader, sweep: dict) -> str:
    order = reader.want("sweep", sweep, "order", str, "interleaved")
    if order not in ORDERS:
        raise reader.fail(
            "sweep", "order", f"'order' must be one of {', '.join(ORDERS)}; got {order!r}"
        )
    return order


def _baseline(reader: SpecReader, sweep: dict) -> Config | None:
    if "baseline" not in sweep:
        return None
    value = sweep["baseline"]
    if not isinstance(value, dict):
        raise reader.fail(
            "sweep",
            "baseline",
            f"'baseline' must be a table like {{ mode = \"ar\" }}; got {value!r}",
        )
    return _one_config(reader, "sweep", value, allow_vars=True, key="baseline")


def _one_config(
    reader: SpecReader,
    table: str,
    data: dict,
    allow_vars: bool,
    key: str | None = None,
    index: int = 0,
) -> Config:
    """mode/budget/topk/window (+ vars) → canonical Config; errors point at the key."""
    allowed = PARAM_KEYS + (("vars",) if allow_vars else ())
    for k in data:
        if k not in allowed:
            line_key = key or k
            raise reader.fail(
                table,
                line_key,
                f"unknown key '{k}'{' in ' + key if key else ''}; expected one of {', '.join(sorted(allowed))}",
                index,
            )
    values = {k: v for k, v in data.items() if k in PARAM_KEYS}
    try:
        params = DecodeParams.from_dict(values).canonical()
    except UserError as exc:
        bad = next((k for k in PARAM_KEYS if k in str(exc) and k in data), None)
        raise reader.fail(table, key or bad, f"{key + ': ' if key else ''}{exc}", index) from None
    user_vars = _vars(reader, table, data.get("vars", {}), scalar=True, index=index)
    return Config(params, tuple(sorted(user_vars.items())))


def _vars(
    reader: SpecReader, table: str, data: Any, scalar: bool, index: int = 0
) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise reader.fail(table, "vars", "'vars' must be a table of name = value", index)
    for name, value in data.items():
        if not _VAR_RE.match(name) or name in PARAM_KEYS or name == "port":
            raise reader.fail(
                table,
                "vars",
                f"variable name {name!r} must be an identifier other than mode/budget/topk/window/port",
                index,
            )
        values = [value] if scalar else (value if isinstance(value, list) else [value])
        for v in values:
            if not isinstance(v, (str, int, float, bool)):
                raise reader.fail(
                    f"{table}.vars" if not scalar else table,
                    name if not scalar else "vars",
                    f"variable {name!r} must be a string or number; got {v!r}",
                    index,
                )
    return data


def _configs(reader: SpecReader, doc: dict) -> list[Config]:
    """Grid product and explicit list, canonical and de-duplicated, in spec order."""
    found: list[Config] = []
    if "space" in doc:
        found += _grid(reader, _dict(reader, doc, "space"))
    explicit = doc.get("configs", [])
    if not isinstance(explicit, list) or not all(isinstance(t, dict) for t in explicit):
        raise reader.fail("", "configs", "'configs' must be an array of tables ([[configs]])")
    for index, table in enumerate(explicit):
        found.append(_one_config(reader, "configs", table, allow_vars=True, index=index))
    return list(dict.fromkeys(found))


def _grid(reader: SpecReader, space: dict) -> list[Config]:
    reader.check_keys("space", space, PARAM_KEYS + ("vars",))
    axes: dict[str, list[Any]] = {}
    for key in PARAM_KEYS:
        if key in space:
            values = space[key] if isinstance(space[key], list) else [space[key]]
            if not values:
                raise reader.fail(
                    "space", key, f"'{key}' is an empty list; give at least one value or remove it"
                )
            axes[key] = [_axis_value(reader, key, v) for v in values]
    user = _vars(reader, "space", space.get("vars", {}), scalar=False)
    var_axes = {k: (v if isinstance(v, list) else [v]) for k, v in sorted(user.items())}
    names = list(axes) + list(var_axes)
    configs = []
    for combo in itertools.product(*axes.values(), *var_axes.values()):
        values = dict(zip(names, combo, strict=True))
        params = DecodeParams.from_dict({k: values[k] for k in axes}).canonical()
        configs.append(Config(params, tuple((k, values[k]) for k in var_axes)))
    return configs


def _axis_value(reader: SpecReader, key: str, value: Any) -> Any:
    """Check one grid value on its own, so the error names the key and its line."""
    try:
        if key == "window":
            value = parse_window(value)
        DecodeParams.from_dict({key: value})
    except UserError as exc:
        raise reader.fail("space", key, str(exc)) from None
    return value


def _retry(reader: SpecReader, doc: dict) -> RetryPolicy:
    table = _dict(reader, doc, "retry")
    reader.check_keys("retry", table, RETRY_KEYS)
    attempts = reader.want("retry", table, "attempts", int, 2)
    backoff = reader.want("retry", table, "backoff", (int, float), 2.0)
    if not 1 <= attempts <= 20:
        raise reader.fail(
            "retry", "attempts", f"'attempts' must be between 1 and 20; got {attempts}"
        )
    if not 0 <= backoff <= 3600:
        raise reader.fail(
            "retry", "backoff", f"'backoff' must be between 0 and 3600 seconds; got {backoff}"
        )
    return RetryPolicy(attempts, float(backoff))


def _service(reader: SpecReader, doc: dict) -> Any:
    """The [service] table; a `{python}` argument becomes this interpreter's path."""
    from ddtune.services.spec import ServiceSpec

    table = dict(_dict(reader, doc, "service"))
    if isinstance(table.get("command"), list):
        table["command"] = [
            sys.executable if a == PYTHON_PLACEHOLDER else a for a in table["command"]
        ]
    return _delegate(reader, "service", table, ServiceSpec.from_dict)


def _bench(reader: SpecReader, doc: dict, base_dir: Path | None) -> Any:
    from ddtune.bench.matrix import BenchMatrix

    matrix = _delegate(reader, "bench", _dict(reader, doc, "bench"), BenchMatrix.from_dict)
    return matrix.resolve_paths(base_dir) if base_dir else matrix


def _check_vars_used(reader: SpecReader, configs: list[Config], service: Any) -> None:
    """A user variable that no placeholder uses would be silently ignored: refuse it."""
    if service.kind not in ("process", "hot"):
        return  # hooks get every variable as DDTUNE_<NAME>; systemd renders its own drop-in
    texts = list(service.command) + list(service.env.values())
    used = {name for text in texts for _, name, _, _ in string.Formatter().parse(text) if name}
    for config in configs:
        for name, _ in config.vars:
            if name not in used:
                table = "space" if "space" in reader.lines.headers_named() else "configs"
                raise reader.fail(
                    table,
                    "vars",
                    f"variable {name!r} is not used by service.command or service.env; "
                    f"add a {{{name}}} placeholder there (with a default in [service.vars]) or remove it",
                )


def _delegate(reader: SpecReader, table: str, data: dict, parse: Any) -> Any:
    """Let the owning package validate its table; point its error at the right line."""
    try:
        return parse(data)
    except UserError as exc:
        key = _mentioned_key(str(exc), data)
        raise reader.fail(table, key, str(exc)) from None
    except (TypeError, ValueError) as exc:
        raise reader.fail(table, None, f"invalid: {exc}") from None


def _mentioned_key(message: str, data: dict) -> str | None:
    """The (dotted) key of `data` that an error message names first."""
    found = []
    for key in _flat_keys(data):
        for probe in (key, key.rpartition(".")[2]):
            match = re.search(rf"(?<![\w-]){re.escape(probe)}(?![\w-])", message)
            if match:
                found.append((match.start(), -len(key), key))
    return min(found)[2] if found else None


def _flat_keys(data: dict, prefix: str = "") -> list[str]:
    keys = []
    for key, value in data.items():
        keys.append(prefix + key)
        if isinstance(value, dict):
            keys += _flat_keys(value, prefix + key + ".")
    return keys


def spec_summary(spec: SweepSpec) -> dict[str, Any]:
    """A JSON-able digest for logs and `sweep status`."""
    return json.loads(
        json.dumps(
            {
                "name": spec.name,
                "configs": [c.label() for c in spec.configs],
                "baseline": spec.baseline.label() if spec.baseline else None,
                "repeats": spec.repeats,
                "order": spec.order,
                "retry": {"attempts": spec.retry.attempts, "backoff": spec.retry.backoff},
            }
        )
    )
