#!/bin/bash
# Debian's Prometheus scrapes `hbgctl metrics --listen` (docs/OPERATIONS.md,
# "Metrics"): a private hbgd runs a few graphs, the exporter serves it on
# a free port of 127.0.0.1, and prometheus (its own free port, a temporary
# TSDB, a 1 s scrape interval) scrapes it. Read back through Prometheus'
# HTTP API: the counter hbg_graphs_retired_total (the graphs run), a
# histogram quantile of hbg_graph_latency_seconds, and from
# /api/v1/metadata the type of hbg_graphs_submitted, `counter` under the
# OpenMetrics family name: the exporter answered Prometheus' Accept with
# OpenMetrics and the types survived. Everything started is killed at the
# end, failed or not. Needs the plain build (B), prometheus and python3.
# Exit 0 passed, 1 failed.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
B=${B:-build}
case $B in /*) ;; *) B=$root/$B ;; esac
hbgd=$B/bin/hbgd
hbgctl=$B/bin/hbgctl
GRAPHS=3

fail() {
        echo "test-prometheus: FAIL: $*"
        for f in "$tmp"/*.log; do
                [ -s "$f" ] && { echo "  --- ${f##*/}"; tail -n 20 "$f" | sed 's/^/  | /'; }
        done
        exit 1
}
command -v prometheus >/dev/null || { echo "test-prometheus: FAIL: no prometheus (Debian package prometheus)"; exit 1; }
for p in "$hbgd" "$hbgctl"; do
        [ -x "$p" ] || { echo "test-prometheus: FAIL: $p not built"; exit 1; }
done

tmp=$(mktemp -d /tmp/hbg-prometheus.XXXXXX) || exit 1
pids=()
cleanup() {
        for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
        for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
        rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

sock=$tmp/hbgd.sock
"$hbgd" --socket "$sock" --threads 2 >"$tmp/hbgd.log" 2>&1 &
pids+=($!)
"$hbgctl" --socket "$sock" wait --timeout 10 >/dev/null || fail "hbgd did not start"
for ((i = 0; i < GRAPHS; i++)); do
        "$hbgctl" --socket "$sock" run "$root/examples/graph_basic.json" >"$tmp/run.log" 2>&1 ||
                fail "hbgctl run examples/graph_basic.json"
done

"$hbgctl" --socket "$sock" metrics --listen 127.0.0.1:0 2>"$tmp/exporter.log" &
pids+=($!)
port=
for ((i = 0; i < 100; i++)); do
        port=$(sed -n 's|.*http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p' "$tmp/exporter.log")
        [ -n "$port" ] && break
        sleep 0.05
done
[ -n "$port" ] || fail "the exporter did not say where it listens"

pport=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$tmp/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: hbgd
    static_configs:
      - targets: ["127.0.0.1:$port"]
YAML
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/data" \
        --web.listen-address="127.0.0.1:$pport" --log.level=warn >"$tmp/prometheus.log" 2>&1 &
pids+=($!)

# Ask until every answer is there (15 s at most), then judge them.
python3 - "$pport" "$GRAPHS" <<'PY' || fail "Prometheus' API did not answer as expected"
import json, math, sys, time, urllib.parse, urllib.request

base = "http://127.0.0.1:%s/api/v1/" % sys.argv[1]
graphs = float(sys.argv[2])

def get(path, **params):
    url = base + path + "?" + urllib.parse.urlencode(params)
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            body = json.load(r)
    except OSError:
        return None
    return body["data"] if body.get("status") == "success" else None

def scalar(expr):
    d = get("query", query=expr)
    if not d or not d["result"]:
        return None
    return float(d["result"][0]["value"][1])

want = {
    "up": lambda: scalar('up{job="hbgd"}'),
    "counter": lambda: scalar('hbg_graphs_retired_total{job="hbgd"}'),
    "quantile": lambda: scalar('histogram_quantile(0.5, hbg_graph_latency_seconds_bucket{job="hbgd"})'),
    "type": lambda: ((get("metadata", metric="hbg_graphs_submitted") or {}).get("hbg_graphs_submitted")
                     or [{}])[0].get("type"),
    "histogram type": lambda: ((get("metadata", metric="hbg_graph_latency_seconds") or {})
                               .get("hbg_graph_latency_seconds") or [{}])[0].get("type"),
}
got = {}
deadline = time.monotonic() + 15
while time.monotonic() < deadline:
    got = {k: f() for k, f in want.items()}
    if all(v is not None for v in got.values()) and got["up"] == 1:
        break
    time.sleep(0.25)
print("  prometheus answered:", got)
ok = (got.get("up") == 1 and got.get("counter") == graphs and got.get("type") == "counter"
      and got.get("histogram type") == "histogram"
      and got.get("quantile") is not None and math.isfinite(got["quantile"]) and 0 <= got["quantile"] <= 10)
sys.exit(0 if ok else 1)
PY
echo "test-prometheus: ok"
