"""Bundled data: the demo models and the held-out coding tasks.

Layout (created by `ddtune train`, committed once):

    assets/models/target/    Qwen3-architecture code LM, Hugging Face format
    assets/models/drafter/   its DFlash drafter (public z-lab format)
    assets/models/eagle3/    its EAGLE-3 head (the layout vLLM and SGLang load)
    assets/tasks/heldout.jsonl   HumanEval-format held-out coding tasks
"""

from __future__ import annotations

from pathlib import Path

from ddtune.errors import UserError

ASSETS_DIR = Path(__file__).resolve().parent
MODELS_DIR = ASSETS_DIR / "models"
TASKS_FILE = ASSETS_DIR / "tasks" / "heldout.jsonl"


def default_target_dir() -> Path:
    return _require(MODELS_DIR / "target", "config.json", "the bundled target model")


def default_drafter_dir() -> Path:
    return _require(MODELS_DIR / "drafter", "config.json", "the bundled drafter")


def default_eagle3_dir() -> Path:
    return _require(MODELS_DIR / "eagle3", "config.json", "the bundled EAGLE-3 head")


def default_tasks_file() -> Path:
    if not TASKS_FILE.is_file():
        raise UserError(
            f"the bundled coding tasks are missing ({TASKS_FILE}); "
            "run `ddtune train tasks` or pass a HumanEval-format JSONL"
        )
    return TASKS_FILE


def _require(folder: Path, marker: str, what: str) -> Path:
    if not (folder / marker).is_file():
        raise UserError(
            f"{what} is missing ({folder}); train it with `ddtune train` "
            "(see src/ddtune/assets/models/MODEL_CARD.md) or pass --target/--drafter"
        )
    return folder
