"""Live `ddtune serve` + the official `openai` client: completions and chat, streaming
and not, equal to `ddtune generate --json` at T=0, stop strings, 20 concurrent
clients, and cancellation when a client disconnects."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ddtune.ddtree.models.tokenizer import Tokenizer
from ddtune.server.api.chat import ChatTemplate

PROMPT = "def add(a, b):\n"
MAX_TOKENS = 24


def client(server) -> openai.OpenAI:  # noqa: ANN001 - the ServerProcess fixture
    return openai.OpenAI(
        base_url=server.base_url + "/v1", api_key="none", max_retries=0, timeout=120
    )


CHAT = [{"role": "system", "content": "be terse"}, {"role": "user", "content": "sum 2 3"}]
RENDERED_CHAT = "<system>be terse\n<user>sum 2 3\n<assistant>"

# Runs `ddtune generate ... --json` once per prompt in ONE interpreter (one torch import).
GENERATE_EACH = """
import sys
from ddtune.cli import main
target, drafter, max_tokens, *prompts = sys.argv[1:]
for prompt in prompts:
    main(["generate", "--target", target, "--drafter", drafter, "--mode", "ddtree",
          "--budget", "8", "--topk", "3", "--max-tokens", max_tokens, "--temperature", "0",
          "--prompt", prompt, "--json"])
"""


@pytest.fixture(scope="module")
def references(checkpoint: tuple[Path, Path]) -> dict[str, dict]:
    """prompt -> the `ddtune generate --json` object, with the server's decoding config."""
    prompts = [PROMPT, RENDERED_CHAT]
    argv = [sys.executable, "-c", GENERATE_EACH, *map(str, checkpoint), str(MAX_TOKENS), *prompts]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == len(prompts), out.stdout
    return {prompt: json.loads(line) for prompt, line in zip(prompts, lines, strict=True)}


def metric(server, name: str, **labels: str) -> float:  # noqa: ANN001
    text = httpx.get(server.base_url + "/metrics", timeout=30).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    raise AssertionError(f"metric {name} {labels} not found")


def complete(server, prompt: str, **kwargs) -> openai.types.Completion:  # noqa: ANN001
    kwargs = {"max_tokens": MAX_TOKENS, "temperature": 0, **kwargs}
    return client(server).completions.create(model="tiny", prompt=prompt, **kwargs)


def test_completion_equals_generate_cli(server, checkpoint, references) -> None:  # noqa: ANN001
    reference = references[PROMPT]
    response = complete(server, PROMPT)
    choice = response.choices[0]
    assert choice.text == reference["text"]
    tokenizer = Tokenizer.load(checkpoint[0])  # char-level: the text maps back to its ids
    assert tokenizer.encode(choice.text) == reference["token_ids"]
    assert response.usage.completion_tokens == len(reference["token_ids"])
    assert response.usage.prompt_tokens == len(PROMPT)  # the char tokenizer: one id per char
    assert choice.finish_reason in ("length", "stop")
    spec = response.usage.model_dump()["spec"]
    assert spec["rounds"] >= 1
    assert spec["mean_acceptance_length"] == pytest.approx(
        response.usage.completion_tokens / spec["rounds"]
    )
    assert 0 <= spec["accepted_tokens"] <= response.usage.completion_tokens
    assert response.system_fingerprint.startswith("ddtune-")


