#!/usr/bin/env bash
# Memory of `evac serve` at its edges, on loopback: HTTP/2 with many connections and streams
# (h2load, Debian package `nghttp2-client`), then a burst of concurrent 3 MB reviews (curl). Prints
# the resident memory before, at the peak and 5 s after each.
#   bench/memory.sh          (after `make build`)
set -euo pipefail
cd "$(dirname "$0")/.."
CONNECTIONS=${CONNECTIONS:-100}
STREAMS=${STREAMS:-200}
REQUESTS=${REQUESTS:-200000}
BURST=${BURST:-64}
command -v h2load >/dev/null || { echo "h2load is needed: apt-get install nghttp2-client" >&2; exit 1; }

source bench/serve.sh
review evacuate 03-dry-run.json
review big 11-plain-pod.json $((3 * 1024 * 1024))
sed -e "s|../../dist/policies/|$PWD/dist/policies/|" examples/serve/policies.yml > "$work/policies.yml"
start_server

rss() { awk '/^VmRSS/ {printf "%.0f", $2 / 1024}' "/proc/$server/status"; }
hwm() { awk '/^VmHWM/ {printf "%.0f", $2 / 1024}' "/proc/$server/status"; }

echo "== HTTP/2: $CONNECTIONS connections x $STREAMS streams, $REQUESTS evacuation requests"
before=$(rss)
h2load -c "$CONNECTIONS" -m "$STREAMS" -n "$REQUESTS" -d "$work/evacuate.json" \
  -H 'content-type: application/json' https://127.0.0.1:18443/validate/pod-eviction |
  grep -E "^requests:|^status codes:|finished in"
peak=$(hwm); sleep 5
echo "resident MiB: before $before, peak $peak, 5 s after $(rss)"

echo "== $BURST concurrent 3 MB reviews, one connection each (curl; 000: the stream was reset after a 503)"
before=$(rss)
started=$(date +%s%N)
pids=()
for _ in $(seq "$BURST"); do
  curl -sk -o /dev/null -w '%{http_code}\n' -H 'content-type: application/json' \
    --data-binary "@$work/big.json" https://127.0.0.1:18443/validate/pod-eviction >>"$work/codes" &
  pids+=($!)
done
wait "${pids[@]}" || true  # a curl that saw its stream reset exits non-zero
echo "answered in $(( ($(date +%s%N) - started) / 1000000 )) ms:" $(sort "$work/codes" | uniq -c)
curl -s http://127.0.0.1:18081/metrics | grep -E '^evac_admission_requests_refused_total' || true
peak=$(hwm); sleep 5
echo "resident MiB: before $before, peak since start $peak, 5 s after $(rss)"
