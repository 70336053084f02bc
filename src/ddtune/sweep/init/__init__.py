"""`ddtune sweep init`: a spec from the service as it runs today.

    source = from_unit("sglang-kimi.service")      # or from_command([...])
    result = build_spec(source, front=sys.executable)
    write_spec(Path("kimi.toml"), result.text, force=False)

`source.py` reads the launch command (a systemd unit or an argv),
`parse.py` reads it as its engine does, `method_space.py` maps the method and its
knobs to the space around the current config (one function), `sizing.py`
sizes the bench and the expected costs from the model's files, `render.py`
writes the commented TOML, `build.py` puts them together; the command line
is `ddtune.cli.sweep_init`. See docs/production.md.
"""

from ddtune.sweep.init.build import InitResult, build_spec, write_spec
from ddtune.sweep.init.source import LaunchSource, from_command, from_unit

__all__ = ["InitResult", "LaunchSource", "build_spec", "from_command", "from_unit", "write_spec"]
