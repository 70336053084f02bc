"""`ddtune serve`: an OpenAI-compatible HTTP server around one DDTree `Engine`.

See docs/architecture.md "Server".

config.py      ServeConfig (flags / TOML), a pydantic model holding a DecodeParams
state.py       ServerState: lifecycle, live decoding config, identity, reports
worker.py      the single generation thread and its FIFO queue
requests.py    request bodies as pydantic models (one per endpoint), resolved into work
fields.py      field policies (`Only`, `must_be`) and the declared vLLM / chat extension fields
logprobs.py    logprobs in the completions and chat shapes
prompts.py     PromptContext: the loaded model as validation sees it; prompt -> token ids
schema.py      response models and the OpenAPI document (/openapi.json, /docs)
chat.py        chat templates (tokenizer_config.json, jinja2 or plain fallback)
responses.py   response bodies, SSE chunks, safe incremental text
generation.py  completion/chat endpoints (streaming, cancellation)
app.py         the FastAPI app and its admin endpoints
limits.py      ASGI body guard: size limit (413), read deadline (408), dropped uploads
jsonbody.py    strict JSON decoding of request bodies (depth, digits, lone surrogates)
errors.py      OpenAI-style error bodies; pydantic errors → `param`
metrics.py     Prometheus metrics in a per-app registry
identity.py    instance id, weight sha256, versions
lifecycle.py   process lifecycle: bind, load, ready line, drain on SIGTERM/SIGINT
commands.py    the `serve` subcommand (flags → ServeConfig)
"""
