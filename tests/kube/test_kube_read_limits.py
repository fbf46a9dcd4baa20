"""The Kubernetes reads cannot blow up or hang on their body, and never quote a token (issue 12).

Lists too large for the limit come from :class:`support.kubeapi.KubeApiServer`, the real API
test server, filled with nodes. What no API server sends on purpose (a gzip "bomb", a body
trickled a byte at a time, an answer that is not JSON) comes from :class:`RawServer`, a
loopback HTTP server defined here (a test fake) that answers every request with one scripted
reply. Both are reached through the unmodified official client, as in production.
"""

from __future__ import annotations

import contextlib
import http.server
import struct
import threading
import tracemalloc
import zlib
from collections.abc import Iterator
from pathlib import Path

import kubernetes.client
import pytest
import yaml
from support.kubeapi import KubeApiServer, node

from migscope.kube import ApiError, Kube, KubeConfigError, api_client

SECRET = "s3cr3t-kube-token"
TRICKLE_SECONDS = 10.0


class RawServer:
    """Answer every request with ``head`` + ``body``, or trickle ``body`` a byte at a time.

    Attributes:
        hung_up: Set when the client went away before a trickle ended.
    """

    def __init__(
        self, body: bytes, *, headers: dict[str, str] | None = None, trickle: bool = False
    ) -> None:
        owner = self
        self.hung_up = threading.Event()
        self.stopping = threading.Event()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                try:
                    if not trickle:
                        self.wfile.write(body)
                        return
                    for i, byte in enumerate(body):
                        if i > TRICKLE_SECONDS / 0.2 or owner.stopping.wait(0.2):
                            return
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                except OSError:
                    owner.hung_up.set()

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: object, client_address: object) -> None:
                pass

        self._server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def __enter__(self) -> RawServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


@contextlib.contextmanager
def kube_at(url: str, **kwargs: float) -> Iterator[Kube]:
    config = kubernetes.client.Configuration(host=url)
    config.retries = False
    api = kubernetes.client.ApiClient(config)
    try:
        yield Kube(api, **kwargs)  # type: ignore[arg-type]
    finally:
        api.close()


def gzip_bomb(mib: int) -> bytes:
    """A valid gzip member of ``mib`` MiB of zeros, about 1 KiB per MiB (one flushed piece
    repeated, then the end of the stream and the right CRC)."""
    block = bytes(1 << 20)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    piece = deflate.compress(block) + deflate.flush(zlib.Z_FULL_FLUSH)
    end = deflate.flush()
    crc = 0
    for _ in range(mib):
        crc = zlib.crc32(block, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
    return header + piece * mib + end + struct.pack("<II", crc, (mib << 20) & 0xFFFFFFFF)


def causes(exc: BaseException) -> Iterator[BaseException]:
    current: BaseException | None = exc
    while current is not None:
        yield current
        current = current.__cause__ or current.__context__


# --------------------------------------------------------------------------------------------
# 10. Size limit


def test_a_list_past_the_limit_is_refused(api: KubeApiServer) -> None:
    for i in range(200):
        api.create(node(f"gpu-{i:03}", labels={"pad": "x" * 60}))
    kube = Kube(api.client(retries=False), max_response_bytes=64 << 10)
    assert kube.get_node("gpu-000")["metadata"]["name"] == "gpu-000"  # small answers pass
    with pytest.raises(ApiError) as caught:
        kube.list_nodes()
    assert str(caught.value) == (
        "listing nodes: the answer is larger than 65536 bytes decoded, the limit of one answer"
    )
    assert len(Kube(api.client(retries=False)).list_nodes()) == 200  # the default holds them
    assert kube.get_node("gpu-001")["metadata"]["name"] == "gpu-001"  # the pool recovered


def test_a_gzip_bomb_stops_at_the_limit_with_bounded_memory() -> None:
    bomb = gzip_bomb(512)  # 1/2 MiB on the wire, 512 MiB decoded
    with (
        RawServer(bomb, headers={"Content-Encoding": "gzip"}) as server,
        kube_at(server.url, max_response_bytes=8 << 20) as kube,
    ):
        tracemalloc.start()
        try:
            with pytest.raises(ApiError, match="larger than 8 MiB decoded"):
                kube.list_nodes()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < 64 << 20, f"peak {peak / (1 << 20):.0f} MiB"


def test_a_trickled_body_ends_at_the_timeout() -> None:
    body = b'{"kind": "NodeList", "items": []}' + b" " * 1000
    with (
        RawServer(body, trickle=True) as server,
        kube_at(server.url, timeout_s=2.0) as kube,
    ):
        with pytest.raises(ApiError) as caught:
            kube.list_nodes()
        assert server.hung_up.wait(5), "the client waited for the whole trickle"
    assert str(caught.value) == "listing nodes: the answer was not complete within 2 s"


def test_an_answer_that_is_not_json_is_one_line() -> None:
    with (
        RawServer(b"<html>login</html>") as server,
        kube_at(server.url) as kube,
        pytest.raises(ApiError, match=r"^listing nodes: the answer is not JSON \("),
    ):
        kube.list_nodes()


# --------------------------------------------------------------------------------------------
# 15. Tokens are never echoed


def _kubeconfig(tmp_path: Path, server: str, token: str) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "c",
                "clusters": [{"name": "k", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": token}}],
                "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
            }
        )
    )
    return path


@pytest.mark.parametrize(
    ("token", "problem"),
    [
        (f"{SECRET}\nsecond-line", "contains a newline"),
        (f"{SECRET}\x00", "contains a control or non-ASCII character"),
    ],
    ids=["newline", "nul"],
)
def test_a_kubeconfig_token_that_cannot_be_sent_is_named_not_quoted(
    tmp_path: Path, api: KubeApiServer, token: str, problem: str
) -> None:
    path = _kubeconfig(tmp_path, api.url, token)
    with pytest.raises(KubeConfigError) as caught:
        api_client(str(path))
    assert str(caught.value) == f"{path}: the user's token {problem}"
    assert all(SECRET not in str(exc) for exc in causes(caught.value))
    assert api.requests == []


def test_a_token_refused_by_the_http_library_is_not_quoted(api: KubeApiServer) -> None:
    # A token set after loading (a refresh hook, an exec plugin) reaches the header itself.
    kube = Kube(api.client(token=f"{SECRET}\nsecond-line", retries=False))
    expected = (
        "a request header holds a newline or control character (the kubeconfig's token or "
        "an exec plugin's?)"
    )
    with pytest.raises(ApiError) as listing:
        kube.list_nodes()
    with pytest.raises(ApiError) as watching:
        next(iter(kube.watch_node("gpu-a", resource_version="0", timeout_s=1)))
    assert str(listing.value) == f"listing nodes: {expected}"
    assert str(watching.value) == f"watching node gpu-a: {expected}"
    for caught in (listing, watching):
        assert all(SECRET not in str(exc) for exc in causes(caught.value))


def test_calls_after_a_refused_answer_work() -> None:
    # The connection left with unread bytes is closed, not reused by the next call.
    with (
        RawServer(b'{"items": [' + b" " * (1 << 20) + b"]}") as server,
        kube_at(server.url, max_response_bytes=1 << 16) as kube,
    ):
        for _ in range(3):
            with pytest.raises(ApiError, match="larger than 65536 bytes"):
                kube.list_nodes()
