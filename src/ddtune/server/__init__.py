"""`ddtune serve`: an OpenAI-compatible HTTP server around one DDTree `Engine`.

config.py      ServeConfig (flags / TOML)
state.py       ServerState: lifecycle, live decoding config, identity, reports
worker.py      the single generation thread and its FIFO queue
requests.py    strict OpenAI request validation
chat.py        chat templates (tokenizer_config.json, jinja2 or plain fallback)
responses.py   response bodies, SSE chunks, safe incremental text
generation.py  completion/chat endpoints (streaming, cancellation)
app.py         the FastAPI app and its admin endpoints
metrics.py     Prometheus metrics in a per-app registry
identity.py    instance id, weight sha256, versions
launcher.py    bind, load, announce readiness, drain on SIGTERM/SIGINT
"""
