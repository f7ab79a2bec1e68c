#!/usr/bin/env bash
# The dashboard's page load for a session of 1,000 model calls (2,002 messages: 1,000 tool calls,
# their outputs — every tenth 400 lines, the rest 40 — and a user and a final assistant message),
# imported into a fresh home and served by the release `skald` on loopback without keys. Prints
# each page's weight in bytes and, for three runs of 21 requests each, the median time (curl's
# time_total) of the session page (its newest 50 calls), its oldest page of calls, the sessions
# list, the savings overview, the export and the JSON context route beside them.
#
#   cargo build --release -p skald-cli && benchmarks/dashboard_page_load.sh [path/to/skald]
set -euo pipefail
skald=${1:-target/release/skald}
work=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
python3 - "$work/bench.jsonl" <<'PY'
import json, sys
sid = "bench001-1111-4222-8333-444455556666"
usage = {"input": 100, "output": 10, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 110,
         "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}
lines = [json.dumps({"type": "session", "version": 3, "id": sid,
                     "timestamp": "2026-03-01T10:00:00.000Z", "cwd": "/x"})]
parent = None
def add(message):
    global parent
    entry = f"{len(lines):08x}"
    lines.append(json.dumps({"type": "message", "id": entry, "parentId": parent,
                             "timestamp": "2026-03-01T10:00:00.000Z", "message": message}))
    parent = entry
add({"role": "user", "content": [{"type": "text", "text": "Fix the build."}], "timestamp": 1})
for i in range(1000):
    add({"role": "assistant", "content": [{"type": "toolCall", "id": f"t{i}", "name": "bash",
         "arguments": {"command": f"cat file{i}.py"}}], "api": "anthropic-messages",
         "provider": "anthropic", "model": "m", "usage": usage, "stopReason": "toolUse",
         "timestamp": 1})
    body = "\n".join(f"line {j} of file {i}: value = compute({j})"
                     for j in range(400 if i % 10 == 0 else 40))
    add({"role": "toolResult", "toolCallId": f"t{i}", "toolName": "bash",
         "content": [{"type": "text", "text": body}], "isError": False, "timestamp": 1})
add({"role": "assistant", "content": [{"type": "text", "text": "Done."}],
     "api": "anthropic-messages", "provider": "anthropic", "model": "m", "usage": usage,
     "stopReason": "stop", "timestamp": 1})
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
PY
"$skald" --home "$work/home" import "$work/bench.jsonl" --json >/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$skald" --home "$work/home" serve --addr "127.0.0.1:$port" 2>"$work/serve.log" &
server=$!
until curl -sf "http://127.0.0.1:$port/healthz" >/dev/null; do sleep 0.1; done
sid=bench001-1111-4222-8333-444455556666
for page in /ui "/ui/sessions/$sid" "/ui/sessions/$sid?calls=21" /ui/savings /ui/memory \
  "/ui/sessions/$sid/export"; do
  curl -s -o /dev/null -w "$page %{http_code} %{size_download} bytes\n" "http://127.0.0.1:$port$page"
done
for run in 1 2 3; do
  for page in "/ui/sessions/$sid" "/ui/sessions/$sid?calls=21" /ui /ui/savings \
    "/ui/sessions/$sid/export" "/v1/sessions/$sid/context"; do
    for _ in $(seq 21); do
      curl -s -o /dev/null -w "%{time_total}\n" "http://127.0.0.1:$port$page"
    done | sort -n | awk -v page="$page" -v run="$run" \
      '{t[NR]=$1} END {printf "run %d %s p50 %.1f ms\n", run, page, t[(NR+1)/2]*1000}'
  done
done
