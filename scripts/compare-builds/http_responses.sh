#!/bin/bash
# usage: http_responses.sh <skald binary> <out dir> <port>
# Drives the engine, memory and refs APIs of `skald serve` with a fixed script and saves every
# response (status + body) for a byte-for-byte comparison between two builds.
BIN=$1; OUT=$2; PORT=$3; rm -rf $OUT; mkdir -p $OUT
HOME_DIR=$(mktemp -d)
$BIN serve --home $HOME_DIR --addr 127.0.0.1:$PORT > $OUT/server.log 2>&1 &
PID=$!
for i in $(seq 1 100); do curl -s localhost:$PORT/healthz > /dev/null && break; sleep 0.1; done
n=0
req() { # method path [body]
  n=$((n+1)); f=$(printf "%s/%03d" $OUT $n)
  if [ -n "$3" ]; then
    curl -s -o $f.body -w "%{http_code}\n" -X$1 localhost:$PORT$2 -H 'content-type: application/json' -d "$3" > $f.status
  else
    curl -s -o $f.body -w "%{http_code}\n" -X$1 localhost:$PORT$2 > $f.status
  fi
  echo "$1 $2" > $f.req
}
# A 600-line build log with one error at the end: large enough to be offloaded behind a ref.
LOG=$(python3 -c 'print("".join("2026-01-01 INFO step %d ok /src/app/main.rs:42\\n" % i for i in range(600)) + "error: build failed exit code 2\\n")')
T0=1770000000000
req GET /openapi.json
req POST /v1/sessions/demo/messages "{\"message\": {\"role\": \"user\", \"content\": \"why does the build fail?\", \"timestamp\": $T0}}"
req POST /v1/sessions/demo/messages "{\"messages\": [{\"role\": \"assistant\", \"content\": [{\"type\": \"toolCall\", \"id\": \"c1\", \"name\": \"bash\", \"arguments\": {\"command\": \"make\"}}], \"api\": \"openai-completions\", \"provider\": \"openai\", \"model\": \"gpt\", \"usage\": {\"input\": 10, \"output\": 5, \"cacheRead\": 0, \"cacheWrite\": 0, \"totalTokens\": 15, \"cost\": {\"input\": 0, \"output\": 0, \"cacheRead\": 0, \"cacheWrite\": 0, \"total\": 0}}, \"stopReason\": \"toolUse\", \"timestamp\": $((T0+1000))}, {\"role\": \"toolResult\", \"toolCallId\": \"c1\", \"toolName\": \"bash\", \"content\": [{\"type\": \"text\", \"text\": \"$LOG\"}], \"isError\": false, \"timestamp\": $((T0+2000))}]}"
req POST /v1/sessions/demo/assemble '{}'
req POST /v1/sessions/demo/assemble '{"tokenBudget": 50000, "model": "gpt", "prompt": "fix the build"}'
req POST /v1/sessions/demo/assemble '{"tokenBudget": 10}'
req POST /v1/sessions/demo/assemble '{"availableTools": ["fetch_original_data"]}'
req POST /v1/sessions/demo/after-turn '{"runtimeContext": {"promptCache": {"lastCallUsage": {"input": 900}}}}'
req GET /v1/sessions
req GET /v1/sessions/demo
req GET /v1/sessions/demo/context
req GET "/v1/sessions/demo/context?memory=true&tokenBudget=30000"
req GET /v1/sessions/nope
req GET "/v1/sessions/..%2Fx"
req POST /v1/sessions/demo/compact '{"force": true}'
req POST /v1/sessions/demo/compact '{"tokenBudget": 3000, "force": true, "customInstructions": "keep paths"}'
req GET /v1/sessions/demo/context
req POST /v1/sessions/boot/bootstrap "{\"messages\": [{\"role\": \"user\", \"content\": \"hello there\", \"timestamp\": $T0}]}"
req POST /v1/sessions/boot/bootstrap "{\"messages\": [{\"role\": \"user\", \"content\": \"hello there\", \"timestamp\": $T0}]}"
req POST /v1/sessions/boot/bootstrap '{}'
req POST /v1/sessions/file/bootstrap "{\"sessionJsonl\": \"{\\\"type\\\":\\\"session\\\",\\\"version\\\":3,\\\"id\\\":\\\"file\\\",\\\"timestamp\\\":\\\"2026-01-01T00:00:00.000Z\\\",\\\"cwd\\\":\\\"/w\\\"}\\n{\\\"type\\\":\\\"message\\\",\\\"id\\\":\\\"a1b2c3d4\\\",\\\"parentId\\\":null,\\\"timestamp\\\":\\\"2026-01-01T00:00:01.000Z\\\",\\\"message\\\":{\\\"role\\\":\\\"user\\\",\\\"content\\\":\\\"hi\\\",\\\"timestamp\\\":1767225601000}}\\n\"}"
req POST /v1/sessions/file/bootstrap '{"sessionJsonl": "not json"}'
req POST /v1/sessions/demo/after-turn '{"isHeartbeat": true}'
req POST /v1/memory/remember '{"content": "I prefer tabs over spaces in Go code", "type": "preferences"}'
req POST /v1/memory/remember '{"content": "The staging database lives on db-7.internal:5432", "type": "entities", "priority": 8}'
req GET "/v1/memory/read?uri=viking://user/default/memories/preferences"
req POST /v1/memory/search '{"query": "tabs or spaces"}'
req GET "/v1/memory/ls?uri=viking://"
req GET "/v1/memory/tree?uri=viking://&depth=3"
req GET /v1/memory/history
req POST /v1/refs/fetch '{"ref_ids": ["0000000000000000000000000000000000000000000000000000000000000000"]}'
REF=$(grep -o 'REF_ID: [0-9a-f]\{64\}' $OUT/004.body | head -1 | cut -c9-)
req POST /v1/refs/fetch "{\"ref_ids\": [\"$REF\"], \"lines\": \"1:3\"}"
req GET "/v1/refs/$REF?grep=error&context=1"
req POST /v1/sessions/demo/assemble '{"prompt": "what does staging use?"}'
req GET /v1/refs/nothex
req POST /v1/sessions/demo/messages '{}'
req POST /v1/sessions/demo/messages '{"message": {"role": "user"}}'
kill -INT $PID; wait $PID 2>/dev/null
# Normalise what differs between any two runs: wall-clock times, generated entry ids.
for f in $OUT/*.body; do
  sed -i -E 's/"(createdAt|updatedAt|created_at|updated_at|at|timestamp|writtenAt|written_at)":"[^"]*"/"\1":"T"/g; s/"(at_ms|atMs|created_at_ms|updated_at_ms|timestamp)":[0-9]{12,}/"\1":0/g; s/20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z/TIME/g' $f
done
rm -rf $HOME_DIR
