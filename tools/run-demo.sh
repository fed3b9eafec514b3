#!/usr/bin/env bash
# `make run`'s demo: the simulated cluster, agentwatch, and the agent that carries the
# server's requests into that cluster, each waiting for what it needs; then one line saying
# where to go and how to sign in. Ctrl+C stops the three. Quiet unless asked (ACCESS_LOG=true).
set -uo pipefail
bin=$1 host=$2 port=$3 sim_port=$4 kubeconfig=$5 token_file=$6 password_file=$7
health_port=${AGENT_HEALTH_PORT:-8002}
url="http://$host:$port"
pids=()

stop() {
  trap - INT TERM EXIT
  kill "${pids[@]}" 2>/dev/null
  wait "${pids[@]}" 2>/dev/null
  exit 0
}
trap stop INT TERM EXIT

# wait_for URL WHAT: until URL answers 200 (every 0.2 s, at most a minute).
wait_for() {
  "$bin/python" - "$1" "$2" <<'PY'
import sys, time, urllib.request
url, what = sys.argv[1], sys.argv[2]
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            if answer.status == 200:
                sys.exit(0)
    except OSError:
        pass
    time.sleep(0.2)
sys.exit(f"{what} did not start within a minute ({url})")
PY
}

rm -f "$kubeconfig"
# A small cluster's pace: an action every few seconds, Events kept a quarter of an hour.
"$bin/python" -m simkube --port "$sim_port" --kubeconfig "$kubeconfig" --churn \
  --churn-rate 0.3 --event-ttl 900 &
pids+=($!)
while [ ! -s "$kubeconfig" ]; do sleep 0.2; done

"$bin/agentwatch" serve --host "$host" --port "$port" &
pids+=($!)
wait_for "$url/login" "agentwatch" || exit 1

# Shells and applies are off unless an agent is started with them, and an agent reads
# Secrets' names only unless told otherwise; the demo's cluster is the simulator, so its
# agent allows both operations and reads Secrets' keys (values blanked), and a new team can
# try every operation and see a Secret's keys and their changes.
AGENTWATCH_AGENT_TOKEN=$(cat "$token_file") AGENTWATCH_AGENT_HEALTH_PORT=$health_port \
  "$bin/agentwatch" agent --url "$url" --kubeconfig "$kubeconfig" --context sim \
  --allow-exec --allow-apply --secrets keys &
pids+=($!)
wait_for "http://127.0.0.1:$health_port/readyz" "the agent" || exit 1

echo "ready: open $url/ and sign in as admin / $(cat "$password_file")  (Ctrl+C stops)"
wait -n "${pids[@]}"
