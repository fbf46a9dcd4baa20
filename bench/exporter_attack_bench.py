"""Exporter under connection attacks: good-scrape latency with and without each attack.

Runs the real ``migscope exporter`` (simulated node, default limits) in a child process, once
over plain HTTP and once over TLS, and scrapes it from this process with a fresh connection
per scrape (the slow path: accept, intake, worker) at about 20 scrapes a second, while, in
turn:

* nothing (the baseline of each transport);
* **slow drip**: 4 x 8 workers' worth of clients send a request head one byte every 2 s and
  reconnect when cut (issue 12, item 1);
* **idle TLS**: 3 x 8 clients finish the TLS handshake and say nothing, reconnecting when
  closed (item 2);
* **idle TCP flood**: 400 silent TCP connections, over the 256 limit, reopened when shed
  (item 3);
* **wrong-password flood**: with basic auth (a bcrypt hash of cost 10), 30 clients send
  wrong passwords as fast as they are answered, while the good scraper sends the right one
  (item 4).

It prints, per phase, p50/p99/max of the good scrapes, failures (a scrape fails past 10 s),
and p99 as a ratio of the baseline of the same transport. The machine is shared and noisy:
read the ratios, not the absolutes; before the fix the attacked phases timed out.

Run: ``.venv/bin/python bench/exporter_attack_bench.py [--seconds 8]`` (about 1.5 minutes).
"""

from __future__ import annotations

import argparse
import base64
import http.client
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import bcrypt

from migscope.exporter._http import DEFAULT_LIMITS

OPENSSL = shutil.which("openssl") or "/usr/bin/openssl"
WORKERS = 8
SCRAPE_TIMEOUT = 10.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _pki(d: Path) -> tuple[Path, Path, Path]:
    def run(*args: str) -> None:
        subprocess.run([OPENSSL, *args], cwd=d, check=True, capture_output=True)

    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    run("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
        "-subj", "/CN=bench-ca", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign")  # fmt: skip
    (d / "server.ext").write_text(
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
        "extendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n"
    )
    run("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=server")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-set_serial", "1", "-out", "server.crt", "-days", "2",
        "-extfile", "server.ext")  # fmt: skip
    return d / "ca.crt", d / "server.crt", d / "server.key"


@contextmanager
def exporter(web_config: Path | None, context: ssl.SSLContext | None) -> Iterator[int]:
    """The ``migscope exporter`` command on a free port; yields the port once healthy."""
    port = _free_port()
    cmd = [str(Path(sys.executable).with_name("migscope")), "exporter", "--backend", "sim"]
    cmd += ["--listen", f"127.0.0.1:{port}", "--log-level", "error"]
    if web_config is not None:
        cmd += ["--web-config", str(web_config)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if scrape(port, context, "/healthz") is not None:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("the exporter did not start")
            time.sleep(0.2)
        time.sleep(1.5)  # a few samples in: the exposition has its full size
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def scrape(
    port: int,
    context: ssl.SSLContext | None,
    path: str = "/metrics",
    headers: dict[str, str] | None = None,
) -> float | None:
    """Milliseconds for one scrape on a fresh connection, or None if it failed."""
    t0 = time.perf_counter()
    if context is None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=SCRAPE_TIMEOUT)
    else:
        conn = http.client.HTTPSConnection(
            "localhost", port, timeout=SCRAPE_TIMEOUT, context=context
        )
    try:
        conn.request("GET", path, headers=headers or {})
        resp = conn.getresponse()
        ok = resp.status == 200 and len(resp.read()) > 0
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()
    return (time.perf_counter() - t0) * 1000 if ok else None


class Attack:
    """``n`` attacking connections kept up from one thread (reopened when the server cuts)."""

    def __init__(
        self, port: int, n: int, opener: Callable[[int], socket.socket], drip: bytes, every: float
    ) -> None:
        self.port, self.n, self.opener, self.drip, self.every = port, n, opener, drip, every
        self.opened = self.cut = 0
        self._stop = threading.Event()
        self._socks: list[socket.socket | None] = [None] * n
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Attack:
        self._thread.start()
        deadline = time.monotonic() + 30
        while self.opened < self.n and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(max(self.every, 1.0) + 0.2)  # every attacker has sent its first drip
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        for sock in self._socks:
            if sock is not None:
                sock.close()

    def _run(self) -> None:
        last_drip = 0.0
        while not self._stop.is_set():
            drip_now = self.drip and time.monotonic() - last_drip >= self.every
            if drip_now:
                last_drip = time.monotonic()
            for i, sock in enumerate(self._socks):
                if self._stop.is_set():
                    return
                if sock is None:
                    with suppress(OSError):
                        self._socks[i] = self.opener(self.port)
                        self.opened += 1
                    continue
                if _alive(sock):
                    with suppress(BlockingIOError, ssl.SSLWantWriteError, OSError):
                        if drip_now:
                            sock.send(self.drip)
                        continue
                sock.close()
                self._socks[i] = None
                self.cut += 1
            self._stop.wait(0.1)


