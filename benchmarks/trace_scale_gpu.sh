#!/usr/bin/env bash
# Traces at scale on a GPU machine (one GPU is enough): the realistic model's plan against
# torch's measured peak allocation, and its time, on cuda:0; then the fingerprint and the
# 1T-MoE plan. Needs the transformers extra: pip install -e '.[transformers]'.
# Prints the lines docs/benchmarks.md "Traces at scale" quotes. About 2-4 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv
"$PY" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'"
"$PY" benchmarks/trace_scale.py --device cuda:0
