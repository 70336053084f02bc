"""Read-only views of a store: the status table, CSV/JSON export, and the report hand-off.

Everything here reads `TrialRecord`s (`Store.trial_records`); parameters appear
in their wire form (`TrialRecord.config`). `attempt_dir` is where the runner
keeps an attempt's files (`<store dir>/trials/<id>-<label>-r<repeat>/attempt-<n>`);
an attempt that stored no log path (interrupted, or its runner killed) shows
the log found there. See docs/architecture.md "Sweep".
"""

from __future__ import annotations

import csv
import io
import json
import re
import sqlite3
import tomllib
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from ddtune.report.inputs import METRIC_NAMES, SweepContext, TrialRecord
from ddtune.report.options import ReportOptions
from ddtune.sweep.spec.load import Config, SweepSpec
from ddtune.sweep.store.db import TRIAL_STATUSES, Store
from ddtune.sweep.store.slot_tables import slot_table

if TYPE_CHECKING:
    from ddtune.report.result import ReportSummary

ATTEMPT_LOGS = ("log_tail.txt", "service.log", "hooks.log")  # first found is shown
STATUS_STYLE = {
    "done": "green",
    "failed": "red",
    "interrupted": "yellow",
    "running": "cyan",
    "pending": "dim",
}


def status_table(store: Store, sweep: sqlite3.Row) -> Group:
    """Counts per status, the slots (ray backend), one row per trial, and every failure."""
    records = store.trial_records(sweep["id"])
    counts = {s: sum(r.status == s for r in records) for s in TRIAL_STATUSES}
    head = Text(
        f"sweep {sweep['name']} · {store.path} · "
        + ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    )
    table = Table(show_lines=False)
    for column in (
        "#",
        "config",
        "rep",
        "status",
        "att",
        "short tok/s",
        "long tok/s",
        "accept",
        "coding",
        "failure",
    ):
        table.add_column(column, overflow="fold")
    for r in records:
        table.add_row(
            str(r.trial_id),
            Text(r.label + (" (baseline)" if r.is_baseline else "")),
            str(r.repeat),
            Text(r.status, style=STATUS_STYLE.get(r.status, "")),
            str(r.attempts),
            _num(r.metrics.get("short_tps")),
            _num(r.metrics.get("long_tps")),
            _num(r.metrics.get("acceptance_length")),
            _coding(r),
            Text(r.failure or ""),
        )
    slots = slot_table(store, sweep["id"])  # per-slot state (ray backend)
    return Group(head, *slots, table, *_failure_lines(store, records))


def _failure_lines(store: Store, records: list[TrialRecord]) -> list[Text]:
    lines = []
    for record in records:
        for attempt in store.attempts(record.trial_id):
            if attempt["state"] in ("failed", "interrupted"):
                log = attempt_log(store, record, attempt) or "none"
                lines.append(
                    Text(
                        f"trial {record.trial_id} {record.label} r{record.repeat} attempt {attempt['number']}: "
                        f"{attempt['failure']} — {attempt['detail']} (log: {log})",
                        style="red" if attempt["state"] == "failed" else "yellow",
                    )
                )
    return lines


def attempt_dir(workdir: Path, trial_id: int, label: str, repeat: int, number: int) -> Path:
    """The folder of one attempt's files (service.log, log_tail.txt, hooks.log)."""
    slug = re.sub(r"[^A-Za-z0-9]+", "-", label).strip("-")[:40]
    return workdir / "trials" / f"{trial_id:04d}-{slug}-r{repeat}" / f"attempt-{number}"


def attempt_log(store: Store, record: TrialRecord, attempt: sqlite3.Row) -> str | None:
    """The attempt's stored log path, else the log its folder holds (an interrupted attempt)."""
    if attempt["log_tail_path"]:
        return str(attempt["log_tail_path"])
    folder = attempt_dir(
        store.path.parent.resolve(), record.trial_id, record.label, record.repeat, attempt["number"]
    )
    found = [folder / name for name in ATTEMPT_LOGS if (folder / name).is_file()]
    return str(found[0]) if found else None


def failure_counts(classes: Counter[str]) -> str:
    """`crashed(2): 2, port_in_use: 1`, most frequent first."""
    return ", ".join(f"{name}: {count}" for name, count in classes.most_common())


def _num(value: Any) -> str:
    return "" if value is None else f"{value:.2f}"


def _coding(record: TrialRecord) -> str:
    passed, total = record.metrics.get("coding_passed"), record.metrics.get("coding_total")
    return "" if total is None else f"{passed:.0f}/{total:.0f}"


