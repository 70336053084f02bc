"""The sweep spec: a TOML file parsed strictly into a `SweepSpec` of objects.

    from ddtune.sweep.spec import read_spec
    spec = read_spec("examples/demo.toml")    # UserError naming the key and its line

`schema` (the tables as strict pydantic models), `parse` (`SweepSpec`,
`Config`, the configurations of the grid), `checks` (cross-key rules),
`space` (the search space of `strategy = "optuna"`), `cluster` (`[cluster]`:
where the trials run), `lines` (where a key is written, for errors).
"""

from ddtune.sweep.spec.parse import Config, SweepSpec, parse_spec, read_spec

__all__ = [
    "Config",
    "SweepSpec",
    "read_spec",
    "parse_spec",
]
