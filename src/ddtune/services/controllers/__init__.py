"""One controller per control (how a service is stopped and started), each running the
readiness protocol of `services/protocol.py`.

    process   a local child process started from an argv (ddtune serve, SGLang, vLLM, anything)
    systemd   a unit reconfigured through a runtime drop-in, stopped then started
    hooks     user shell commands stop/start/logs (docker, Kubernetes, Slurm, ...)
    hot       a running `ddtune serve` reconfigured in place (POST /v1/ddtree/config)

`ddtune.services.build_controller(spec, workdir)` picks one by `spec.control`.
"""

from ddtune.services.controllers.hooks import HooksController
from ddtune.services.controllers.hot import HotController
from ddtune.services.controllers.process import ProcessController
from ddtune.services.controllers.systemd import SystemdController

__all__ = [
    "HooksController",
    "HotController",
    "ProcessController",
    "SystemdController",
]
