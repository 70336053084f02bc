"""`ddtune sweep watch`: a live page of a sweep, read from its store (read only) and the
report folder the runner rewrites after every pass.

    from ddtune.sweep.watch import serve_watch, read_state
    serve_watch(Path("runs/x/store.sqlite"), None, "127.0.0.1", 8780, 2.0)   # until Ctrl-C
    state = read_state(Path("runs/x/store.sqlite"))   # what the page shows, as data

`state.py` reads, `page.py` renders (a report `Document`), `server.py` serves.
See docs/watch.md.
"""

from ddtune.sweep.watch.server import Snapshot, create_watch_app, serve_watch, state_dict
from ddtune.sweep.watch.state import LiveState, read_state

__all__ = ["LiveState", "Snapshot", "create_watch_app", "read_state", "serve_watch", "state_dict"]
