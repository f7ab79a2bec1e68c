#!/usr/bin/env python3
"""The README's main job on a fresh machine: `skald serve` starts on the embedded store, answers
the engine API (ingest, assemble with an offloaded tool result, the ref behind it), and stops
gracefully on SIGTERM. Usage: serve_smoke.py <path to the skald binary>."""
import json
import signal
import subprocess
import sys
import tempfile
import urllib.request


def call(base, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method,
                                     headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def main():
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory() as home:
        server = subprocess.Popen([binary, "--home", home, "serve", "--addr", "127.0.0.1:0"],
                                  stderr=subprocess.PIPE, text=True)
        banner = server.stderr.readline()
        base = banner.split()[-1]
        assert base.startswith("http://127.0.0.1:"), banner
        assert call(base, "GET", "/healthz")["status"] == "ok"
        log = "".join(f"2026-01-01T00:00:{i % 60:02d} INFO step {i} ok\n" for i in range(400))
        messages = [
            {"role": "user", "content": "run the build", "timestamp": 1770000000000},
            {"role": "assistant", "content": [{"type": "toolCall", "id": "c1", "name": "bash",
                                               "arguments": {"command": "make"}}],
             "timestamp": 1770000001000},
            {"role": "toolResult", "toolCallId": "c1", "toolName": "bash",
             "content": [{"type": "text", "text": log}], "isError": False,
             "timestamp": 1770000002000},
            {"role": "assistant", "content": "The build passed.", "timestamp": 1770000003000},
            {"role": "user", "content": "good, now the tests", "timestamp": 1770000004000},
        ]
        ingested = call(base, "POST", "/v1/sessions/smoke/messages", {"messages": messages})
        assert ingested["ingestedCount"] == 5, ingested
        assembled = call(base, "POST", "/v1/sessions/smoke/assemble", {})
        text = json.dumps(assembled["messages"])
        assert "[REF_ID: " in text, "the big tool result was not offloaded"
        ref = text.split("[REF_ID: ")[1][:64]
        original = call(base, "GET", f"/v1/refs/{ref}?lines=1:2")
        assert "step 0 ok" in json.dumps(original), original
        server.send_signal(signal.SIGTERM)
        rest = server.stderr.read()
        assert server.wait(timeout=30) == 0, rest
        assert "stopped" in rest, rest
        print(f"serve smoke: ok ({assembled['estimatedTokens']} estimated tokens, ref {ref[:12]}…)")


if __name__ == "__main__":
    main()
