"""The Prometheus client's reads cannot hang or blow up, and never quote a secret (issue 12).

Each case is a real HTTP exchange on loopback. The faults a healthy server never produces on
demand come from :class:`Scripted`, a raw-socket server defined here (a test fake: it plays
one scripted act per request, byte by byte where the test needs it), or from
``support.prometheus.FaultProxy`` where a canned answer is enough:

* a server that trickles its headers or its body, one byte well within every read timeout,
  must not hold a request past its deadline (``--timeout``), on a new connection or on one
  reused from the pool; retries and their waits count against the same deadline;
* an answer past the size limit stops there, and a gzip "bomb" stops early with memory
  bounded by the limit, not by its expanded size;
* a bearer token (or a header value) with a newline is refused by where it came from,
  never by its content.

No timing is asserted: a trickle lasts 10 s at most, so a client that gave up first (the
server saw it hang up) kept its 2 s deadline; without the deadline it would see the whole
trickle and then a broken answer.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
import time
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from support.prometheus import FaultProxy, Reply, free_port

from migscope.analyzer._intake.prometheus import (
    PrometheusClient,
    PrometheusError,
    PrometheusResponseError,
    PrometheusTimeout,
    PrometheusUnreachable,
)
from migscope.cli.main import cli

VECTOR = json.dumps(
    {
        "status": "success",
        "data": {"resultType": "vector", "result": [{"metric": {"node": "a"}, "value": [1, "1"]}]},
    }
).encode()
TRICKLE_SECONDS = 10.0
SECRET = "s3cr3t-token-value"

# --------------------------------------------------------------------------------------------
# A raw HTTP/1.1 server that plays one act per request (test fake)

#: An act writes (part of) an answer on the connection and says whether to keep it open.
Act = Callable[[socket.socket, "Scripted"], bool]


class Scripted:
    """A loopback HTTP/1.1 server answering each request with the next scripted act.

    Attributes:
        requests: ``(connection number, request head)`` of every request, in order.
        hung_up: Set when a trickle found the client gone before the trickle's end.
    """

    def __init__(self, *acts: Act, default: Act | None = None) -> None:
        self._acts = list(acts)
        self._default = default
        self.requests: list[tuple[int, bytes]] = []
        self.hung_up = threading.Event()
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def __enter__(self) -> Scripted:
        accept = threading.Thread(target=self._accept, name="scripted-accept", daemon=True)
        self._threads.append(accept)
        accept.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stopping.set()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for thread in list(self._threads):
            thread.join(timeout=10)
        for conn in conns:
            conn.close()
        self._listener.close()

    def _accept(self) -> None:
        number = 0
        while not self.stopping.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            number += 1
            with self._lock:
                self._conns.append(conn)
            thread = threading.Thread(
                target=self._serve, args=(conn, number), name="scripted-conn", daemon=True
            )
            with self._lock:
                self._threads.append(thread)
            thread.start()

    def _read_request(self, conn: socket.socket, buffer: bytearray) -> bytes | None:
        while b"\r\n\r\n" not in buffer:
            try:
                data = conn.recv(65536)
            except OSError:
                return None
            if not data:
                return None
            buffer += data
        head, _, rest = bytes(buffer).partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(rest) < length:
            data = conn.recv(65536)
            if not data:
                return None
            rest += data
        buffer[:] = rest[length:]
        return head

    def _serve(self, conn: socket.socket, number: int) -> None:
        buffer = bytearray()
        while not self.stopping.is_set():
            head = self._read_request(conn, buffer)
            if head is None:
                return
            with self._lock:
                self.requests.append((number, head))
                act = self._acts.pop(0) if self._acts else self._default
            if act is None:
                return
            try:
                keep = act(conn, self)
            except OSError:
                return
            if not keep:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
                return


def respond(
    body: bytes = VECTOR,
    *,
    status: int = 200,
    headers: dict[str, str] | None = None,
    keep_alive: bool = False,
    declare_length: bool = True,
) -> Act:
    """A whole answer at once (without ``Content-Length``: the body ends with the connection)."""

    def act(conn: socket.socket, server: Scripted) -> bool:
        lines = [f"HTTP/1.1 {status} Scripted", "Content-Type: application/json"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        if declare_length:
            lines.append(f"Content-Length: {len(body)}")
        if not keep_alive:
            lines.append("Connection: close")
        with contextlib.suppress(OSError):  # a client that stopped reading at its limit
            conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        return keep_alive

    return act


def trickle(prefix: bytes, *, every: float = 0.2) -> Act:
    """Send ``prefix``, then one byte every ``every`` seconds for ``TRICKLE_SECONDS``."""

    def act(conn: socket.socket, server: Scripted) -> bool:
        conn.sendall(prefix)
        end = time.monotonic() + TRICKLE_SECONDS
        while time.monotonic() < end:
            if server.stopping.wait(every):
                return False
            try:
                conn.sendall(b"a")
            except OSError:
                server.hung_up.set()
                return False
        return False

    return act


TRICKLED_HEADERS = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Trickle: "
TRICKLED_BODY = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
)


def gzip_bomb(mib: int) -> bytes:
    """A valid gzip member of ``mib`` MiB of zeros, about 1 KiB per MiB.

    One MiB is compressed once and ended with a full flush, which makes the piece independent
    of what came before; the member repeats it, then ends the stream with the right CRC.
    """
    block = bytes(1 << 20)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    piece = deflate.compress(block) + deflate.flush(zlib.Z_FULL_FLUSH)
    end = deflate.flush()
    crc = 0
    for _ in range(mib):
        crc = zlib.crc32(block, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
    return header + piece * mib + end + struct.pack("<II", crc, (mib << 20) & 0xFFFFFFFF)


def client(url: str, **kwargs: object) -> PrometheusClient:
    kwargs.setdefault("trust_env", False)
    kwargs.setdefault("retries", 0)
    return PrometheusClient(url, **kwargs)  # type: ignore[arg-type]


def causes(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


# --------------------------------------------------------------------------------------------
# 9. The whole request ends by its deadline


@pytest.mark.parametrize("prefix", [TRICKLED_HEADERS, TRICKLED_BODY], ids=["headers", "body"])
def test_a_trickling_answer_ends_at_the_deadline(prefix: bytes) -> None:
    with Scripted(trickle(prefix)) as server, client(server.url, timeout=2.0) as c:
        with pytest.raises(PrometheusTimeout) as caught:
            c.query("sum(up)")
        assert server.hung_up.wait(5), "the client waited for the whole trickle"
    message = str(caught.value)
    assert "\n" not in message
    assert "did not answer within 2 s (the deadline of the whole request)" in message
    assert "sum(up)" in message
    assert isinstance(caught.value.__cause__, httpx.ReadTimeout)


def test_trickled_headers_on_a_reused_connection_end_at_the_deadline() -> None:
    acts = (respond(keep_alive=True), trickle(TRICKLED_HEADERS))
    with Scripted(*acts) as server, client(server.url, timeout=2.0) as c:
        assert len(c.query("up")) == 1
        with pytest.raises(PrometheusTimeout, match="the deadline of the whole request"):
            c.query("up")
        assert server.hung_up.wait(5)
        assert [number for number, _ in server.requests] == [1, 1]  # one pooled connection


def test_a_trickling_proxy_from_the_environment_ends_at_the_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # HTTP_PROXY makes httpx build a transport of its own for the proxy: it keeps the deadline.
    with Scripted(trickle(TRICKLED_HEADERS)) as proxy:
        for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        with (
            client("http://prometheus.invalid:9090", timeout=2.0, trust_env=True) as c,
            pytest.raises(PrometheusTimeout, match="the deadline of the whole request"),
        ):
            c.query("up")
        assert proxy.hung_up.wait(5)
        ((_, head),) = proxy.requests
    assert head.startswith(b"POST http://prometheus.invalid:9090/api/v1/query ")


def test_a_slow_answer_within_each_read_timeout_is_still_a_timeout() -> None:
    # A per-read timeout longer than the deadline: the deadline ends the request, at 2 s.
    timeout = httpx.Timeout(2.0, read=1.5, connect=2.0)
    with (
        Scripted(trickle(TRICKLED_BODY, every=1.0)) as server,
        client(server.url, timeout=timeout) as c,
        pytest.raises(PrometheusTimeout, match="within 2 s \\(the deadline"),
    ):
        c.query("up")


def test_a_retry_wait_past_the_deadline_is_not_made() -> None:
    sleeps: list[float] = []
    busy = Reply(503, "busy", {"Content-Type": "text/plain", "Retry-After": "3"})
    with (
        FaultProxy(default=busy) as proxy,
        client(proxy.url, timeout=2.0, retries=3, sleep=sleeps.append) as c,
        pytest.raises(PrometheusResponseError) as caught,
    ):
        c.query("up")
    assert sleeps == []
    assert len(proxy.requests) == 1
    assert "after 1 attempt; no time left to retry within the 2 s deadline" in str(caught.value)


def test_backoff_past_the_deadline_ends_the_retries() -> None:
    sleeps: list[float] = []
    dead = f"http://127.0.0.1:{free_port()}"
    with (
        client(dead, timeout=2.0, retries=3, backoff=5.0, sleep=sleeps.append) as c,
        pytest.raises(PrometheusUnreachable) as caught,
    ):
        c.query("up")
    assert sleeps == []
    assert "(1 attempt; no time left to retry within the 2 s deadline)" in str(caught.value)


def test_retries_share_one_deadline() -> None:
    # The first answer asks for a retry in 1 s, which fits; the retry then trickles and is
    # cut at the deadline that started with the first attempt (3 s), not 3 s after it.
    acts = (respond(b"busy", status=503, headers={"Retry-After": "1"}), trickle(TRICKLED_BODY))
    with Scripted(*acts) as server, client(server.url, timeout=3.0, retries=3) as c:
        with pytest.raises(PrometheusTimeout) as caught:
            c.query("up")
        assert server.hung_up.wait(5)
    assert "within 3 s (the deadline of the whole request, 2 attempts)" in str(caught.value)


def test_the_cli_gives_up_on_a_trickling_server_with_one_line() -> None:
    with Scripted(default=trickle(TRICKLED_BODY)) as server:
        result = CliRunner().invoke(
            cli, ["analyze", "--prometheus", server.url, "--window", "1d", "--timeout", "2s"]
        )
        assert server.hung_up.wait(5), "the command waited for the whole trickle"
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    assert result.stderr.startswith("migscope: error: ")
    assert result.stderr.count("\n") == 1, result.stderr
    assert "did not answer within 2 s" in result.stderr


# --------------------------------------------------------------------------------------------
# 10. Every answer is read within a size limit on its decoded bytes


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "until-close"])
def test_an_answer_past_the_limit_is_refused(declared: bool) -> None:
    body = b" " * (4 << 20) + VECTOR
    act = respond(body, declare_length=declared)
    with (
        Scripted(act) as server,
        client(server.url, max_response_bytes=1 << 20) as c,
        pytest.raises(PrometheusResponseError) as caught,
    ):
        c.query("up")
    message = str(caught.value)
    assert f"the answer of {server.url}/api/v1/query is larger than 1 MiB decoded" in message
    assert caught.value.status_code == 200


def test_a_gzip_bomb_stops_at_the_limit_with_bounded_memory() -> None:
    bomb = gzip_bomb(512)  # 1/2 MiB on the wire, 512 MiB decoded
    act = respond(bomb, headers={"Content-Encoding": "gzip"})
    with Scripted(act) as server, client(server.url, max_response_bytes=8 << 20) as c:
        tracemalloc.start()
        try:
            with pytest.raises(PrometheusResponseError, match="larger than 8 MiB decoded"):
                c.query("up")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < 64 << 20, f"peak {peak / (1 << 20):.0f} MiB"


def _deflate(data: bytes, wbits: int) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, wbits)
    return packer.compress(data) + packer.flush()


@pytest.mark.parametrize(
    ("encoding", "wbits"),
    [("gzip", zlib.MAX_WBITS | 16), ("deflate", zlib.MAX_WBITS), ("deflate", -zlib.MAX_WBITS)],
    ids=["gzip", "deflate-zlib", "deflate-raw"],
)
def test_compressed_answers_under_the_limit_are_read(encoding: str, wbits: int) -> None:
    padded = VECTOR[:-1] + b', "pad": "' + b"x" * (3 << 20) + b'"}'  # 3 MiB decoded
    act = respond(_deflate(padded, wbits), headers={"Content-Encoding": encoding})
    with Scripted(act) as server, client(server.url, max_response_bytes=4 << 20) as c:
        result = c.query("up")
        assert [s.labels for s in result] == [{"node": "a"}]
        assert c.usage.bytes_received == len(padded)


# --------------------------------------------------------------------------------------------
# 15. Secrets are never echoed


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (f"{SECRET}\nsecond-line\n", "contains a newline"),
        (f"{SECRET}\x00", "contains a control or non-ASCII character"),
        (f"{SECRET}é", "contains a control or non-ASCII character"),
    ],
    ids=["newline", "nul", "non-ascii"],
)
def test_a_bad_token_file_is_named_not_quoted(tmp_path: Path, content: str, problem: str) -> None:
    token = tmp_path / "token"
    token.write_text(content, encoding="utf-8")
    sleeps: list[float] = []
    with (
        FaultProxy(default=Reply(200, VECTOR)) as proxy,
        client(proxy.url, bearer_token_file=token, retries=3, sleep=sleeps.append) as c,
        pytest.raises(PrometheusError) as caught,
    ):
        c.query("up")
    assert str(caught.value) == (
        f"bearer token file {token}: {problem}; it must hold the token alone on one line"
    )
    assert all(SECRET not in str(exc) and SECRET not in repr(exc) for exc in causes(caught.value))
    assert proxy.requests == []
    assert sleeps == []


def test_a_token_file_that_is_not_utf8_is_not_quoted(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_bytes(SECRET.encode() + b"\xff\xfe")
    with (
        client("http://127.0.0.1:9", bearer_token_file=token) as c,
        pytest.raises(PrometheusError) as caught,
    ):
        c.query("up")
    assert str(caught.value) == f"cannot read the bearer token file {token}: not UTF-8 text"
    assert all(SECRET not in str(exc) for exc in causes(caught.value))


def test_a_bad_token_or_header_argument_is_refused_without_its_value() -> None:
    with pytest.raises(ValueError, match="bearer_token") as token:
        client("http://127.0.0.1:9", bearer_token=f"{SECRET}\nx")
    assert str(token.value) == "bearer_token contains a newline"
    with pytest.raises(ValueError, match="X-Api-Key") as header:
        client("http://127.0.0.1:9", headers={"X-Api-Key": f"{SECRET}\r\nX-Evil: 1"})
    assert str(header.value) == "header X-Api-Key: the value contains a newline"


def test_a_good_token_is_sent_as_before(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(f"  {SECRET}\n")
    with FaultProxy(default=Reply(200, VECTOR)) as proxy:
        with client(proxy.url, bearer_token_file=token) as c:
            c.query("up")
        (request,) = proxy.requests
    assert request.headers["authorization"] == f"Bearer {SECRET}"
    assert request.headers["accept-encoding"] == "gzip, deflate"


def test_a_request_httpx_refuses_is_one_line_and_not_retried() -> None:
    sleeps: list[float] = []
    with (
        FaultProxy(default=Reply(200, VECTOR)) as proxy,
        client(proxy.url, headers={"X Bad Name": SECRET}, retries=3, sleep=sleeps.append) as c,
        pytest.raises(PrometheusError) as caught,
    ):
        c.query("up")
    assert str(caught.value) == (
        f"cannot send the request to {proxy.url}/api/v1/query: httpx refused it as invalid HTTP"
    )
    assert list(causes(caught.value)) == [caught.value]  # nothing that could quote a header
    assert sleeps == []
    assert proxy.requests == []
