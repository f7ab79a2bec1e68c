#!/usr/bin/env python3
"""Latency of each `skald hook <event>` process, as Claude Code's plugin runs them.

    scripts/hook-latency.py SKALD [DATA_DIR]     # DATA_DIR: ../shared/data (Claude Code transcripts)

On a fresh data directory (a temporary SKALD_HOME with 32 memories written by `skald remember`),
each event gets 10 warm-up calls, then 3 runs of N calls; it prints the medians of the runs' p50
and p99 (with 50 calls, p99 is the slowest call) of the wall time, and the median CPU time (user
+ system) of one process. pre-compact and session-end take a new session id per call, so each
call's job imports and compacts the whole transcript, as the first compaction of a session does;
they answer once the job is written and a detached skald runs it, so for them the script waits
for the job to finish after each call (the next call does not share the cores with it) and also
prints the median time from the hook's start to the job's end.
"""
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid


def pending_jobs():
    jobs = os.path.join(os.environ["SKALD_HOME"], "hooks", "jobs")
    return os.path.isdir(jobs) and any(name.endswith(".json") for name in os.listdir(jobs))


def measure(skald, event, hook, calls, fresh_session):
    cpu = []
    done_after = []

    def one():
        if fresh_session:
            hook["session_id"] = str(uuid.uuid4())
        data = json.dumps(hook).encode()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run([skald, "hook", event], input=data, capture_output=True)
        wall = (time.perf_counter() - start) * 1000
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            sys.exit(f"skald hook {event} failed: {done.stderr.decode()}")
        if fresh_session:
            while pending_jobs():
                time.sleep(0.002)
            done_after.append((time.perf_counter() - start) * 1000)
        cpu.append((after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000)
        return wall

    for _ in range(10):
        one()
    p50s, p99s = [], []
    for _ in range(3):
        times = sorted(one() for _ in range(calls))
        p50s.append(statistics.median(times))
        p99s.append(times[max(0, round(len(times) * 0.99) - 1)])
    job = statistics.median(done_after) if done_after else None
    return statistics.median(p50s), statistics.median(p99s), statistics.median(cpu), job


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    skald = os.path.abspath(sys.argv[1])
    data = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "../../shared/data")
    home = tempfile.mkdtemp(prefix="skald-hook-latency-")
    os.environ["SKALD_HOME"] = home
    remember = [skald, "remember", "--content"]
    subprocess.run(remember + ["The staging cluster's database password rotates every Tuesday at 09:00 UTC"], check=True, capture_output=True)
    for i in range(31):
        subprocess.run(remember + [f"Project note {i}: the service billing-{i} runs on port 80{i:02} and is owned by team {i}"], check=True, capture_output=True)
    output = "\n".join(str(i) for i in range(1, 4001))
    cases = [
        ("post-tool-use", "a 4,000-line Bash output", {"session_id": "s", "transcript_path": "", "cwd": "/tmp", "hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_input": {"command": "seq 1 4000"}, "tool_response": {"stdout": output, "stderr": "", "interrupted": False, "isImage": False}}, 50, False),
        ("user-prompt-submit", "a prompt, 32 memories", {"session_id": "s", "transcript_path": "", "cwd": "/tmp", "hook_event_name": "UserPromptSubmit", "prompt": "When does the staging database password rotate?"}, 50, False),
    ]
    transcripts = os.path.join(data, "trajectories/claude-code")
    small = os.path.join(transcripts, "tool_heavy.jsonl")
    if os.path.exists(small):
        compacted = {"session_id": "compacted", "transcript_path": small, "cwd": "/tmp", "hook_event_name": "PreCompact", "trigger": "manual", "custom_instructions": None}
        subprocess.run([skald, "hook", "pre-compact"], input=json.dumps(compacted).encode(), check=True)
        cases += [
            ("session-start", "source compact", {"session_id": "compacted", "transcript_path": "", "cwd": "/tmp", "hook_event_name": "SessionStart", "source": "compact"}, 50, False),
            ("pre-compact", "tool_heavy.jsonl (39 KB)", dict(compacted), 20, True),
            ("session-end", "tool_heavy.jsonl (39 KB)", {"session_id": "e", "transcript_path": small, "cwd": "/tmp", "hook_event_name": "SessionEnd", "reason": "other"}, 20, True),
        ]
        for name in sorted(os.listdir(transcripts)):
            path = os.path.join(transcripts, name)
            if name.endswith(".jsonl") and os.path.getsize(path) > 1_000_000:
                cases.append(("pre-compact", f"{name} ({os.path.getsize(path) // 1000} KB)", {"session_id": "l", "transcript_path": path, "cwd": "/tmp", "hook_event_name": "PreCompact", "trigger": "auto", "custom_instructions": None}, 5, True))
                break
    else:
        print(f"no Claude Code transcripts under {transcripts}: pre-compact, session-start and session-end not measured", file=sys.stderr)
    print(f"load average {os.getloadavg()[0]:.1f}")
    for event, what, hook, calls, fresh in cases:
        p50, p99, cpu, job = measure(skald, event, hook, calls, fresh)
        done = f"  job done p50 {job:6.1f} ms" if job is not None else ""
        print(f"{event:20} {what:32} wall p50 {p50:6.1f} ms  p99 {p99:6.1f} ms  CPU p50 {cpu:5.1f} ms  (3 x {calls} calls){done}")


if __name__ == "__main__":
    main()
