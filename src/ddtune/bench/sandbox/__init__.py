"""Run untrusted, model-written code against a trusted test, contained.

    from ddtune.bench.sandbox import run_program
    result = run_program(program, test, entry_point)   # ExecResult: passed, reason, ...

`checker` (the parent side: limits, the verdict), `isolation` (which
containment this machine gives, decided once), `harness` (runs inside the
sandbox as a script: the tested process and its checker), `jail` (kernel-side
walls: filesystem, privileges, leftovers), `wire` (plain-data messages between
checker and tested process). `harness`, `jail` and `wire` are loaded inside
the sandbox from their files with the standard library only.
"""

from ddtune.bench.sandbox.checker import (
    ExecResult,
    SandboxError,
    SandboxLimits,
    isolation_notes,
    run_program,
)

__all__ = [
    "ExecResult",
    "SandboxError",
    "SandboxLimits",
    "isolation_notes",
    "run_program",
]
