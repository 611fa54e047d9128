#!/usr/bin/env bash
# The browser playground's benchmark (make bench-playground; docs/benchmarks.md): serves
# dist/playground with `evac playground` on loopback and measures, in headless Chromium, the
# page's time to ready, the time per verdict and a 100-VM scenario's run, with KubeVirt alone, with
# evac, and both side by side (one line each; RUNS= picks some).
set -euo pipefail
cd "$(dirname "$0")/.."
evac=${EVAC:-target/release/evac}
log=$(mktemp)
"$evac" playground --addr 127.0.0.1:0 > "$log" 2>/dev/null &
server=$!
trap 'kill $server 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 50); do grep -q '^listening:' "$log" && break; sleep 0.1; done
url=$(sed -n 's/^listening: playground=//p' "$log")
[ -n "$url" ] || { echo "evac playground did not start" >&2; exit 1; }
echo "wasm: $(stat -c %s dist/playground/evac_web_bg.wasm) bytes, $(gzip -9c dist/playground/evac_web_bg.wasm | wc -c) gzipped"
for runs in ${RUNS:-kubevirt evac both}; do
  echo "runs=$runs: $(node --experimental-websocket --no-warnings bench/playground.mjs "$url" bench/scenario-100-vms.yaml "${VERDICTS:-500}" "$runs")"
done
