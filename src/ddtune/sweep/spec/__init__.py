"""The sweep spec: a TOML file parsed strictly into a `SweepSpec` of objects.

    from ddtune.sweep.spec import load_spec
    spec = load_spec("examples/demo.toml")    # UserError naming the key and its line

`schema` (the tables as strict pydantic models), `load` (`SweepSpec`,
`Config`, the configurations of the grid), `checks` (cross-key rules),
`space` (the search space of `strategy = "optuna"`), `cluster` (`[cluster]`:
where the trials run), `lines` (where a key is written, for errors).
"""

from ddtune.sweep.spec.load import Config, SweepSpec, load_spec, parse_spec

__all__ = [
    "Config",
    "SweepSpec",
    "load_spec",
    "parse_spec",
]
