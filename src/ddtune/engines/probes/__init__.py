"""Scripts ddtune runs inside an engine's own Python: its argument parser, without a model.

    from ddtune.engines.probes import probe_source
    source = probe_source("sglang")   # run as `ENGINE_PYTHON -c source`

`protocol.py` is the request loop every probe shares (JSON lines: `info`,
then one `check` per launch command) and its helpers; `sglang.py` and
`vllm.py` define the engine's side (`engine_info()`, `check(args, env,
check_env)`). The program installs both modules from their text under their
own names (`sys.modules`), so nothing of ddtune has to be importable in the
engine's environment and no file has to be readable by the service's user.
ddtune itself never runs these modules: they import the engine, inside their
functions. `ddtune.engines.parser_probe` runs them.
"""

from __future__ import annotations

from pathlib import Path

PROBES = ("sglang", "vllm")
_HERE = Path(__file__).parent


BOOTSTRAP = """import sys, types
def _install(name, text):
    module = types.ModuleType(name)
    module.__file__ = "<ddtune probe " + name + ">"
    sys.modules[name] = module
    exec(compile(text, module.__file__, "exec"), module.__dict__)
    return module
loop = _install("ddtune.engines.probes.protocol", {loop!r})
side = _install("ddtune.engines.probes.{engine}", {side!r})
loop.serve(side.engine_info, side.check)
"""


def probe_source(engine: str) -> str:
    """The program for `python -c`: installs the loop and the engine's module, then serves."""
    if engine not in PROBES:
        raise ValueError(f"no argument probe for engine {engine!r}; known: {', '.join(PROBES)}")
    loop = (_HERE / "protocol.py").read_text()
    side = (_HERE / f"{engine}.py").read_text()
    return BOOTSTRAP.format(loop=loop, side=side, engine=engine)


__all__ = ["PROBES", "probe_source"]
