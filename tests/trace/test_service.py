"""`trace record --from-service`: the service's T = 0 continuation, no decoding of its own.

The service here is a fake, named as such: a real HTTP server that answers with
known ground truth (the target's own greedy token ids, or those with one token
changed, as a service that is not lossless would)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from ddtune.cli import main
from ddtune.ddtree.testing import write_random_checkpoint
from ddtune.trace.predict import Trace
from ddtune.trace.record import OwnTarget


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("from-service")
    return write_random_checkpoint(folder, seed=2, std=0.3, vocab_size=12, block_size=4)


def fake_service(answer):
    """A ground-truth fake: /v1/models names "m"; /v1/completions answers `answer(body)`."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, data):
            raw = json.dumps(data).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self):
            self._send({"data": [{"id": "m"}]})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            self._send({"choices": [answer(body)]})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def record(models, out, *extra):
    target, drafter = models
    argv = ["trace", "record", "--target", str(target), "--drafter", str(drafter)]
    return main([*argv, "--out", str(out), "--prompt", "eat a toe", "--max-tokens", "12", *extra])


def test_the_services_tokens_are_traced_without_a_local_decode(
    models, tmp_path, monkeypatch, capsys
):
    side = OwnTarget(*models)
    seen, decode = [], OwnTarget.greedy  # the service's own decoding, kept before the patch

    def greedy(body):
        seen.append(body)
        ids = decode(side, side.encode(body["prompt"]), body["max_tokens"])
        return {"text": side.decode(ids), "token_ids": ids}

    server = fake_service(greedy)
    try:
        assert record(models, tmp_path / "own") == 0
        monkeypatch.setattr(OwnTarget, "greedy", lambda *a: pytest.fail("decoded locally"))
        url = f"http://127.0.0.1:{server.server_port}"
        assert record(models, tmp_path / "served", "--from-service", url) == 0
    finally:
        server.shutdown()
    assert seen[0]["temperature"] == 0 and seen[0]["max_tokens"] == 12 + 4 - 1
    own, served = Trace.read(tmp_path / "own"), Trace.read(tmp_path / "served")
    assert served.header.source.startswith("service:http://127.0.0.1")
    for a, b in zip(own.data, served.data, strict=True):
        assert np.array_equal(a.tokens, b.tokens) and b.greedy_mismatches == 0
        for view in a.views:
            assert np.array_equal(a.views[view]["top_ids"], b.views[view]["top_ids"])


def test_a_service_that_parts_from_the_greedy_path_is_said_so(models, tmp_path, capsys):
    side = OwnTarget(*models)

    def off_by_one(body):
        ids = side.greedy(side.encode(body["prompt"]), body["max_tokens"])
        ids[3] = (ids[3] + 1) % 12
        return {"text": "", "token_ids": ids}

    server = fake_service(off_by_one)
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        assert record(models, tmp_path / "t", "--from-service", url) == 0
    finally:
        server.shutdown()
    assert "are not the target's argmax when teacher-forced" in capsys.readouterr().err
    assert Trace.read(tmp_path / "t").data[0].greedy_mismatches >= 1


def test_no_service_is_one_line(models, tmp_path, capsys):
    assert record(models, tmp_path / "t", "--from-service", "http://127.0.0.1:9") == 2
    assert "is the service running there?" in capsys.readouterr().err
