#!/usr/bin/env bash
# Evaluates each example eviction in requests/ with the pod-eviction policy against context.yaml,
# and prints what a client such as `kubectl drain` would see.
# Usage: run.sh <evac binary> <pod-eviction.wasm>
set -euo pipefail
evac=${1:-target/release/evac}
policy=${2:-dist/policies/pod-eviction.wasm}
here=$(cd "$(dirname "$0")" && pwd)

printf '%-34s %-8s %s\n' "EXAMPLE" "ANSWER" "MESSAGE / EFFECTS"
for request in "$here"/requests/*.json; do
  name=$(basename "$request" .json)
  response=$("$evac" eval --policy "$policy" --request "$request" --context "$here/context.yaml")
  python3 - "$name" "$response" <<'PY'
import json, sys
name, response = sys.argv[1], json.loads(sys.argv[2])
answer = "200" if response["accepted"] else str(response["code"])
print(f"{name:<34} {answer:<8} {response.get('message') or 'eviction allowed'}")
for effect in response["effects"]:
    vmi = effect["vmi"]
    extra = " (dry run)" if effect["dryRun"] else ""
    extra += f" requested by the {effect['source']}" if effect["source"] else ""
    print(f"{'':<43} -> {effect['type']} {vmi['namespace']}/{vmi['name']} from {effect['node']}{extra}")
PY
done