def _alive(sock: socket.socket) -> bool:
    """False once the server answered or closed (an attacker then reconnects)."""
    try:
        sock.recv(4096)
    except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
        return True
    except OSError:
        pass
    return False


def plain(first: bytes) -> Callable[[int], socket.socket]:
    def open_(port: int) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        if first:
            sock.sendall(first)
        sock.setblocking(False)
        return sock

    return open_


def tls_idle(context: ssl.SSLContext) -> Callable[[int], socket.socket]:
    def open_(port: int) -> socket.socket:
        raw = socket.create_connection(("127.0.0.1", port), timeout=5)
        sock = context.wrap_socket(raw, server_hostname="localhost")
        sock.setblocking(False)
        return sock

    return open_


def _basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


@contextmanager
def wrong_passwords(port: int, clients: int) -> Iterator[list[int]]:
    """``clients`` threads sending wrong passwords back to back; yields [requests sent]."""
    sent = [0]
    stop = threading.Event()

    def hammer(k: int) -> None:
        while not stop.is_set():
            scrape(port, None, headers=_basic("prom", f"wrong-{k}-{sent[0]}"))
            sent[0] += 1

    threads = [threading.Thread(target=hammer, args=(k,), daemon=True) for k in range(clients)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)
    try:
        yield sent
    finally:
        stop.set()
        for thread in threads:
            thread.join(SCRAPE_TIMEOUT + 5)


def measure(
    port: int,
    context: ssl.SSLContext | None,
    seconds: float,
    headers: dict[str, str] | None = None,
) -> dict[str, float]:
    times: list[float] = []
    failures = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        ms = scrape(port, context, headers=headers)
        if ms is None:
            failures += 1
        else:
            times.append(ms)
        time.sleep(0.05)
    times = sorted(times) or [float("nan")]
    return {
        "n": len(times),
        "failed": failures,
        "p50": times[len(times) // 2],
        "p99": times[max(0, int(len(times) * 0.99) - 1)],
        "max": times[-1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="per phase")
    args = parser.parse_args()
    rows: list[tuple[str, dict[str, float], float]] = []
    drip_head = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Drip: "
    with tempfile.TemporaryDirectory() as tmp:
        ca, cert, key = _pki(Path(tmp))
        web = Path(tmp) / "web.yml"
        web.write_text(f"tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n")
        context = ssl.create_default_context(cafile=str(ca))

        with exporter(None, None) as port:
            base = measure(port, None, args.seconds)
            rows.append(("plain, no attack", base, base["p99"]))
            with Attack(port, 4 * WORKERS, plain(drip_head), b"a", every=2.0) as attack:
                drip = measure(port, None, args.seconds)
            rows.append(("slow drip (32 x 1 byte / 2 s)", drip, base["p99"]))
            print(f"  slow drip: {attack.cut} attacker connections cut by the server", flush=True)
            n = DEFAULT_LIMITS.max_connections + 144
            with Attack(port, n, plain(b""), b"", every=1.0) as attack:
                flood = measure(port, None, args.seconds)
            rows.append((f"idle TCP flood ({n} sockets)", flood, base["p99"]))
            print(f"  idle TCP flood: {attack.cut} attacker sockets shed", flush=True)

        with exporter(web, context) as port:
            tls_base = measure(port, context, args.seconds)
            rows.append(("TLS, no attack", tls_base, tls_base["p99"]))
            with Attack(port, 3 * WORKERS, tls_idle(context), b"", every=1.0) as attack:
                idle_tls = measure(port, context, args.seconds)
            rows.append(("idle TLS (24 after handshake)", idle_tls, tls_base["p99"]))
            print(f"  idle TLS: {attack.cut} attacker connections closed", flush=True)

        hashed = bcrypt.hashpw(b"right", bcrypt.gensalt(10)).decode()
        auth = Path(tmp) / "auth.yml"
        auth.write_text(f"basic_auth_users:\n  prom: '{hashed}'\n")
        good = _basic("prom", "right")
        with exporter(auth, None) as port:
            auth_base = measure(port, None, args.seconds, headers=good)
            rows.append(("basic auth, no attack", auth_base, auth_base["p99"]))
            with wrong_passwords(port, 30) as sent:
                flooded = measure(port, None, args.seconds, headers=good)
            rows.append(("wrong-password flood (30 clients)", flooded, auth_base["p99"]))
            print(f"  wrong-password flood: {sent[0]} wrong requests answered", flush=True)

    header = ("phase", "n", "failed", "p50 ms", "p99 ms", "max ms", "p99/base")
    print("\n{:34} {:>5} {:>6} {:>8} {:>8} {:>8} {:>9}".format(*header))
    for name, r, ref in rows:
        print(
            f"{name:34} {r['n']:5.0f} {r['failed']:6.0f} {r['p50']:8.2f} {r['p99']:8.2f} "
            f"{r['max']:8.2f} {r['p99'] / ref:9.2f}"
        )


if __name__ == "__main__":
    main()
