"""What `pip install ddtune` leaves out, and the one line that says how to get it.

The core install (the apparatus: spec, services, bench, store, report, CLI)
needs neither torch nor transformers. ddtune's own engine, its server,
training and traces need the `engine` extra (pyproject.toml):

    pip install 'ddtune[engine]'

A command that needs it and runs without it ends with `engine_hint(name)`
(exit 2), never a traceback: `ddtune.cli` catches the ModuleNotFoundError of
any module in `ENGINE_MODULES`, and `require_engine()` raises it up front
where the failure would otherwise surface late (inside a server's startup).
"""

from __future__ import annotations

import importlib.util

# The distributions only the engine extra installs (transformers: a Hugging
# Face target for `trace record`, installed by the user or the test extra).
ENGINE_MODULES = frozenset({"torch", "safetensors", "tokenizers", "transformers"})
ENGINE_REQUIRED = ("torch", "safetensors", "tokenizers")


def engine_hint(missing: str) -> str:
    """The line for a user whose install lacks `missing` (a top-level module name)."""
    extra = "pip install 'ddtune[engine]'"
    if missing == "transformers":
        extra = "pip install 'ddtune[transformers]' (a Hugging Face target)"
    return f"this command needs ddtune's engine ({missing} is not installed): {extra}"


def missing_engine_module(exc: ModuleNotFoundError) -> str | None:
    """The engine-extra module `exc` is about, or None when it is about something else."""
    top = (exc.name or "").split(".")[0]
    return top if top in ENGINE_MODULES else None


def require_engine() -> None:
    """Raise ModuleNotFoundError (for the CLI's hint) unless the engine extra is installed."""
    for name in ENGINE_REQUIRED:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


__all__ = ["ENGINE_MODULES", "engine_hint", "missing_engine_module", "require_engine"]
