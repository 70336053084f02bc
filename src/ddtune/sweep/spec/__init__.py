"""The sweep spec: a TOML file parsed strictly into a `SweepSpec` of objects.

    from ddtune.sweep.plan import read_spec     # the spec's strategy checked by its table
    spec = read_spec("examples/demo.toml")    # UserError naming the key and its line

`schema` (the tables as strict pydantic models), `parse` (`SweepSpec`,
`Config`, the configurations of the grid; `parse_spec(text, strategies)` asks
the strategy table for the rules of the strategy the spec names), `checks`
(cross-key rules every strategy shares; `StrategyRules`),
`space` (the search space of `strategy = "optuna"`), `cluster` (`[cluster]`:
where the trials run), `lines` (where a key is written, for errors).
"""

from ddtune.sweep.spec.checks import StrategyRules
from ddtune.sweep.spec.parse import Config, SweepSpec

__all__ = ["Config", "StrategyRules", "SweepSpec"]
