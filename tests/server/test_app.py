"""Live `ddtune serve`: identity, health, metrics, the bad-input table, hot reconfigure."""

from __future__ import annotations

import hashlib
import uuid

import httpx
import openai
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from ddtune.params import PARAM_KEYS, DecodeParams
from ddtune.server.api.errors import ApiError
from ddtune.server.app import create_app
from ddtune.server.config import ServeConfig
from ddtune.server.state import ServerState

PROMPT = "for i in range(3):\n"


def get(server, path: str) -> httpx.Response:  # noqa: ANN001 - the ServerProcess fixture
    return httpx.get(server.base_url + path, timeout=60)


def post(server, path: str, body: object) -> httpx.Response:  # noqa: ANN001
    if isinstance(body, bytes):
        return httpx.post(
            server.base_url + path,
            content=body,
            timeout=60,
            headers={"Content-Type": "application/json"},
        )
    return httpx.post(server.base_url + path, json=body, timeout=60)


def t0_text(server, prompt: str = PROMPT) -> tuple[str, str]:  # noqa: ANN001
    """(text, system_fingerprint) of a greedy completion."""
    c = openai.OpenAI(base_url=server.base_url + "/v1", api_key="none", max_retries=0)
    r = c.completions.create(model="tiny", prompt=prompt, max_tokens=20, temperature=0)
    return r.choices[0].text, r.system_fingerprint


def metrics(server) -> dict[str, float]:  # noqa: ANN001
    out = {}
    for family in text_string_to_metric_families(get(server, "/metrics").text):
        for s in family.samples:
            key = s.name + "".join(f"[{k}={v}]" for k, v in sorted(s.labels.items()))
            out[key] = s.value
    return out


def test_models_health_and_server_info(server, checkpoint) -> None:  # noqa: ANN001
    models = get(server, "/v1/models").json()
    assert [m["id"] for m in models["data"]] == ["tiny"]
    assert get(server, "/health").status_code == 200
    info = get(server, "/server_info").json()
    assert info["instance_id"] == server.instance_id and uuid.UUID(info["instance_id"]).version == 4
    assert info["pid"] == server.proc.pid
    assert info["started_at"] <= info["ready_at"]
    assert info["state"] == "serving"
    config = info["config"]
    assert (config["mode"], config["budget"], config["topk"], config["window"]) == (
        "ddtree",
        8,
        3,
        "none",
    )
    assert config["block_size"] == 4
    assert info["config_hash"] == DecodeParams("ddtree", 8, 3, None).hash()
    target, drafter = checkpoint
    sha = hashlib.sha256((target / "model.safetensors").read_bytes()).hexdigest()
    assert info["target_sha256"] == sha
    assert (
        info["drafter_sha256"]
        == hashlib.sha256((drafter / "model.safetensors").read_bytes()).hexdigest()
    )
    assert info["max_context"] == 2048
    assert {"ddtune", "torch", "python"} <= set(info["versions"])


def test_health_generate_runs_a_real_generation(server) -> None:  # noqa: ANN001
    before = metrics(server)["ddtune_generated_tokens_total"]
    response = get(server, "/health_generate")
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "ok"
    assert metrics(server)["ddtune_generated_tokens_total"] == before + 1


def test_metrics_count_a_request(server) -> None:  # noqa: ANN001
    before = metrics(server)
    c = openai.OpenAI(base_url=server.base_url + "/v1", api_key="none", max_retries=0)
    r = c.completions.create(model="tiny", prompt=PROMPT, max_tokens=10, temperature=0)
    spec = r.usage.model_dump()["spec"]
    after = metrics(server)

    def delta(key: str) -> float:
        return after[key] - before.get(key, 0.0)

    assert delta("ddtune_requests_total[endpoint=completions][outcome=ok]") == 1
    assert delta("ddtune_prompt_tokens_total") == r.usage.prompt_tokens
    assert delta("ddtune_generated_tokens_total") == r.usage.completion_tokens
    assert delta("ddtune_verify_rounds_total") == spec["rounds"]
    assert delta("ddtune_accepted_tokens_total") == spec["accepted_tokens"]
    assert delta("ddtune_acceptance_length_count") == spec["rounds"]
    assert delta("ddtune_stage_seconds_total[stage=verify]") > 0
    assert after["ddtune_queue_depth"] == 0


BAD_INPUTS = [
    # (path, body, status, param)
    ("/v1/completions", b'{"prompt": "x", ', 400, None),
    ("/v1/completions", {"model": "gpt-9", "prompt": "x"}, 404, "model"),
    ("/v1/completions", {"prompt": "x", "max_tokens": -5}, 400, "max_tokens"),
    ("/v1/completions", {"prompt": "x", "max_tokens": 10**7}, 400, "max_tokens"),
    ("/v1/completions", {"prompt": "y" * 2100}, 400, "prompt"),
    ("/v1/completions", {"prompt": "x", "temperature": -1}, 400, "temperature"),
    ("/v1/completions", {"prompt": "x", "temperature": "warm"}, 400, "temperature"),
    ("/v1/completions", {"prompt": ["x", "y"]}, 400, "prompt"),
    ("/v1/completions", {"prompt": "x", "n": 3}, 400, "n"),
    ("/v1/completions", {"prompt": "x", "best_of": 2}, 400, "best_of"),
    ("/v1/chat/completions", {"messages": [{"role": "user"}]}, 400, "messages[0].content"),
    ("/v1/chat/completions", {"messages": "hello"}, 400, "messages"),
    ("/v1/chat/completions", b"not json", 400, None),
    ("/v1/ddtree/config", {"budget": 8, "temperature": 0.5}, 400, "temperature"),
    ("/v1/ddtree/config", {"budget": -1}, 400, "budget"),
    ("/v1/ddtree/config", {"topk": "many"}, 400, "topk"),
    ("/v1/ddtree/config", {"mode": "turbo"}, 400, "mode"),
    ("/v1/ddtree/config", {"window": "wide"}, 400, "window"),
    ("/v1/ddtree/config", [1, 2], 400, None),
]


