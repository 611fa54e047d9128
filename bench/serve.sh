# What the `evac serve` benchmarks (load.sh, memory.sh) share; sourced from the repository's root.
# Sets up a scratch directory $work with a TLS pair, removed (and the server stopped) on exit.
EVAC=${EVAC:-target/release/evac}
work=$(mktemp -d)
server=
trap 'kill $server 2>/dev/null || true; rm -rf "$work"' EXIT
bench/cert.sh "$work"

# review NAME SOURCE [PADDING]: examples/evictions/requests/SOURCE as one line in $work/NAME.json;
# with PADDING, its pod carries an annotation of that many bytes.
review() {
  python3 - "examples/evictions/requests/$2" "$work/$1.json" "${3:-0}" <<'PY'
import json, sys
source, target, padding = sys.argv[1], sys.argv[2], int(sys.argv[3])
review = json.load(open(source))
if padding:
    review["request"]["object"]["metadata"]["annotations"] = {"padding": "x" * padding}
json.dump(review, open(target, "w"), separators=(",", ":"))
PY
}

# start_server: `evac serve` of $work/policies.yml on 127.0.0.1:18443 (probes and metrics on
# :18081, log in $work/server.log), back once readiness answers; its pid in $server.
start_server() {
  "$EVAC" serve --config "$work/policies.yml" --context examples/evictions/context.yaml \
    --cert-file "$work/tls.crt" --key-file "$work/tls.key" --addr 127.0.0.1:18443 --probe-addr 127.0.0.1:18081 \
    --cache-dir "$work/cache" 2>"$work/server.log" &
  server=$!
  until curl -sf http://127.0.0.1:18081/readiness >/dev/null; do sleep 0.005; done
}