def export_rows(store: Store, sweep: sqlite3.Row) -> list[dict[str, Any]]:
    """One flat row per trial: identity, config, status, failure, metrics."""
    rows = []
    for r in store.trial_records(sweep["id"]):
        row = {"sweep": sweep["name"], "trial_id": r.trial_id, "label": r.label}
        row.update(r.config)  # params in wire form (window "none") + user variables
        row.update(
            repeat=r.repeat,
            is_baseline=r.is_baseline,
            status=r.status,
            attempts=r.attempts,
            failure=r.failure,
            failure_detail=r.failure_detail,
            log_tail_path=r.log_tail_path,
        )
        row.update({name: r.metrics.get(name) for name in METRIC_NAMES})
        rows.append(row)
    return rows


def export_csv(store: Store, sweep: sqlite3.Row) -> str:
    rows = export_rows(store, sweep)
    columns = list(dict.fromkeys(key for row in rows for key in row))
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def export_json(store: Store, sweep: sqlite3.Row) -> str:
    """Every TrialRecord plus its attempts (timings, failures, identities)."""
    trials = []
    for record in store.trial_records(sweep["id"]):
        attempts = [_attempt_dict(a) for a in store.attempts(record.trial_id)]
        trials.append({**record.to_dict(), "attempt_history": attempts})
    doc = {
        "sweep": {
            "name": sweep["name"],
            "spec_hash": sweep["spec_hash"],
            "spec": sweep["spec_text"],
        },
        "trials": trials,
    }
    return json.dumps(doc, indent=2, default=str) + "\n"


def _attempt_dict(row: sqlite3.Row) -> dict[str, Any]:
    data = dict(row)
    for key in ("timings_json", "identity_json", "hardware_json"):
        data[key.removesuffix("_json")] = json.loads(data.pop(key))
    return data


def report_setup(
    store: Store, sweep: sqlite3.Row, overrides: dict[str, Any] | None = None
) -> tuple[ReportOptions, SweepContext]:
    """Report options and race history from the spec kept with the sweep; the spec's
    `[report]` table (e.g. `load_weights`) and then `overrides` win over the derived ones."""
    from ddtune.sweep.spec.load import parse_spec

    base_dir = Path(sweep["spec_dir"]) if sweep["spec_dir"] else None
    spec = parse_spec(
        sweep["spec_text"], source=f"{store.path} ({sweep['name']})", base_dir=base_dir
    )
    searched = spec.strategy == "optuna" and not sweep["name"].endswith(".confirm")
    derived = {
        "tolerance": spec.tolerance,
        "blocked": spec.order == "interleaved" and not searched,
        "passes_per_start": spec.passes_per_start,
        "interleave": spec.interleave,
    }
    spec_report = tomllib.loads(sweep["spec_text"]).get("report", {})
    options = ReportOptions.from_dict({**derived, **spec_report, **(overrides or {})})
    return options, sweep_context(store, sweep, spec)


def sweep_context(store: Store, sweep: sqlite3.Row, spec: SweepSpec) -> SweepContext:
    from ddtune.sweep.plan.race_planner import RacePlanner, race_context
    from ddtune.sweep.plan.search_planner import CONFIRM_SUFFIX

    confirm = sweep["name"].endswith(CONFIRM_SUFFIX)
    if spec.strategy == "grid":
        return SweepContext("grid", spec.objective)
    if spec.strategy == "optuna" and not confirm:
        note = (
            "Optuna search trials, one per proposal (not blocked: the analysis is Welch); the "
            f"race over the best configs is sweep {sweep['name']}{CONFIRM_SUFFIX} in this store."
        )
        return SweepContext("optuna", spec.objective, notes=[note])
    configs = sweep_configs(store, sweep["id"])
    state = RacePlanner(spec, store, sweep["id"], configs).state()
    context = race_context(state, spec.objective)
    if confirm:
        context.notes.append(
            f"Confirmation race over the best configs of the Optuna search ({spec.name})."
        )
    return context


def sweep_configs(store: Store, sweep_id: int) -> list[tuple[Config, bool]]:
    """The distinct configs of a sweep's trials, in run order of their first trial."""
    seen: dict[str, tuple[Config, bool]] = {}
    for row in store.trials(sweep_id):
        seen.setdefault(row["label"], (store.trial_config(row), bool(row["is_baseline"])))
    return list(seen.values())


def write_report(
    store: Store,
    sweep: sqlite3.Row,
    out_dir: Path,
    console: Console,
    overrides: dict[str, Any] | None = None,
) -> ReportSummary:
    """Hand the store's TrialRecords to `ddtune.report.build_report`; say where it wrote."""
    from ddtune.report import build_report

    records = store.trial_records(sweep["id"])
    out_dir.mkdir(parents=True, exist_ok=True)
    options, context = report_setup(store, sweep, overrides)
    result = build_report(records, out_dir, options, context)
    console.print(result.terminal_table(), markup=False, highlight=False)
    files = sorted(p.name for p in out_dir.iterdir())
    console.print(
        f"report for sweep {sweep['name']} ({len(records)} trials) in {out_dir}: {', '.join(files)}"
    )
    return result