def test_streaming_completion_equals_non_streaming(server) -> None:  # noqa: ANN001
    full = complete(server, PROMPT)
    chunks = list(complete(server, PROMPT, stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == full.choices[0].text
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == full.choices[
        0
    ].finish_reason
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == full.usage.completion_tokens
    assert chunks[-1].usage.model_dump()["spec"] == full.usage.model_dump()["spec"]


def test_chat_equals_generate_cli_on_the_rendered_prompt(server, checkpoint, references) -> None:  # noqa: ANN001
    messages = CHAT
    rendered = ChatTemplate.from_model_dir(checkpoint[0]).render(messages)
    assert rendered == RENDERED_CHAT
    reference = references[rendered]
    chat = client(server).chat.completions
    response = chat.create(model="tiny", messages=messages, max_tokens=MAX_TOKENS, temperature=0)
    assert response.choices[0].message.role == "assistant"
    assert response.choices[0].message.content == reference["text"]
    assert response.usage.prompt_tokens == len(rendered)
    stream = chat.create(
        model="tiny", messages=messages, max_tokens=MAX_TOKENS, temperature=0, stream=True
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == reference["text"]


def test_stop_string_cuts_streamed_and_plain_text(server) -> None:  # noqa: ANN001
    no_eos = {"extra_body": {"ignore_eos": True}}
    text = complete(server, PROMPT, **no_eos).choices[0].text
    assert len(text) >= 8
    stop = text[6:8]
    expected = text[: text.find(stop)]
    plain = complete(server, PROMPT, stop=[stop, "@@never@@"], **no_eos)
    assert plain.choices[0].text == expected
    assert plain.choices[0].finish_reason == "stop"
    streamed = complete(server, PROMPT, stop=stop, stream=True, **no_eos)
    assert "".join(c.choices[0].text for c in streamed) == expected


def test_twenty_concurrent_clients_get_the_sequential_answers(server) -> None:  # noqa: ANN001
    prompts = [f"x = {i} * {i + 1}\n" for i in range(20)]
    sequential = [complete(server, p, max_tokens=8).choices[0].text for p in prompts]
    with ThreadPoolExecutor(max_workers=20) as pool:
        concurrent = list(
            pool.map(lambda p: complete(server, p, max_tokens=8).choices[0].text, prompts)
        )
    assert concurrent == sequential
    assert len(set(sequential)) > 1  # different prompts, different answers: a real check


def test_seeded_sampling_is_reproducible(server) -> None:  # noqa: ANN001
    a = complete(server, PROMPT, temperature=1.0, top_p=0.9, seed=11).choices[0].text
    b = complete(server, PROMPT, temperature=1.0, top_p=0.9, seed=11).choices[0].text
    assert a == b


def test_disconnect_cancels_running_and_drops_queued_work(server_factory, checkpoint) -> None:  # noqa: ANN001
    """With --max-batch 1 a second request waits in the queue behind the running one."""
    target, drafter = checkpoint
    server = server_factory(
        ["--target", str(target), "--drafter", str(drafter), "--max-batch", "1"]
        + ["--model-name", "tiny"]
    )
    cancelled = metric(server, "ddtune_cancelled_total")
    generated = metric(server, "ddtune_generated_tokens_total")
    prompted = metric(server, "ddtune_prompt_tokens_total")
    body = {
        "prompt": PROMPT,
        "max_tokens": 1900,
        "temperature": 0,
        "ignore_eos": True,
        "stream": True,
    }
    with (
        httpx.Client(timeout=60) as http,
        http.stream("POST", server.base_url + "/v1/completions", json=body) as response,
    ):
        assert response.status_code == 200
        lines = response.iter_lines()  # keep a reference: a collected iterator closes the stream
        next(lines)  # the first chunk arrived: the job is running
        # 1. A plain request queued behind it whose client gives up: dropped unrun.
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(
                server.base_url + "/v1/completions",
                timeout=1.5,
                json={"prompt": "zzzz", "max_tokens": 4, "temperature": 0},
            )
        assert server.wait_until(
            lambda: metric(server, "ddtune_cancelled_total") == cancelled + 1, 30
        )
        assert metric(server, "ddtune_queue_depth") == 0
        assert metric(server, "ddtune_running_requests") == 1
    # 2. The stream is closed here: the worker must stop after its current round.
    assert server.wait_until(lambda: metric(server, "ddtune_cancelled_total") == cancelled + 2, 30)
    assert server.wait_until(lambda: metric(server, "ddtune_running_requests") == 0, 30)
    assert metric(server, "ddtune_generated_tokens_total") - generated < 1900
    ran = metric(server, "ddtune_prompt_tokens_total") - prompted
    assert ran == len(PROMPT)  # only the long prompt ran: "zzzz" was dropped from the queue
    assert complete(server, PROMPT, max_tokens=2).usage.completion_tokens == 2  # still serving


LONG_STREAM = {
    "prompt": PROMPT,
    "max_tokens": 1900,
    "temperature": 0,
    "ignore_eos": True,
    "stream": True,
}


def test_disconnect_cancels_one_request_of_a_batch(server) -> None:  # noqa: ANN001
    """Batched: a request runs beside a long stream; closing the stream cancels it alone."""
    alone = complete(server, "x = 1\n").choices[0].text
    cancelled = metric(server, "ddtune_cancelled_total")
    rounds = metric(server, "ddtune_batch_size_count")
    with (
        httpx.Client(timeout=60) as http,
        http.stream("POST", server.base_url + "/v1/completions", json=LONG_STREAM) as response,
    ):
        lines = response.iter_lines()
        next(lines)  # the long stream is running
        beside = complete(server, "x = 1\n")  # joins the running batch
        assert beside.choices[0].text == alone
        assert beside.usage.model_dump()["spec"]["mean_batch_size"] == 2.0  # usage says so
        assert metric(server, "ddtune_running_requests") == 1
    assert server.wait_until(lambda: metric(server, "ddtune_cancelled_total") == cancelled + 1, 30)
    assert server.wait_until(lambda: metric(server, "ddtune_running_requests") == 0, 30)
    batched = metric(server, "ddtune_batch_size_sum") - metric(server, "ddtune_batch_size_count")
    assert metric(server, "ddtune_batch_size_count") > rounds and batched > 0  # 2-row rounds
