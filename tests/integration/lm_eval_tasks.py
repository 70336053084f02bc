"""Two small lm-eval tasks built from ddtune's held-out coding tasks.

`ddtune_heldout_gen` (generate_until, exact match against the canonical body)
and `ddtune_heldout_mc` (multiple_choice: the task's own canonical body vs the
next task's, accuracy by loglikelihood; it needs `logprobs` + `echo`).
`write_tasks(folder, n)` writes the data (JSONL) and the task YAMLs for
`lm_eval --include_path folder`.
"""

from __future__ import annotations

import json
from pathlib import Path

from clients import REPO

HELDOUT = REPO / "src" / "ddtune" / "assets" / "tasks" / "heldout.jsonl"
STOPS = ["\ndef ", "\nclass ", "\nif __name__", "\nprint("]

GEN = """task: ddtune_heldout_gen
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: prompt
doc_to_target: canonical_solution
generation_kwargs:
  until: {stops}
  max_gen_toks: 96
  do_sample: false
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""

MC = """task: ddtune_heldout_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: prompt
doc_to_choice: choices
doc_to_target: label
target_delimiter: ""
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""


def write_tasks(folder: Path, n: int) -> list[str]:
    """The data and YAMLs of both tasks (`n` documents each); returns the task names."""
    docs = [json.loads(line) for line in HELDOUT.read_text().splitlines()[: n + 1]]
    gen = folder / "heldout_gen.jsonl"
    gen.write_text("".join(json.dumps(doc) + "\n" for doc in docs[:n]))
    mc = folder / "heldout_mc.jsonl"
    rows = [
        {"prompt": doc["prompt"], "choices": [doc["canonical_solution"], other], "label": 0}
        for doc, other in zip(docs[:n], [d["canonical_solution"] for d in docs[1:]], strict=True)
    ]
    mc.write_text("".join(json.dumps(row) + "\n" for row in rows))
    (folder / "ddtune_heldout_gen.yaml").write_text(GEN.format(data=gen, stops=json.dumps(STOPS)))
    (folder / "ddtune_heldout_mc.yaml").write_text(MC.format(data=mc))
    return ["ddtune_heldout_gen", "ddtune_heldout_mc"]
