"""Issue 15: third-party clients, unmodified, against `ddtune serve` (slow; their own venv).

- guidellm 0.8.1 `run`, streaming, synthetic 64/64-token data, the bundled target
  folder as its processor, chat and completions;
- aiperf 0.13.0 `profile`, streaming completions and chat (the chat run asks for
  per-chunk usage, i.e. vLLM's `continuous_usage_stats`);
- lm-eval 0.4.13 `local-completions` with default settings on a generation task and
  a loglikelihood (multiple choice) task built from the held-out coding tasks;
- schemathesis 4.32.5 against ddtune's own `/openapi.json`: no 5xx, no response
  that breaks the schema, `Allow` on 405.

Each test prints one `CLIENT ...` line with the figures the client reported.
See docs/server.md "Clients" for the commands.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from clients import BUNDLED_TARGET, client_bin, run_client  # noqa: E402
from lm_eval_tasks import write_tasks  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def bundled(tmp_path_factory: pytest.TempPathFactory, common) -> Iterator[tuple[str, Any]]:  # noqa: ANN001
    """(base URL, server) of `ddtune serve` with the bundled models (model id "target")."""
    log = tmp_path_factory.mktemp("clients") / "serve.log"
    with common.serving([], log, timeout=300) as served:
        yield served.base_url, served


def report(client: str, command: list[str], figures: dict[str, object]) -> None:
    shown = " ".join(Path(a).name if a.startswith("/") else a for a in command)
    print(f"\nCLIENT {client} | {shown} | {json.dumps(figures)}")


def check(done, served) -> None:  # noqa: ANN001 - CompletedProcess, ServerProcess
    assert done.returncode == 0, (
        f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}\nserver:\n{served.log_tail(60)}"
    )


@pytest.mark.parametrize("request_format", ["/v1/chat/completions", "/v1/completions"])
def test_guidellm(bundled, tmp_path: Path, request_format: str) -> None:  # noqa: ANN001
    url, served = bundled
    out = tmp_path / "guidellm.json"
    argv = [
        client_bin("guidellm"),
        "run",
        "--backend",
        f"kind=openai_http,target={url},request_format={request_format}",
        "--profile",
        "kind=synchronous",
        "--constraint",
        "kind=max_requests,count=8",
        "--data",
        "kind=synthetic_text,prompt_tokens=64,output_tokens=64",
        "--tokenizer",
        f"kind=huggingface_auto,model={BUNDLED_TARGET}",
        "--output",
        f"kind=json,path={out}",
        "--disable-progress",
    ]
    check(run_client(argv, tmp_path, env={"HF_HUB_OFFLINE": "1"}), served)
    bench = json.loads(out.read_text())["benchmarks"][0]
    made = bench["scheduler_metrics"]["requests_made"]
    assert made["errored"] == 0 and made["successful"] >= 7, made
    metrics = bench["metrics"]

    def median(name: str) -> float:
        return round(metrics[name]["successful"]["median"], 1)

    report(
        "guidellm 0.8.1",
        argv,
        {
            "successful": made["successful"],
            "errored": made["errored"],
            "ttft_ms_median": median("time_to_first_token_ms"),
            "itl_ms_median": median("inter_token_latency_ms"),
            "output_tokens_median": median("output_token_count"),
            "output_tok_s_mean": round(
                metrics["output_tokens_per_second"]["successful"]["mean"], 1
            ),
        },
    )


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_aiperf(bundled, tmp_path: Path, endpoint: str) -> None:  # noqa: ANN001
    url, served = bundled
    out = tmp_path / "aiperf"
    argv = [
        client_bin("aiperf"),
        "profile",
        "--model",
        "target",
        "--url",
        url,
        "--endpoint-type",
        endpoint,
        "--streaming",
        "--tokenizer",
        str(BUNDLED_TARGET),
        "--synthetic-input-tokens-mean",
        "64",
        "--output-tokens-mean",
        "64",
        "--request-count",
        "8",
        "--concurrency",
        "2",
        "--extra-inputs",
        "ignore_eos:true",
        "--ui-type",
        "simple",
        "--output-artifact-dir",
        str(out),
    ]
    if endpoint == "chat":
        argv += ["--use-server-token-count", "--per-chunk-usage"]
    check(run_client(argv, tmp_path), served)
    data = json.loads((out / "profile_export_aiperf.json").read_text())
    assert data["error_summary"] == [] and data["is_complete"], data["error_summary"]
    assert data["request_count"]["avg"] == 8
    report(
        "aiperf 0.13.0",
        argv,
        {
            "requests": data["request_count"]["avg"],
            "errors": len(data["error_summary"]),
            "ttft_ms_p50": round(data["time_to_first_token"]["p50"], 1),
            "itl_ms_p50": round(data["inter_token_latency"]["p50"], 1),
            "output_tok_s": round(data["output_token_throughput"]["avg"], 1),
            "osl_avg": round(data["output_sequence_length"]["avg"], 1),
        },
    )


def test_lm_eval_local_completions(bundled, tmp_path: Path) -> None:  # noqa: ANN001
    url, served = bundled
    tasks = write_tasks(tmp_path, n=6)
    out = tmp_path / "lm-eval"
    model_args = f"model=target,base_url={url}/v1/completions,tokenizer={BUNDLED_TARGET}"
    argv = [
        client_bin("lm_eval"),
        "--model",
        "local-completions",
        "--model_args",
        model_args,
        "--tasks",
        ",".join(tasks),
        "--include_path",
        str(tmp_path),
        "--output_path",
        str(out),
    ]
    done = run_client(argv, tmp_path, env={"HF_HUB_OFFLINE": "1"})
    check(done, served)
    results = json.loads(next(out.rglob("results_*.json")).read_text())["results"]
    gen, mc = results["ddtune_heldout_gen"], results["ddtune_heldout_mc"]
    assert 0.0 <= gen["exact_match,none"] <= 1.0 and 0.0 <= mc["acc,none"] <= 1.0
    report(
        "lm-eval 0.4.13",
        argv,
        {
            "heldout_gen_exact_match": gen["exact_match,none"],
            "heldout_mc_acc": mc["acc,none"],
            "heldout_mc_acc_stderr": mc.get("acc_stderr,none"),
        },
    )


@pytest.fixture(scope="module")
def small_server(tmp_path_factory: pytest.TempPathFactory, common) -> Iterator[tuple[str, Any]]:  # noqa: ANN001
    """A random tiny model with a 128-token context: schemathesis sends many generations."""
    from ddtune.ddtree.testing import ALPHABET, write_random_checkpoint

    folder = tmp_path_factory.mktemp("schema-ckpt")
    target, drafter = write_random_checkpoint(
        folder, seed=1, vocab_size=len(ALPHABET) + 2, max_position_embeddings=128
    )
    with common.serving(common.serve_args(target, drafter), folder / "serve.log", 300) as served:
        yield served.base_url, served


CHECKS = (
    "not_a_server_error,status_code_conformance,content_type_conformance,"
    "response_headers_conformance,response_schema_conformance,unsupported_method,"
    "allow_header_conformance"
)


def test_schemathesis_on_our_openapi(small_server, tmp_path: Path) -> None:  # noqa: ANN001
    url, served = small_server
    junit = tmp_path / "junit.xml"
    argv = [
        client_bin("st"),
        "run",
        f"{url}/openapi.json",
        "--checks",
        CHECKS,
        "--max-examples",
        "30",
        "--seed",
        "1",
        "--workers",
        "2",
        "--request-timeout",
        "60",
        "--report",
        "junit",
        "--report-junit-path",
        str(junit),
    ]
    done = run_client(argv, tmp_path, timeout=1800)
    check(done, served)
    assert "Traceback" not in served.log_path.read_text()
    cases = [line.strip() for line in done.stdout.splitlines() if " generated, " in line]
    assert cases and "failed" not in cases[-1] and "errored" not in cases[-1], cases
    report("schemathesis 4.32.5", argv, {"test_cases": cases[-1], "checks": CHECKS})
