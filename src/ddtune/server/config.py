"""`ServeConfig`: everything `ddtune serve` needs to start, from flags and/or a TOML file.

See docs/server.md "Server". The TOML file uses the flag names as keys
(dashes or underscores), e.g.

    target = "models/target"
    drafter = "models/drafter"
    mode = "ddtree"
    budget = 32
    topk = 4
    window = "none"
    port = 8000
    max_queue = 64
    max_batch = 8
    max_step_tokens = 2048
    grace_seconds = 10
    max_request_bytes = 4194304
    body_timeout_seconds = 30
    strict_requests = false
    schedule = "report/results.json"   # or schedule.json: switch configs by requests in flight

`mode/budget/topk/window` form the `params` field (a `DecodeParams`, read
with `DecodeParams.with_updates`); every other key is a field of the model.
Unknown keys are an error naming the key; flags given on the command line
override the file.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from ddtune.ddtree.batch.budget import DEFAULT_MAX_BATCH, DEFAULT_MAX_STEP_TOKENS
from ddtune.errors import UserError
from ddtune.params import PARAM_KEYS, DecodeParams
from ddtune.tables import StrictModel, parse_table


def _expand(path: Path | None) -> Path | None:
    return None if path is None else path.expanduser()


DEFAULT_MAX_REQUEST_BYTES = 4 << 20  # 4 MiB: a 128k-token prompt as text or as token ids


# TOML and flags give folders as text: the one lax field type.
Folder = Annotated[Path | None, Field(strict=False), AfterValidator(_expand)]


class ServeConfig(StrictModel):
    target: Folder = None  # None = the bundled target model
    drafter: Folder = None  # None = the bundled drafter (if present)
    params: DecodeParams = DecodeParams()
    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535)] = 8000  # 0 = any free port (see the ready line)
    max_queue: Annotated[int, Field(ge=1)] = 64  # requests waiting behind the running ones
    max_batch: Annotated[int, Field(ge=1)] = DEFAULT_MAX_BATCH  # 1 = one request at a time
    max_step_tokens: Annotated[int, Field(ge=1)] = DEFAULT_MAX_STEP_TOKENS  # verify + prefill
    grace_seconds: Annotated[float, Field(ge=0.0)] = 10.0  # SIGTERM: time to finish requests
    model_name: str | None = None  # None = the target folder's name
    health_timeout_s: Annotated[float, Field(gt=0.0)] = 30.0  # /health_generate deadline
    max_request_bytes: Annotated[int, Field(ge=1024)] = DEFAULT_MAX_REQUEST_BYTES  # else 413
    body_timeout_seconds: Annotated[float, Field(gt=0.0)] = 30.0  # whole body by then, else 408
    strict_requests: bool = False  # unknown request fields: 400 instead of reported and ignored
    schedule: Folder = None  # JSON: the config per range of requests in flight (server/state.py)

    @classmethod
    def from_toml(cls, path: Path) -> ServeConfig:
        try:
            data = tomllib.loads(Path(path).read_text())
        except FileNotFoundError:
            raise UserError(f"config file not found: {path}") from None
        except tomllib.TOMLDecodeError as exc:
            raise UserError(f"config file {path} is not valid TOML: {exc}") from None
        try:
            return cls().with_overrides(data)
        except UserError as exc:
            raise UserError(f"{path}: {exc}", key=exc.key) from None

    def with_overrides(self, values: Mapping[str, Any]) -> ServeConfig:
        """Apply `{key: value}` in wire form (None values are skipped); strict about keys."""
        given = {key.replace("-", "_"): v for key, v in values.items() if v is not None}
        known = set(PARAM_KEYS) | set(ServeConfig.model_fields) - {"params"}
        unknown = sorted(set(given) - known)
        if unknown:
            raise UserError(
                f"unknown serve setting {unknown[0]}; expected some of {', '.join(sorted(known))}",
                key=unknown[0],
            )
        params = self.params.with_updates({k: given.pop(k) for k in PARAM_KEYS if k in given})
        current = {name: getattr(self, name) for name in ServeConfig.model_fields}
        return parse_table(ServeConfig, {**current, **given, "params": params})
