"""The DDTree engine: own Qwen3/Llama decoders, the DFlash drafter, tree drafting and exact verification.

Modules, in reading order: `config` (HF config.json), `layers`, `model` (target
decoder), `drafter` (DFlash), `cache` (KV cache), `loading` (HF folders),
`tokenizer`, `testing` (random tiny checkpoints), then decoding: `tree`,
`sampling`, `generate` (`Engine`).
"""
