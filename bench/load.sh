#!/usr/bin/env bash
# Load benchmark of `evac serve` on loopback with wrk (Debian package `wrk`): HTTPS with
# keep-alive, the pod-eviction policy, its context served from memory. Runs each request for
# $DURATION, then the evacuation request again while the policy's version is swapped every second.
#   bench/load.sh            (after `make build`)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-15s}
CONNECTIONS=${CONNECTIONS:-16}
THREADS=${THREADS:-1}
command -v wrk >/dev/null || { echo "wrk is needed: apt-get install wrk" >&2; exit 1; }

source bench/serve.sh
review evacuate 03-dry-run.json
review plain-pod 11-plain-pod.json
cp dist/policies/pod-eviction.wasm "$work/pod-eviction.wasm"
policies() {
  sed -e "s|../../dist/policies/pod-eviction.wasm|$work/pod-eviction.wasm|" -e "s|label: local|label: $1|" \
    examples/serve/policies.yml > "$work/policies.yml.tmp" && mv "$work/policies.yml.tmp" "$work/policies.yml"
}
policies v1
EVAC_LOG=info start_server
if [ -n "${PERF_OUT:-}" ]; then perf record -g -o "$PERF_OUT" -p $server -- sleep 6 >/dev/null 2>&1 & fi

run() {
  echo "== $1"
  EVAC_REVIEW="$work/$2.json" wrk -t"$THREADS" -c"${CONNECTIONS}" -d"$DURATION" --latency -s bench/post.lua \
    https://127.0.0.1:18443/validate/pod-eviction | grep -E "Requests/sec|50%|90%|99%|non-200|Socket"
}
# Warm up (first connections, instance pools, page faults), then measure.
EVAC_REVIEW="$work/evacuate.json" wrk -t1 -c"$CONNECTIONS" -d3s -s bench/post.lua \
  https://127.0.0.1:18443/validate/pod-eviction >/dev/null
run "evacuation request (3 reads, dry-run mark), $CONNECTIONS connections" evacuate
run "plain pod (1 read), $CONNECTIONS connections" plain-pod
CONNECTIONS=$((CONNECTIONS / 2)) run "evacuation request, $((CONNECTIONS / 2)) connections" evacuate

( for i in $(seq 1 30); do sleep 1; policies "v$((i % 2 + 2))-$i"; done ) &
swapper=$!
run "evacuation request while swapping versions every second" evacuate
kill $swapper 2>/dev/null || true
echo "== swaps: $(curl -s http://127.0.0.1:18081/metrics | grep -E '^evac_policy_swaps_total' | tr '\n' ' ')"
echo "== cold start (compiles the module): $(grep -o 'ready_after_ms=[0-9]*' "$work/server.log")"
kill $server; wait $server 2>/dev/null || true
for i in 1 2 3; do
  began=$(date +%s%N)
  EVAC_LOG=info start_server
  echo "== restart with a warm compile cache: readiness answered 200 after $(( ($(date +%s%N) - began) / 1000000 )) ms ($(grep -o 'ready_after_ms=[0-9]*' "$work/server.log"))"
  kill $server; wait $server 2>/dev/null || true
done
