"""`sweep init`: a commented spec from the service as it runs today.

    result = build_spec(from_unit("sglang-kimi.service"), front=sys.executable)
    write_spec(Path("kimi.toml"), result.text, force=False)

The launch command is read as its engine reads it (`parse.py`), the space
around its current config comes from one function (`space.method_space`),
the bench and the expected costs from the model's own files (`sizing.py`),
and `render.py` writes the TOML. The spec is one `sweep plan` accepts as
written; the user reads it, trims the space if the plan's hours are too many,
and runs it.
"""

from __future__ import annotations

import os
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddtune.engines import get_engine
from ddtune.errors import UserError
from ddtune.methods import METHODS, needs_trace
from ddtune.sweep.init.method_space import SpaceChoice, method_space
from ddtune.sweep.init.more_methods import Wanted, running_method, with_methods
from ddtune.sweep.init.parse import ParsedLaunch, engine_options, find_engine, parse_launch
from ddtune.sweep.init.render import Table, document
from ddtune.sweep.init.sizing import (
    bench_table,
    context_of,
    drafter_block,
    expected_bench_s,
    expected_start_s,
)
from ddtune.sweep.init.source import LaunchSource


@dataclass(frozen=True)
class InitResult:
    """The spec's text and what it was built from."""

    text: str
    launch: ParsedLaunch
    choice: SpaceChoice


def build_spec(
    source: LaunchSource,
    front: str,
    cwd: Path | None = None,
    methods: Sequence[Wanted] = (),
) -> InitResult:
    """The spec for `source` (see the module doc); `front` runs ddtune's launcher;
    `methods`: other methods to sweep beside the running one (`more_methods.py`)."""
    found = find_engine(source.argv)
    env = dict(source.env)
    launch = parse_launch(found, engine_options(found, env))
    base = Path(source.working_directory or cwd or os.getcwd())
    model, drafter = base / launch.model, base / launch.drafter if launch.drafter else None
    context = context_of(model, launch.context_tokens)
    block = drafter_block(drafter)
    choice = method_space(launch, env, block, front, context)
    choice = with_methods(choice, launch, env, block, context, list(methods))
    bench = bench_table(choice.windows, context)
    start_s, start_how = expected_start_s(model, launch.tp)
    tables = [
        _sweep_table(source, launch, choice),
        *_space_tables(choice),
        _service_table(source, launch, choice, start_s, start_how, bench, base),
        *_env_table(source, choice),
        *_bench_tables(bench, choice, context),
        Table(
            "retry", {"attempts": 2, "backoff": 60}, {"attempts": "a failed start is retried once"}
        ),
    ]
    return InitResult(document(tables, _header(source, launch, choice)), launch, choice)


def write_spec(out: Path, text: str, force: bool) -> None:
    """Write the spec; an existing file only with `force`."""
    if out.exists() and not force:
        raise UserError(f"{out} exists; pass --force to overwrite it, or choose another --out")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    except OSError as exc:
        raise UserError(f"cannot write {out}: {exc.strerror or exc}") from None


def sweep_name(source: LaunchSource, launch: ParsedLaunch) -> str:
    """The unit's name without `.service`, else the model folder's name, as a sweep name."""
    raw = (source.unit or "").removesuffix(".service") or Path(launch.model).name or "service"
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", raw).strip("-._")[:48] or "service"
    return f"{name}-tune"


