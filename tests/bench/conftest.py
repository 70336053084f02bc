"""Shared fixtures for the bench tests: the loopback FakeLLMServer and the fixture files."""

from __future__ import annotations

import importlib.util
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
