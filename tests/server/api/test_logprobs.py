"""Issue 15 item 2 on a live `ddtune serve` with the official `openai` SDK: completions
`logprobs` and `echo` (lm-eval's loglikelihood request), chat `logprobs`/`top_logprobs`,
the same logprobs in DDTree and AR, vLLM's stop-token count, `min_tokens` and `top_k`."""

from __future__ import annotations

import math

import httpx
import openai
import pytest

from ddtune.ddtree.models.tokenizer import Tokenizer

PROMPT = "def add(a, b):\n"


def client(server) -> openai.OpenAI:  # noqa: ANN001 - the ServerProcess fixture
    return openai.OpenAI(
        base_url=server.base_url + "/v1", api_key="none", max_retries=0, timeout=120
    )


def complete(server, **kwargs) -> openai.types.Completion:  # noqa: ANN001
    kwargs = {"model": "tiny", "prompt": PROMPT, "max_tokens": 8, "temperature": 0, **kwargs}
    return client(server).completions.create(**kwargs)


def set_mode(server, mode: str) -> None:  # noqa: ANN001
    body = {"mode": mode, "budget": 8, "topk": 3, "window": "none"}
    response = httpx.post(server.base_url + "/v1/ddtree/config", json=body, timeout=60)
    assert response.status_code == 200, response.text


def test_completion_logprobs(server) -> None:  # noqa: ANN001
    choice = complete(server, logprobs=3, extra_body={"ignore_eos": True}).choices[0]
    lp = choice.logprobs
    assert "".join(lp.tokens) == choice.text  # one character per token here
    assert len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.tokens) == 8
    assert lp.text_offset == [sum(len(t) for t in lp.tokens[:i]) for i in range(8)]
    for token, value, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs, strict=True):
        assert value <= 0 and 3 <= len(top) <= 4
        assert top[token] == value == max(top.values())  # T=0: the most likely token


def test_echo_with_max_tokens_zero_and_one_is_lm_evals_loglikelihood(server) -> None:  # noqa: ANN001
    zero = complete(server, max_tokens=0, echo=True, logprobs=1)
    choice = zero.choices[0]
    assert choice.text == PROMPT and zero.usage.completion_tokens == 0
    assert choice.logprobs.tokens == list(PROMPT)
    assert choice.logprobs.token_logprobs[0] is None and choice.logprobs.top_logprobs[0] is None
    assert all(v is not None and v <= 0 for v in choice.logprobs.token_logprobs[1:])
    one = complete(server, max_tokens=1, echo=True, logprobs=1).choices[0]
    assert one.text.startswith(PROMPT) and len(one.logprobs.tokens) == len(PROMPT) + 1
    assert one.logprobs.token_logprobs[: len(PROMPT)] == choice.logprobs.token_logprobs
    ids = [ord(c) - 30 for c in "def f(x):"]  # lm-eval sends token ids, one prompt per list
    raw = complete(server, prompt=[ids], max_tokens=1, echo=True, logprobs=1, seed=1234)
    assert len(raw.choices[0].logprobs.token_logprobs) == len(ids) + 1


def test_ddtree_and_ar_report_the_same_logprobs(server) -> None:  # noqa: ANN001
    kwargs = {"max_tokens": 12, "logprobs": 2, "echo": True, "extra_body": {"ignore_eos": True}}
    try:
        set_mode(server, "ar")
        ar = complete(server, **kwargs).choices[0].logprobs
        set_mode(server, "ddtree")
        tree = complete(server, **kwargs).choices[0].logprobs
    finally:
        set_mode(server, "ddtree")
    assert tree.tokens == ar.tokens
    for a, b in zip(ar.token_logprobs[1:], tree.token_logprobs[1:], strict=True):
        assert math.isclose(a, b, abs_tol=1e-4)  # float32: summation order differs
    assert [sorted(t) for t in tree.top_logprobs[1:]] == [sorted(t) for t in ar.top_logprobs[1:]]


def test_chat_logprobs(server) -> None:  # noqa: ANN001
    response = client(server).chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": "sum 2 3"}],
        max_tokens=6,
        temperature=0,
        logprobs=True,
        top_logprobs=2,
        extra_body={"ignore_eos": True},
    )
    choice = response.choices[0]
    content = choice.logprobs.content
    assert "".join(item.token for item in content) == choice.message.content
    for item in content:
        assert len(item.top_logprobs) == 2 and item.top_logprobs[0].token == item.token
        assert item.bytes == list(item.token.encode())
    with pytest.raises(openai.BadRequestError):
        client(server).chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "x"}], top_logprobs=2
        )


def test_stop_token_is_counted_like_vllm(server, checkpoint) -> None:  # noqa: ANN001
    tokenizer = Tokenizer.load(checkpoint[0])
    free = complete(server, max_tokens=10, extra_body={"ignore_eos": True}).choices[0].text
    ids = tokenizer.encode(free)
    stop_id = ids[3]
    first = ids.index(stop_id)
    stopped = complete(
        server, max_tokens=10, extra_body={"stop_token_ids": [stop_id], "ignore_eos": True}
    )
    assert stopped.choices[0].finish_reason == "stop"
    assert stopped.choices[0].text == tokenizer.decode(ids[:first])
    assert stopped.usage.completion_tokens == first + 1  # the stop token counts
    extra = {"stop_token_ids": [stop_id], "min_tokens": 6, "ignore_eos": True}
    held = complete(server, max_tokens=10, extra_body=extra)
    assert stop_id not in tokenizer.encode(held.choices[0].text)[:6]
    assert held.usage.completion_tokens >= 6


def test_top_k_one_samples_greedily(server) -> None:  # noqa: ANN001
    greedy = complete(server, extra_body={"ignore_eos": True}).choices[0].text
    sampled = complete(server, temperature=2.0, seed=3, extra_body={"ignore_eos": True, "top_k": 1})
    assert sampled.choices[0].text == greedy