def _header(source: LaunchSource, launch: ParsedLaunch, choice: SpaceChoice) -> list[str]:
    method = f"{launch.engine} {launch.method} (ddtune's method {running_method(launch)})"
    others = ", ".join(m for m in METHODS if m != running_method(launch))
    intro = (
        f"Written by `ddtune sweep init` from {source.origin}. The service runs {method} "
        f"today; its flags were read with {launch.parser}. The current config is the "
        "baseline; the space around it is below. Every other flag of the launch command is "
        "kept as written. To sweep other methods beside it, write the spec again with "
        f"`sweep init ... --methods {running_method(launch)},M2,M3=DRAFTER` (ddtune's methods: "
        f"{others}; a draft model where the method needs one; docs/production.md)."
    )
    lines = [
        *textwrap.wrap(intro, width=92, break_on_hyphens=False),
        "Check, then run:",
        "    ddtune sweep plan SPEC      # restarts, hours, and the engine's check of every command",
        "    ddtune sweep canary SPEC    # one trial start and the original config back: two starts",
        "    ddtune sweep run SPEC       # the original config is restored at the end or on Ctrl-C",
        "Trim the space (or set max_hours) when the plan's hours are more than you can spend.",
    ]
    notes = list(choice.notes)
    if source.unit and choice.command[1:3] == ["-m", "ddtune.launchers"]:
        user = f" ({source.user})" if source.user else ""
        notes.append(
            f"the unit's user{user} runs ddtune's launcher with {choice.command[0]}: "
            "install ddtune where that user can read it"
        )
    if source.restart and source.restart != "no":
        notes.append(
            f"the unit restarts on its own (Restart={source.restart}): each trial's drop-in "
            "sets Restart=no, so a config that crashes is that trial's result, never started "
            "again by systemd; the unit's own policy is back when the drop-in goes (the end "
            "of the sweep)"
        )
    if not source.unit:
        notes.append(
            "a command carries no environment: add the variables it needs to [service.env] "
            "(e.g. CUDA_VISIBLE_DEVICES)"
        )
    for note in notes:
        lines += textwrap.wrap(f"Note: {note}", width=92, subsequent_indent="  ")
    return lines


def _sweep_table(source: LaunchSource, launch: ParsedLaunch, choice: SpaceChoice) -> Table:
    strategy, why = _strategy(launch, choice)
    values = {
        "name": sweep_name(source, launch),
        "strategy": strategy,
        "tolerance": 0.03,
        "seed": 0,
        "baseline": choice.baseline,
        "restart_bound": "auto",
        "max_hours": 12,
    }
    comments = {
        "strategy": why,
        "tolerance": "configs within 3% of the best count as equivalent",
        "baseline": "the config the service runs today",
        "restart_bound": "from the costs below: several benches per start when starts dominate",
        "max_hours": "a cap on the whole sweep",
    }
    return Table("sweep", values, comments)


def _strategy(launch: ParsedLaunch, choice: SpaceChoice) -> tuple[str, str]:
    """ "predict" where nothing but the baseline's own answers is needed to predict (n-gram on an
    engine that sends token ids), else "race" with what predicting would take."""
    methods, engine = _methods(choice), get_engine(launch.engine)
    traced = ", ".join(needs_trace(methods, engine.counts_drafts))
    if not traced and engine.returns_token_ids:
        return "predict", (
            "the baseline's T = 0 answers predict every n-gram config (a chain's largest "
            "num_steps, every smaller one); only the ones that could win are started, to confirm"
        )
    return "race", (
        "drops configs that are clearly worse, keeps measuring the close ones; fewer starts: "
        f'strategy = "predict" with a trace of {traced} (`ddtune trace record --spec SPEC '
        '--out DIR`, then trace = "DIR")'
    )


def _methods(choice: SpaceChoice) -> set[str]:
    """The methods of the baseline, the configs and the space (a mode where none is named)."""
    tables = [choice.baseline, *choice.configs, choice.space]
    found: set[str] = set()
    for table in tables:
        named = table.get("method") or table.get("mode")
        found |= set(named) if isinstance(named, list) else {named} if named else set()
    return {str(m) for m in found}


