"""Shared fixtures for the bench tests: the loopback FakeLLMServer and the fixture files."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
_spec = importlib.util.spec_from_file_location(
    "bench_fake_server", Path(__file__).with_name("fake_server.py")
)
fake_server = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fake_server)


@pytest.fixture
def fake_server_cls():
    return fake_server.FakeLLMServer


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES


_load_spec = importlib.util.spec_from_file_location(
    "bench_fake_load_server", Path(__file__).with_name("fake_load_server.py")
)
fake_load_server = importlib.util.module_from_spec(_load_spec)
sys.modules[_load_spec.name] = fake_load_server  # dataclasses look their module up
_load_spec.loader.exec_module(fake_load_server)


@pytest.fixture
def load_server():
    """`(FakeLoadServer, Latency)`: the loopback server with known latency distributions."""
    return fake_load_server.FakeLoadServer, fake_load_server.Latency


@pytest.fixture
def load_server_process():
    """`separate_process(latency, kind)`: the same server in its own process."""
    return fake_load_server.separate_process
