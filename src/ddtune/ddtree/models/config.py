"""Model configurations parsed from (and written back to) Hugging Face `config.json` files.

Three dataclasses:

    ModelConfig    a Qwen3ForCausalLM or LlamaForCausalLM target decoder
    DrafterConfig  a DFlash drafter (z-lab format): Qwen3-style layers plus
                   `block_size` and `dflash_config {target_layer_ids, mask_token_id}`
    Eagle3Config   an EAGLE-3 head as released heads write it (`LlamaForCausalLMEagle3`):
                   one Llama layer plus `draft_vocab_size` and
                   `eagle_config {eagle_aux_hidden_state_layer_ids}`

Unknown or unsupported settings are errors, never silently ignored: an
unsupported architecture, rope type, activation or sliding window raises
`UserError` naming the file and the field.

See docs/ddtree.md "Engine".
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Self

from ddtune.errors import UserError

FAMILIES = {"Qwen3ForCausalLM": "qwen3", "LlamaForCausalLM": "llama"}
DRAFTER_ARCHITECTURE = "DFlashDraftModel"
EAGLE3_ARCHITECTURE = "LlamaForCausalLMEagle3"  # vLLM maps it to Eagle3LlamaForCausalLM
EAGLE3_ARCHITECTURES = (EAGLE3_ARCHITECTURE, "Eagle3LlamaForCausalLM")
ROPE_TYPES = ("default", "linear", "llama3")
_REQUIRED = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
)


@dataclass
class ModelConfig:
    """Everything our decoder needs; field names follow Hugging Face."""

    family: str  # "qwen3" | "llama"
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_scaling: dict[str, Any] | None = None  # None or {"rope_type": "llama3"|"linear", ...}
    max_position_embeddings: int = 4096
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    mlp_bias: bool = False
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None
    torch_dtype: str = "float32"

    @property
    def architecture(self) -> str:
        return {v: k for k, v in FAMILIES.items()}[self.family]

    @property
    def uses_qk_norm(self) -> bool:
        return self.family == "qwen3"

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "config.json") -> ModelConfig:
        archs = data.get("architectures") or []
        arch = archs[0] if archs else None
        if arch not in FAMILIES:
            raise UserError(
                f"{source}: field 'architectures' is {archs!r}; supported: {', '.join(FAMILIES)}"
            )
        return cls(family=FAMILIES[arch], **_common_fields(data, source))

    @classmethod
    def from_file(cls, path: str | Path) -> Self:
        config = cls.from_dict(read_json(path), str(path))
        assert isinstance(config, cls)
        return config

    def to_hf_dict(self) -> dict[str, Any]:
        """A config.json that transformers loads (v4-style rope fields)."""
        out = _hf_dict(self, self.architecture, self.family, {})
        if self.family == "llama":
            out["mlp_bias"] = self.mlp_bias
            out["pretraining_tp"] = 1
        else:
            out["use_sliding_window"] = False
        return out

    def save(self, path: str | Path) -> None:
        write_json(path, self.to_hf_dict())


@dataclass
class DrafterConfig(ModelConfig):
    """A DFlash drafter: Qwen3-style layers fed by the target's hidden states.

    `target_layer_ids[i]` names the output of target decoder layer i (HF
    `hidden_states[i + 1]`); their concatenation goes through `fc`.
    """

    block_size: int = 16
    target_layer_ids: list[int] = field(default_factory=list)
    mask_token_id: int = 0
    num_target_layers: int | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "config.json") -> DrafterConfig:
        archs = data.get("architectures") or []
        if DRAFTER_ARCHITECTURE not in archs:
            raise UserError(
                f"{source}: field 'architectures' is {archs!r}; a DFlash drafter "
                f"needs {DRAFTER_ARCHITECTURE!r}"
            )
        dflash = data.get("dflash_config")
        if not isinstance(dflash, dict):
            raise UserError(
                f"{source}: field 'dflash_config' is missing (a DFlash drafter needs it)"
            )
        ids = _require(dflash, "target_layer_ids", f"{source}: dflash_config")
        mask = _require(dflash, "mask_token_id", f"{source}: dflash_config")
        if not ids or not all(isinstance(i, int) and i >= 0 for i in ids):
            raise UserError(f"{source}: dflash_config.target_layer_ids must be non-negative ints")
        block = int(_require(data, "block_size", source))
        if block < 2:
            raise UserError(f"{source}: field 'block_size' must be at least 2; got {block}")
        return cls(
            family="qwen3",
            block_size=block,
            target_layer_ids=[int(i) for i in ids],
            mask_token_id=int(mask),
            num_target_layers=data.get("num_target_layers"),
            **_common_fields(data, source),
        )

    def to_hf_dict(self) -> dict[str, Any]:
        own: dict[str, Any] = {
            "block_size": self.block_size,
            "dflash_config": {
                "target_layer_ids": list(self.target_layer_ids),
                "mask_token_id": self.mask_token_id,
            },
        }
        if self.num_target_layers is not None:
            own["num_target_layers"] = self.num_target_layers
        out = _hf_dict(self, DRAFTER_ARCHITECTURE, "qwen3", own)
        out["use_sliding_window"] = False
        return out

    def check_target(self, target: ModelConfig, source: str = "drafter config.json") -> None:
        """The drafter must fit the target it reads hidden states from."""
        if target.hidden_size != self.hidden_size:
            raise UserError(
                f"{source}: hidden_size {self.hidden_size} differs from the target's "
                f"{target.hidden_size}; the drafter belongs to another target"
            )
        bad = [i for i in self.target_layer_ids if i >= target.num_hidden_layers]
        if bad:
            raise UserError(
                f"{source}: dflash_config.target_layer_ids {bad} exceed the target's "
                f"{target.num_hidden_layers} layers"
            )
        if not 0 <= self.mask_token_id < target.vocab_size:
            raise UserError(f"{source}: dflash_config.mask_token_id is outside the target vocab")


@dataclass
class Eagle3Config(ModelConfig):
    """An EAGLE-3 head: one Llama decoder layer over [token embedding ; target features].

    `aux_layer_ids` are in vLLM's convention: id j is the target's residual stream
    entering decoder layer j (the output of layer j - 1, before any final norm).
    SGLang reads the same config field one layer deeper (id j: the stream leaving
    layer j), so a head trained for vLLM's ids serves SGLang with each id minus one
    (docs/engines.md "EAGLE-3 on vLLM"). Empty: the engines' default
    (2, n // 2, n - 3), the same layers in both.

    `draft_vocab_size` < `vocab_size`: the head scores a subset of the target's
    tokens; its weights carry `d2t` (draft id -> target id offset) and `t2d`.
    """

    draft_vocab_size: int = 0
    aux_layer_ids: list[int] = field(default_factory=list)
    target_hidden_size: int | None = None  # None: the head's own hidden_size

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "config.json") -> Eagle3Config:
        archs = data.get("architectures") or []
        if not set(archs) & set(EAGLE3_ARCHITECTURES):
            raise UserError(
                f"{source}: field 'architectures' is {archs!r}; an EAGLE-3 head needs "
                f"{EAGLE3_ARCHITECTURE!r}"
            )
        eagle = data.get("eagle_config") or {}
        ids = data.get("eagle_aux_hidden_state_layer_ids") or eagle.get(
            "eagle_aux_hidden_state_layer_ids"
        )
        if ids is not None and not all(isinstance(i, int) and i >= 0 for i in ids):
            raise UserError(f"{source}: eagle_aux_hidden_state_layer_ids must be non-negative ints")
        fields = _common_fields(data, source)
        if fields["num_hidden_layers"] != 1:
            raise UserError(f"{source}: an EAGLE-3 head has one layer (num_hidden_layers 1)")
        return cls(
            family="llama",
            draft_vocab_size=int(data.get("draft_vocab_size") or fields["vocab_size"]),
            aux_layer_ids=[int(i) for i in ids or []],
            target_hidden_size=data.get("target_hidden_size"),
            **fields,
        )

    def to_hf_dict(self) -> dict[str, Any]:
        own: dict[str, Any] = {
            "draft_vocab_size": self.draft_vocab_size,
            "eagle_config": {"use_aux_hidden_state": True},
            "pretraining_tp": 1,
        }
        if self.aux_layer_ids:
            own["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = list(self.aux_layer_ids)
        if self.target_hidden_size not in (None, self.hidden_size):
            own["target_hidden_size"] = self.target_hidden_size
        return _hf_dict(self, EAGLE3_ARCHITECTURE, "llama", own)

    def layer_ids(self, num_target_layers: int) -> list[int]:
        """The aux ids in force for a target of that depth (the engines' default if unset)."""
        n = num_target_layers
        return list(self.aux_layer_ids) or [2, n // 2, n - 3]

    def check_target(self, target: ModelConfig, source: str = "EAGLE-3 config.json") -> None:
        """The head must fit the target whose features and vocabulary it uses."""
        width = self.target_hidden_size or self.hidden_size
        if width != target.hidden_size:
            raise UserError(
                f"{source}: the target's hidden_size is {target.hidden_size}, the head "
                f"expects {width}; the head belongs to another target"
            )
        if self.vocab_size != target.vocab_size:
            raise UserError(
                f"{source}: vocab_size {self.vocab_size} differs from the target's "
                f"{target.vocab_size}; the head belongs to another target"
            )
        bad = [i for i in self.layer_ids(target.num_hidden_layers) if i > target.num_hidden_layers]
        if bad:
            raise UserError(
                f"{source}: eagle_aux_hidden_state_layer_ids {bad} exceed the target's "
                f"{target.num_hidden_layers} layers"
            )


def _common_fields(data: dict[str, Any], source: str) -> dict[str, Any]:
    """The decoder fields shared by both families and the drafter."""
    for name in _REQUIRED:
        _require(data, name, source)
    act = data.get("hidden_act", "silu")
    if act != "silu":
        raise UserError(f"{source}: field 'hidden_act' is {act!r}; only 'silu' is supported")
    if data.get("use_sliding_window"):
        raise UserError(f"{source}: field 'use_sliding_window' is true; sliding window unsupported")
    layer_types = set(data.get("layer_types") or ["full_attention"])
    if layer_types != {"full_attention"}:
        raise UserError(
            f"{source}: field 'layer_types' has {sorted(layer_types)}; only full attention"
        )
    heads = int(data["num_attention_heads"])
    theta, scaling = _rope(data, source)
    return {
        "vocab_size": int(data["vocab_size"]),
        "hidden_size": int(data["hidden_size"]),
        "intermediate_size": int(data["intermediate_size"]),
        "num_hidden_layers": int(data["num_hidden_layers"]),
        "num_attention_heads": heads,
        "num_key_value_heads": int(data.get("num_key_value_heads") or heads),
        "head_dim": int(data.get("head_dim") or int(data["hidden_size"]) // heads),
        "rms_norm_eps": float(data.get("rms_norm_eps", 1e-6)),
        "rope_theta": theta,
        "rope_scaling": scaling,
        "max_position_embeddings": int(data.get("max_position_embeddings", 4096)),
        "tie_word_embeddings": bool(data.get("tie_word_embeddings", False)),
        "attention_bias": bool(data.get("attention_bias", False)),
        "mlp_bias": bool(data.get("mlp_bias", False)),
        "bos_token_id": data.get("bos_token_id"),
        "eos_token_id": data.get("eos_token_id"),
        "torch_dtype": str(data.get("torch_dtype") or data.get("dtype") or "float32"),
    }


def _rope(data: dict[str, Any], source: str) -> tuple[float, dict[str, Any] | None]:
    """rope_theta and rope_scaling from v4 fields or the v5 `rope_parameters` dict."""
    params = data.get("rope_parameters") or {}
    theta = float(data.get("rope_theta") or params.get("rope_theta") or 10000.0)
    scaling = data.get("rope_scaling")
    if scaling is None and params.get("rope_type", "default") != "default":
        scaling = {k: v for k, v in params.items() if k != "rope_theta"}
    if not scaling:
        return theta, None
    scaling = dict(scaling)
    kind = scaling.get("rope_type") or scaling.get("type") or "default"
    if kind not in ROPE_TYPES:
        raise UserError(f"{source}: rope_scaling type {kind!r} unsupported; use {ROPE_TYPES}")
    scaling["rope_type"] = kind
    scaling.pop("type", None)
    if kind == "default":
        return theta, None
    need = ["factor"]
    if kind == "llama3":
        need += ["low_freq_factor", "high_freq_factor", "original_max_position_embeddings"]
    for name in need:
        _require(scaling, name, f"{source}: rope_scaling")
    return theta, scaling


def _hf_dict(
    cfg: ModelConfig, architecture: str, model_type: str, own: dict[str, Any]
) -> dict[str, Any]:
    """A config.json: the architecture and model type, `own` fields, the shared decoder fields."""
    head = {"architectures": [architecture], "model_type": model_type, "hidden_act": "silu"}
    return {**head, **own, **_common_hf_fields(cfg)}


def _common_hf_fields(cfg: ModelConfig) -> dict[str, Any]:
    skip = {"family", "block_size", "target_layer_ids", "mask_token_id", "num_target_layers"}
    skip |= {"draft_vocab_size", "aux_layer_ids", "target_hidden_size"}
    out = {k: v for k, v in asdict(cfg).items() if k not in skip}
    if cfg.family == "qwen3" or isinstance(cfg, DrafterConfig):
        out.pop("mlp_bias")
    if out["rope_scaling"] is None:
        out.pop("rope_scaling")
    return out


def _require(data: dict[str, Any], name: str, source: str) -> Any:
    if data.get(name) is None:
        raise UserError(f"{source}: required field '{name}' is missing")
    return data[name]


def read_json(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path} is missing; a Hugging Face model folder needs it")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise UserError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UserError(f"{path} must hold a JSON object")
    return data


def write_json(path: str | Path, data: dict[str, Any]) -> None:
    Path(path).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
