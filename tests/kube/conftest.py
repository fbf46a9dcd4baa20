"""Fixtures for the API test server and MIG Manager tests: one fresh server per test."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import kubernetes.client
import pytest
from support.kubeapi import THREAD_PREFIX, KubeApiServer


@pytest.fixture
def api() -> Iterator[KubeApiServer]:
    with KubeApiServer() as server:
        yield server
    leftover = [t.name for t in threading.enumerate() if t.name.startswith(THREAD_PREFIX)]
    assert leftover == [], f"threads left running after the server stopped: {leftover}"


@pytest.fixture
def core(api: KubeApiServer) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(api.client())
