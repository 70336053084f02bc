"""Reading a sweep store for the report: one `TrialRecord` per trial.

A record carries the trial's configuration as objects (`Config.from_wire` of its
`config_json`), its status and last failure, and for a done trial the
aggregates, per-request acceptance lengths, T=0 outputs, the `[bench.load]`
levels with their per-request rows, the figures per workload (bench suites, traffic), and the conditions it ran under (hardware,
prompt set, the server identity, and the slot and node when the ray backend ran
it). See docs/sweeps.md "Sweep".
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from ddtune.bench.result import BenchResult
from ddtune.params import config_hash
from ddtune.records import METRIC_NAMES, TrialRecord
from ddtune.sweep.store.connected import TrialReader
from ddtune.sweep.store.load_rows import read_load
from ddtune.sweep.store.rows import TrialRow
from ddtune.sweep.store.slot_tables import attempt_slot


def trial_records(store: TrialReader, sweep_id: int) -> list[TrialRecord]:
    """One `TrialRecord` per trial, in run order."""
    return [trial_record(store, row) for row in store.trials(sweep_id)]


def trial_record(store: TrialReader, trial: TrialRow) -> TrialRecord:
    """The `TrialRecord` of one trial row."""
    attempts = store.attempts(trial["id"])
    result = store.db.execute("SELECT * FROM results WHERE trial_id=?", (trial["id"],)).fetchone()
    failed = [a for a in attempts if a["state"] in ("failed", "interrupted")]
    last_failed = failed[-1] if failed and trial["status"] != "done" else None
    config = store.trial_config(trial)
    record = TrialRecord(
        trial_id=trial["id"],
        label=trial["label"],
        params=config.params,
        is_baseline=bool(trial["is_baseline"]),
        repeat=trial["repeat"],
        status=trial["status"],
        vars=config.user_vars(),
        attempts=len(attempts),
        failure=last_failed["failure"] if last_failed else None,
        failure_detail=last_failed["detail"] if last_failed else None,
        log_tail_path=last_failed["log_tail_path"] if last_failed else None,
    )
    if result is not None:
        _fill_result(store, record, result)
    return record


def _fill_result(store: TrialReader, record: TrialRecord, result: sqlite3.Row) -> None:
    aggregates = json.loads(result["aggregates_json"])
    bench = BenchResult.from_dict(json.loads(result["bench_json"]))
    attempt = store.db.execute(
        "SELECT * FROM attempts WHERE id=?", (result["attempt_id"],)
    ).fetchone()
    rows = [
        json.loads(r[0])
        for r in store.db.execute(
            "SELECT row_json FROM samples WHERE attempt_id=? ORDER BY idx",
            (result["attempt_id"],),
        )
    ]
    record.metrics = {name: aggregates.get(name) for name in METRIC_NAMES}
    record.acceptance_lengths = [
        float(r["acceptance_length"]) for r in rows if r.get("acceptance_length") is not None
    ]
    record.outputs = json.loads(result["outputs_json"])
    record.logprob_gaps = bench.logprob_gaps
    record.load = read_load(store.db, result["attempt_id"], bench.load_result)
    record.workloads = bench.workloads  # per suite / traffic (older stores: none)
    record.token_paths, record.forward_probes = bench.token_paths, bench.forward_probes
    record.draft_counts = bench.draft_counts
    record.temperature = float(bench.temperature or bench.matrix.get("temperature") or 0.0)
    hardware = json.loads(attempt["hardware_json"]) or bench.hardware
    record.conditions = {
        "hardware": hardware,
        "hardware_fingerprint": bench.hardware_fingerprint or config_hash(hardware),
        "prompt_set_hash": bench.prompt_set_hash or None,
        "server_identity": _server_identity(bench.identity, json.loads(attempt["identity_json"])),
        "sandbox": _sandbox_note(bench.notes),
    }
    slot = attempt_slot(store, result["attempt_id"])
    if slot is not None:  # the ray backend ran it: which slot, on which node
        record.conditions["slot"], record.conditions["node"] = slot


def _sandbox_note(notes: list[str]) -> str | None:
    """The bench's words on how coding tests were contained (None when no tests ran)."""
    prefix = "coding tests sandboxed with: "
    found = [n.removeprefix(prefix) for n in notes if isinstance(n, str) and n.startswith(prefix)]
    return found[0].split(";")[0] if found else None


def _server_identity(served: Any, controller: dict[str, Any]) -> dict[str, Any]:
    """What served the bench (its identity endpoint) overlaid with the controller's view
    (process, tag, the identity it waited for): a hot reconfigure reports only a few
    keys to the controller, the model hashes come from the server itself."""
    served = (
        {k: v for k, v in (served or {}).items() if k != "_source"}
        if isinstance(served, dict)
        else {}
    )
    return {**served, **controller}
