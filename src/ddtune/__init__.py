"""ddtune: find and prove the best DDTree speculative-decoding configuration."""

__version__ = "0.1.0"
