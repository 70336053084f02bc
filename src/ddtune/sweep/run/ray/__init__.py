"""The Ray backend: one sweep, many service slots, each owned by one Ray actor.

    driver  the driver's loop: trials handed to free slots; the only writer of the store
    slot    a slot's side: one controller, one attempt at a time
    pool    the Ray actors, pinned to their nodes
    view    the live progress: one bar for the sweep, one line per slot

See docs/sweeps.md "Scale out".
"""

from ddtune.sweep.run.ray.driver import SlotLoop

__all__ = ["SlotLoop"]
