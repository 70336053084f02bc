"""ddtune: find and prove the best DDTree speculative-decoding configuration.

Packages, lowest layer first (docs/architecture.md "Layers"): `params`,
`errors`, `tables`; `stats`; `kinds`; `engine`; `services`, `bench`,
`server`; `report`; `sweep`; `cli`.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