@pytest.mark.parametrize(("path", "body", "status", "param"), BAD_INPUTS)
def test_bad_input_is_an_openai_error_naming_the_field(server, path, body, status, param) -> None:  # noqa: ANN001
    config_before = get(server, "/server_info").json()
    response = post(server, path, body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["param"] == param and error["message"]
    # the server keeps serving, with the old config
    assert get(server, "/health").status_code == 200
    config_after = get(server, "/server_info").json()
    assert config_after["config_hash"] == config_before["config_hash"]
    assert config_after["config_generation"] == config_before["config_generation"]


def test_hot_reconfigure_changes_identity_not_outputs(server) -> None:  # noqa: ANN001
    info = get(server, "/server_info").json()
    baseline, fingerprint = t0_text(server)
    assert fingerprint == f"ddtune-{info['config_hash']}-g{info['config_generation']}"
    seen_hashes = {info["config_hash"]}
    generation = info["config_generation"]
    for update in (
        {"budget": 3, "topk": 1},
        {"window": 5},
        {"mode": "dflash"},
        {"mode": "ar"},
        {"mode": "ddtree", "budget": 8, "topk": 3, "window": "none"},
    ):
        reply = post(server, "/v1/ddtree/config", update)
        assert reply.status_code == 200, reply.text
        body = reply.json()
        generation += 1
        assert body["config_generation"] == generation
        new_info = get(server, "/server_info").json()
        assert new_info["config_generation"] == generation
        assert new_info["config_hash"] == body["config_hash"]
        assert new_info["instance_id"] == info["instance_id"]  # same process, no reload
        expected = DecodeParams.from_wire({k: body["config"][k] for k in PARAM_KEYS})
        assert body["config_hash"] == expected.hash()
        seen_hashes.add(body["config_hash"])
        text, fingerprint = t0_text(server)
        assert text == baseline, f"T=0 output changed under {update}"
        assert fingerprint == f"ddtune-{body['config_hash']}-g{generation}"
    assert len(seen_hashes) == 5  # the final config equals the first: hash back to the start
    assert get(server, "/server_info").json()["config_hash"] == info["config_hash"]


def test_everything_answers_503_loading_before_the_weights_are_in(checkpoint) -> None:  # noqa: ANN001
    """In-process app whose state never loaded: the window a live server is in at start."""
    target, drafter = checkpoint
    state = ServerState(ServeConfig(target=target, drafter=drafter))
    with TestClient(create_app(state)) as http:
        health = http.get("/health")
        assert (health.status_code, health.json()) == (503, {"status": "loading"})
        for path in ("/v1/completions", "/v1/chat/completions"):
            r = http.post(path, json={"prompt": "x"})
            assert r.status_code == 503 and r.json()["error"]["code"] == "loading"
            assert r.headers["Retry-After"] == "1"
        assert http.get("/health_generate").status_code == 503
        info = http.get("/server_info").json()
        assert (info["state"], info["ready_at"], info["config_generation"]) == ("loading", None, 0)


def test_reconfigure_bounds_window_and_budget_by_the_context(checkpoint) -> None:  # noqa: ANN001
    """Like the flags: a window past the context or a budget that cannot fit is a 400."""
    target, drafter = checkpoint
    state = ServerState(ServeConfig(target=target, drafter=drafter))
    state.engine = type("Loaded", (), {"max_context": 100})()
    for update, param in (({"window": 101}, "window"), ({"budget": 100}, "budget")):
        with pytest.raises(ApiError) as info:
            state.reconfigure(update)
        assert (info.value.status, info.value.param) == (400, param)
        assert "context of 100" in info.value.message
    assert state.reconfigure({"window": 100, "budget": 99})[0] == DecodeParams("ddtree", 99, 4, 100)
    assert state.current()[1] == 1  # only the valid update counted


def test_a_reconfigure_past_the_step_token_budget_is_refused(checkpoint) -> None:  # noqa: ANN001
    """A tree (+ root) larger than --max-step-tokens could never run: 400, old config kept."""
    target, drafter = checkpoint
    state = ServerState(ServeConfig(target=target, drafter=drafter, max_step_tokens=20))
    with TestClient(create_app(state)) as http:
        r = http.post("/v1/ddtree/config", json={"budget": 32})
        assert r.status_code == 400
        error = r.json()["error"]
        assert error["param"] == "budget" and "round of 33 tokens" in error["message"]
        assert http.post("/v1/ddtree/config", json={"budget": 19}).status_code == 200
        assert http.get("/v1/ddtree/config").json()["config"]["budget"] == 19
