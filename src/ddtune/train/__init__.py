"""Training recipe behind the bundled models: `ddtune train tokenizer|tasks|target|drafter|eagle3|eval`.

    from ddtune.train import train_target, train_drafter, train_eagle3

`tokenizer` (byte-level BPE), `tasks` (seeded function tasks and their
held-out split), `corpus` (tasks mixed with standard-library source),
`target`, `drafter` and `eagle3` (the trainers), `distill` (the drafters'
self-distillation data), `draft_vocab` (an EAGLE-3 head's vocabulary),
`evaluate` and `eagle3_eval` (the model card's figures), `configs` (every
setting declared once); the CLI is `ddtune.cli.train`. torch is imported on
first use. See docs/ddtree.md "Train".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ddtune.lazy import lazy_names

if TYPE_CHECKING:
    from ddtune.train.drafter import train_drafter
    from ddtune.train.eagle3 import train_eagle3
    from ddtune.train.target import train_target
    from ddtune.train.tokenizer import train_tokenizer

__getattr__ = lazy_names(
    __name__,
    {
        "train_drafter": "drafter",
        "train_eagle3": "eagle3",
        "train_target": "target",
        "train_tokenizer": "tokenizer",
    },
)

__all__ = ["train_drafter", "train_eagle3", "train_target", "train_tokenizer"]
