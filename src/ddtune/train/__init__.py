"""Training recipe behind the bundled models: `ddtune train tokenizer|tasks|target|drafter|eval`.

    from ddtune.train import train_target, train_drafter

`tokenizer` (byte-level BPE), `tasks` (seeded function tasks and their
held-out split), `corpus` (tasks mixed with standard-library source),
`target` and `drafter` (the trainers), `distill` (the drafter's
self-distillation data), `evaluate` (the model card's figures), `configs`
(every setting declared once), `commands` (the CLI). torch is imported on
first use. See docs/ddtree.md "Train".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ddtune.lazy import lazy_names

if TYPE_CHECKING:
    from ddtune.train.drafter import train_drafter
    from ddtune.train.target import train_target
    from ddtune.train.tokenizer import train_tokenizer

__getattr__ = lazy_names(
    __name__,
    {"train_drafter": "drafter", "train_target": "target", "train_tokenizer": "tokenizer"},
)

__all__ = ["train_drafter", "train_target", "train_tokenizer"]
