"""ddtune: find and prove the best DDTree speculative-decoding configuration.

Packages, lowest layer first (docs/architecture.md "Layers"): `errors`,
`lazy`, `extras`; `tables`, `jsonl`, `assets`, `fingerprint`; `methods`; `params`;
`stats`; `engines`; `ddtree`; `train`; `records`; `services`, `bench`, `server`;
`report`; `trace`; `sweep`; `cli`, `launchers`.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