def _space_tables(choice: SpaceChoice) -> list[Table]:
    tables: list[Table] = []
    if choice.space:
        flat = {k: v for k, v in choice.space.items() if k not in METHODS}
        head = ["The grid is every combination of the lists."]
        if "method" in flat:
            head = ["Each method's grid is every combination of its own lists; the sweep is"]
            head.append("their union (and the [[configs]] below, if any).")
        tables.append(Table("space", flat, header=head))
        for name, axes in choice.space.items():
            if name in METHODS:
                head = [f"The knobs of {name} (ddtune.methods): lists are swept, values kept."]
                tables.append(Table(f"space.{name}", axes, header=head))
    for i, config in enumerate(choice.configs):
        head = ["One config each: these knobs are tied together by the engine."] if i == 0 else []
        tables.append(Table("configs", config, header=head, array=True))
    return tables


def _service_table(
    source: LaunchSource,
    launch: ParsedLaunch,
    choice: SpaceChoice,
    start_s: float,
    start_how: str,
    bench: dict[str, Any],
    base: Path,
) -> Table:
    values: dict[str, Any] = {"control": "systemd" if source.unit else "process"}
    comments = {
        "expected_start_s": f"stop + start to READY: {start_how}; measured starts replace it",
        "expected_bench_s": "one bench of [bench] at ~60 tok/s; measured benches replace it",
        "host": "where ddtune connects",
    }
    if source.unit:
        values["unit"] = source.unit
        comments["unit"] = "each trial replaces its ExecStart= with a runtime drop-in"
    else:
        values["cwd"] = str(base)
        comments["cwd"] = "where the command ran when sweep init read it"
    values.update(
        engine=launch.engine,
        port=launch.port,
        host="127.0.0.1" if launch.host in ("0.0.0.0", "::", "[::]") else launch.host,
        generations=3,
        gpu="auto",
        expected_start_s=start_s,
        expected_bench_s=expected_bench_s(bench),
        command=choice.command,
        vars=choice.vars,
    )
    timeouts = max(900, round(3 * start_s))
    values["timeouts"] = {
        "stop": 120,
        "quiesce": 120,
        "gpu": 300,
        "start": timeouts,
        "health": timeouts,
    }
    comments["timeouts"] = "seconds; start and health allow three times the expected start"
    return Table("service", values, comments)


def _env_table(source: LaunchSource, choice: SpaceChoice) -> list[Table]:
    """A process's environment as given; a unit keeps its own Environment= lines."""
    if source.unit or not source.env:
        return []
    env = {k: v.replace("{", "{{").replace("}", "}}") for k, v in source.env.items()}
    env = {k: v for k, v in env.items() if k not in choice.drop_env}
    return [Table("service.env", env)] if env else []


def _bench_tables(bench: dict[str, Any], choice: SpaceChoice, context: int | None) -> list[Table]:
    top = {k: v for k, v in bench.items() if not isinstance(v, dict)}
    humaneval = bench["suites"]["humaneval"]
    longest = max(choice.windows, default=None)
    long_note = (
        f"longer than the largest window swept ({longest} tokens), so each window can differ "
        "from none"
        if longest
        else "long-context prompts"
    )
    if context is not None:
        long_note += f"; within the served context ({context} tokens)"
    return [
        Table(
            "bench",
            top,
            header=textwrap.wrap(
                "Sized for the model: the bundled short and long prompts (slices of Python's "
                f"standard library) and {humaneval['limit']} of HumanEval's 164 problems "
                "(seeded by bench.seed, each run by its tests). For the service's own "
                "traffic, set traffic_file to a JSONL of logged OpenAI request bodies "
                "(docs/load.md); other suites: mt-bench, gsm8k.",
                width=88,
            ),
            comments={"suite": "the bundled prompts below, and HumanEval (ddtune[suites])"},
        ),
        Table("bench.short", bench["short"], header=["Chat-sized prompts."]),
        Table("bench.long", bench["long"], header=[long_note]),
        Table(
            "bench.coding",
            bench["coding"],
            header=["The bundled coding tasks are written for ddtune's demo models: off."],
        ),
        Table(
            "bench.suites.humaneval",
            humaneval,
            header=["A seeded subset of HumanEval's 164 problems, each run by its tests."],
        ),
    ]


__all__ = ["InitResult", "build_spec", "sweep_name", "write_spec"]
