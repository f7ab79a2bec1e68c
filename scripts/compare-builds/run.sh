#!/bin/bash
# Compares what two builds of `skald` produce, for a change that must not alter what users see:
#   scripts/compare-builds/run.sh OLD_SKALD NEW_SKALD [DATA_DIR]
# - `skald replay --json` on every transcript under DATA_DIR/trajectories,
# - `skald eval locomo --json` on DATA_DIR/locomo (with its errors file),
# - `skald compact --compare --json` on DATA_DIR/trajectories/claude-code,
# - the engine, memory and refs HTTP routes of `skald serve`, driven by http_responses.sh.
# JSON is compared with timing fields left out (same_json.py); HTTP bodies byte for byte once
# wall-clock times are masked. Exits non-zero on any difference. DATA_DIR defaults to
# ../shared/data (the benchmark data, read in place, never copied).
set -u
OLD=$1; NEW=$2; DATA=${3:-$(cd "$(dirname "$0")/../../.." && pwd)/shared/data}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d)
outputs() { # binary outdir
  local bin=$1 out=$2; mkdir -p "$out"
  export SKALD_HOME=$(mktemp -d)
  for f in "$DATA"/trajectories/*/*.jsonl "$DATA"/trajectories/*/*.json "$DATA"/trajectories/*/*.traj; do
    [ -f "$f" ] || continue
    local name; name=$(echo "$f" | sed "s|$DATA/trajectories/||; s|/|_|g")
    echo "  replay $name" >&2
    "$bin" replay "$f" --json > "$out/replay-$name.json" 2> /dev/null
  done
  echo "  eval locomo" >&2
  "$bin" eval locomo "$DATA/locomo/locomo-dev.json" --errors "$DATA/locomo/locomo-dev-errors.json" --json > "$out/locomo.json" 2> /dev/null
  echo "  compact --compare" >&2
  "$bin" compact --compare "$DATA/trajectories/claude-code" --json > "$out/compare.json" 2> /dev/null
}
echo "== $OLD" >&2; outputs "$OLD" "$WORK/old"
echo "== $NEW" >&2; outputs "$NEW" "$WORK/new"
status=0
python3 "$HERE/same_json.py" "$WORK/old" "$WORK/new" || status=1
"$HERE/http_responses.sh" "$OLD" "$WORK/http-old" 17491
"$HERE/http_responses.sh" "$NEW" "$WORK/http-new" 17492
if diff -r -x server.log -x 001.body "$WORK/http-old" "$WORK/http-new"; then
  echo "HTTP responses: identical"
else
  echo "HTTP responses: differ"; status=1
fi
# /openapi.json (response 001) is compared apart: its descriptions come from doc comments.
python3 - "$WORK/http-old/001.body" "$WORK/http-new/001.body" <<'PY' || status=1
import json, sys
def strip(x):
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if k != "description"}
    if isinstance(x, list):
        return [strip(v) for v in x]
    return x
a, b = (json.load(open(p)) for p in sys.argv[1:3])
same = strip(a) == strip(b)
print("openapi.json: " + ("same routes and schemas" + ("" if a == b else " (descriptions differ)") if same else "DIFFERS"))
sys.exit(0 if same else 1)
PY
echo "outputs kept in $WORK"
exit $status
