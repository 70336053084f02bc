"""Training recipe behind the bundled models: `ddtune train ...` (see commands.py).

See docs/architecture.md "Train".
"""
