"""Before a recording loads anything: which models, how they load, what it will take.

`models` (the spec's own target and drafter, never a silent default),
`loading` (dtype, trust_remote_code, GPUs, offload: as the serving engine
loads them), `plan` (memory per device and time, from config.json and shard
headers; a refusal before a weight is read). Torch-free.
"""

from ddtune.trace.planning.loading import Loading
from ddtune.trace.planning.models import TraceModels, trace_models
from ddtune.trace.planning.plan import TracePlan, record_plan

__all__ = ["Loading", "TraceModels", "TracePlan", "record_plan", "trace_models"]
