"""`ddtune sweep export`: every trial as a flat CSV row, or as JSON with its attempts.

Parameters appear in their wire form (`TrialRecord.config`, window `"none"`).
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from ddtune.records import METRIC_NAMES
from ddtune.sweep.store.db import Store
from ddtune.sweep.store.rows import AttemptRow, SweepRow


def export_rows(store: Store, sweep: SweepRow) -> list[dict[str, Any]]:
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


def export_csv(store: Store, sweep: SweepRow) -> str:
    rows = export_rows(store, sweep)
    columns = list(dict.fromkeys(key for row in rows for key in row))
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def export_json(store: Store, sweep: SweepRow) -> str:
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


def _attempt_dict(row: AttemptRow) -> dict[str, Any]:
    data = row.as_dict()
    for key in ("timings_json", "identity_json", "hardware_json"):
        data[key.removesuffix("_json")] = json.loads(data.pop(key))
    return data
