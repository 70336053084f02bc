"""The OpenAI-compatible API surface of `ddtune serve`: request and response bodies, endpoints.

requests.py    request bodies as pydantic models (one per endpoint), resolved into work
fields.py      field policies (`Only`, `must_be`) and the declared vLLM / chat extension fields
prompts.py     PromptContext: the loaded model as validation sees it; prompt -> token ids
chat.py        chat templates (tokenizer_config.json, jinja2 or plain fallback)
generation.py  completion/chat endpoints (streaming, cancellation)
responses.py   response bodies, SSE chunks, safe incremental text
logprobs.py    logprobs in the completions and chat shapes
schema.py      response models and the OpenAPI document (/openapi.json, /docs)
errors.py      OpenAI-style error bodies; pydantic errors -> `param`
"""

from ddtune.server.api.errors import ApiError
from ddtune.server.api.requests import ChatBody, CompletionBody, ConfigBody, parse_body
from ddtune.server.api.schema import DocumentedApp

__all__ = [
    "ApiError",
    "ChatBody",
    "CompletionBody",
    "ConfigBody",
    "DocumentedApp",
    "parse_body",
]
