"""The terms a help text uses, each defined where a page first says it.

    help=f"the first config {READY}, ..."    # READY (what it means), then READY alone

Every `--help` page that uses one of these words defines it at its first use
(tests/cli/test_words.py reads every page): READY, restart-bound, τ and T = 0.
"""

from __future__ import annotations

READY = (
    "READY (the readiness protocol's verdict: the old instance is gone, the new one serves "
    "the requested config and answers real generations)"
)
T0 = "T = 0 (greedy decoding: the target's most likely token at every step)"
TAU = "τ (acceptance length: tokens committed per verify round, the bonus token included)"
RESTART_BOUND = (
    "restart-bound (a race decided start by start, several benches per start, because a "
    "restart costs more than a bench)"
)
TERMS = {
    "READY": READY,
    "T = 0": T0,
    "τ": TAU,
    "restart-bound": RESTART_BOUND,
}

__all__ = ["READY", "RESTART_BOUND", "T0", "TAU", "TERMS"]
