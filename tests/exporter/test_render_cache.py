"""The text exposition is rendered once per set of inputs, and gzipped once per body (issue 24)."""

from __future__ import annotations

import gzip
from dataclasses import replace

from prometheus_client import CollectorRegistry
from support.exporter_snapshot import OWNERS, SLICE_A, SNAP, PodOwner

from migscope.exporter._collector import SnapshotCollector
from migscope.exporter._http import ExporterApp
from migscope.exporter._snapshot import CollectorStatus


def _collector(state: dict[str, object]) -> SnapshotCollector:
    return SnapshotCollector(
        snapshot=lambda: state["snap"],  # type: ignore[arg-type,return-value]
        owners=lambda: dict(state["owners"]),  # type: ignore[call-overload]  # new map per call
        statuses=lambda: (state["status"],),  # type: ignore[arg-type,return-value]
        backend="sim",
        version="0",
    )


def test_unchanged_inputs_give_the_same_bytes_object_and_any_change_renders_again() -> None:
    status = CollectorStatus("podresources", True, 0.01, 1.0)
    state: dict[str, object] = {"snap": SNAP, "owners": OWNERS, "status": status}
    collector = _collector(state)
    first = collector.render_text()
    assert collector.render_text() is first  # owners equal by value, snapshot the same
    state["snap"] = replace(SNAP, taken_at=SNAP.taken_at + 1)
    second = collector.render_text()
    assert second is not first
    state["owners"] = {SLICE_A.mig_uuid: (PodOwner("team-b", "other", "main", "nvidia.com/x"),)}
    third = collector.render_text()
    assert b'pod="other"' in third
    assert b'pod="other"' not in second
    state["status"] = CollectorStatus("podresources", False, 0.01, 1.0, "down")
    fourth = collector.render_text()
    assert b'migscope_collector_success{collector="podresources"} 0.0' in fourth
    assert b'migscope_collector_success{collector="podresources"} 1.0' in third


def _get(app: ExporterApp, encoding: str) -> tuple[str, dict[str, str], bytes]:
    seen: list[tuple[str, dict[str, str]]] = []
    environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": "/metrics",
        "HTTP_ACCEPT": "text/plain;version=0.0.4",
        "HTTP_ACCEPT_ENCODING": encoding,
    }
    body = b"".join(app(environ, lambda s, h, e=None: seen.append((s, dict(h)))))  # type: ignore[arg-type]
    return seen[0][0], seen[0][1], body


def test_gzip_is_computed_once_per_rendered_body_and_follows_a_new_one() -> None:
    bodies = [b"a 1\n" * 100]
    calls = []

    def render() -> bytes:
        calls.append(1)
        return bodies[-1]

    app = ExporterApp(registry=CollectorRegistry(), health=lambda: (True, ""), render_text=render)
    status, headers, one = _get(app, "gzip")
    assert status == "200 OK"
    assert headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(one) == bodies[0]
    assert _get(app, "gzip")[2] == one
    assert app._gzip_cache[0] is bodies[0]
    bodies.append(b"b 2\n" * 100)
    assert gzip.decompress(_get(app, "gzip")[2]) == bodies[1]
    assert _get(app, "")[2] == bodies[1]  # identity is the body itself
    assert len(calls) == 4
