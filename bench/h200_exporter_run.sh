#!/usr/bin/env bash
# Run the real `migscope exporter` (nvml backend) on a GPU machine, read-only, and record:
# one --once exposition, then a served exporter scraped over HTTP while a matmul load starts
# and stops (GPM activity, memory, power), scrape latency, and the exporter's RSS.
# Usage: bench/h200_exporter_run.sh OUT_DIR [WHEEL_DIR]
#   WHEEL_DIR: wheels of migscope's dependencies for this machine's Python, when it has no
#   network (pip download --python-version 3.12 ... on a machine that has one).
set -euo pipefail
out=${1:?OUT_DIR}
wheels=${2:-}
mkdir -p "$out"
if [ -n "$wheels" ]; then
  python3 -m pip install -q --no-index --find-links "$wheels" --target /tmp/migscope-deps \
    pydantic pyyaml click cheroot bcrypt grpcio protobuf prometheus-client
  export PYTHONPATH=/tmp/migscope-deps:src:exporter:analyzer
else
  export PYTHONPATH=src:exporter:analyzer
fi
migscope() { python3 -c 'import sys; from migscope.cli.main import main; main(sys.argv[1:])' "$@"; }

migscope exporter --once | sed -E 's/GPU-[0-9a-f-]{36}/GPU-00000000-0000-0000-0000-000000000000/g' \
  > "$out/once.prom"

# Started directly (not through the shell function) so that $! is the exporter's own PID.
python3 -c 'import sys; from migscope.cli.main import main; main(sys.argv[1:])' \
  exporter --listen 127.0.0.1:9400 --log-level warning > /dev/null 2> "$out/exporter.log" &
exporter=$!
trap 'kill $exporter 2>/dev/null || true; wait $exporter 2>/dev/null || true' EXIT
python3 - "$out" "$exporter" <<'PY'
import http.client, json, statistics, subprocess, sys, time
out, pid = sys.argv[1], int(sys.argv[2])
def get(path="/metrics"):
    c = http.client.HTTPConnection("127.0.0.1", 9400, timeout=5)
    c.request("GET", path); r = c.getresponse(); body = r.read().decode(); c.close()
    return r.status, body
deadline = time.time() + 60
while time.time() < deadline:
    try:
        if get("/healthz")[0] == 200: break
    except OSError: pass
    time.sleep(0.2)
def reading():
    _, body = get()
    vals = {}
    for line in body.splitlines():
        for name in ("migscope_gpu_graphics_active_ratio", "migscope_gpu_power_watts",
                     "migscope_gpu_memory_used_bytes", "migscope_gpu_sm_active_ratio"):
            if line.startswith(name + "{"):
                vals[name] = float(line.rsplit(" ", 1)[1])
    return vals
LOAD = ("import time, torch\n"
        "a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16); b = a.clone()\n"
        "c = a @ b; torch.cuda.synchronize(); print('ready', flush=True)\n"
        "end = time.time() + 25\n"
        "while time.time() < end:\n"
        "    [a @ b for _ in range(20)]; torch.cuda.synchronize()\n")
rows = []
def phase(name, seconds):
    end = time.time() + seconds
    while time.time() < end:
        rows.append({"phase": name, "t": round(time.time(), 1), **reading()}); time.sleep(1)
phase("idle", 14)
load = subprocess.Popen([sys.executable, "-c", LOAD], stdout=subprocess.PIPE, text=True)
load.stdout.readline()
phase("load", 22)
load.wait()
phase("idle-after", 16)
conn = http.client.HTTPConnection("127.0.0.1", 9400, timeout=5)
times = []
for i in range(600):
    t0 = time.perf_counter(); conn.request("GET", "/metrics"); conn.getresponse().read()
    if i >= 100: times.append((time.perf_counter() - t0) * 1000)
times.sort()
status = {l.split(":")[0]: l.split(":")[1].strip() for l in open(f"/proc/{pid}/status") if l.startswith(("VmRSS", "VmHWM"))}
report = {"samples": rows, "scrape_ms": {"p50": round(times[len(times)//2], 3), "p99": round(times[int(len(times)*0.99)-1], 3)}, "exporter_memory": status}
open(f"{out}/served.json", "w").write(json.dumps(report, indent=1))
for r in rows: print(r)
print(report["scrape_ms"], status)
PY
