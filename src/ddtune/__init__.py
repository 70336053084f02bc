"""ddtune: find and prove the best DDTree speculative-decoding configuration.

Packages, lowest layer first (docs/architecture.md "Layers"): `errors`,
`lazy`; `tables`, `jsonl`, `assets`; `params`; `stats`; `kinds`; `engine`;
`train`; `services`, `bench`, `server`; `report`; `sweep`; `cli`, `launchers`.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
