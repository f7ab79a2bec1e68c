#!/usr/bin/env python3
"""Compares two check directories: every JSON equal once timing fields are dropped."""
import json, os, sys, re
TIMING = re.compile(r'(_ms$|_ms_|^ms$|latency|elapsed|per_second|per_s$|_secs?$|_seconds$|duration|rate$|throughput)')
def strip(x):
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if not TIMING.search(k)}
    if isinstance(x, list):
        return [strip(v) for v in x]
    return x
a, b = sys.argv[1], sys.argv[2]
bad = 0
for name in sorted(os.listdir(a)):
    if not name.endswith('.json'):
        continue
    pa, pb = os.path.join(a, name), os.path.join(b, name)
    if not os.path.exists(pb):
        print('missing', name); bad += 1; continue
    try:
        ja, jb = strip(json.load(open(pa))), strip(json.load(open(pb)))
    except Exception as e:
        print('unreadable', name, e); bad += 1; continue
    if ja != jb:
        print('DIFFERS', name); bad += 1
print(f'{bad} differences over {len([n for n in os.listdir(a) if n.endswith(".json")])} files')
sys.exit(1 if bad else 0)
