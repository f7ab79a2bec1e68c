"""The official `anthropic` SDK against skald's proxy (driven by tests/proxy_sdk.rs).

The Rust test scripts the upstream behind skald in the order the scenarios run here; each
scenario asserts what the SDK hands the program and prints `PASS <name>`. Any failure raises, so
the script exits non-zero with the traceback.

Environment: SKALD_BASE_URL (a skald whose clients hold a skald key), SKALD_KEY (that key),
SKALD_OVERFLOW_BASE_URL (an open skald with a small window, for the overflow scenario).
"""

import os

import anthropic

SYSTEM = "You are a build assistant."
BASH = {
    "name": "bash",
    "description": "Run a shell command",
    "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
}


def build_log():
    return "".join(
        f"2026-01-01 INFO step {line:03} compiled module_{line}.rs ok\n" for line in range(300)
    )


def build_conversation():
    """A conversation whose tool result is large enough to be offloaded behind a ref."""
    return [
        {"role": "user", "content": "Run the build and tell me how it went."},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_build", "name": "bash", "input": {"command": "make"}}
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_build", "content": build_log()}],
        },
        {"role": "assistant", "content": "The build finished."},
        {"role": "user", "content": "Did step 150 compile?"},
    ]


def long_conversation():
    """Six turns, three with 8,000-character logs: fits skald's estimate, not the upstream's."""
    messages = []
    for turn, size in enumerate([8000, 8000, 8000, 300, 300, 300]):
        log, line = "", 0
        while True:
            text = f"build {turn} line {line}: linking /srv/app/src/main_{turn}.rs\n"
            if len(log) + len(text) > size:
                break
            log += text
            line += 1
        call = f"toolu_{turn}"
        messages += [
            {"role": "user", "content": f"Step {turn}: check the build log for job {turn}."},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Reading build {turn}."},
                    {"type": "tool_use", "id": call, "name": "bash",
                     "input": {"command": f"cat build-{turn}.log"}},
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call, "content": log}]},
            {"role": "assistant", "content": f"Build {turn} fails to link main_{turn}.rs."},
        ]
    messages.append({"role": "user", "content": "Which builds failed, and why?"})
    return messages


def session(name):
    return {"x-skald-session": f"anthropic-sdk-{name}"}


def text_of(message):
    return "".join(block.text for block in message.content if block.type == "text")


def main():
    client = anthropic.Anthropic(
        api_key=os.environ["SKALD_KEY"], base_url=os.environ["SKALD_BASE_URL"], max_retries=0
    )

    # Non-streaming: the upstream's answer, parsed by the SDK.
    message = client.messages.create(
        model="claude-test",
        max_tokens=256,
        system=SYSTEM,
        messages=[{"role": "user", "content": "Hi"}],
        extra_headers=session("plain"),
    )
    assert text_of(message) == "ok from upstream", message
    assert message.stop_reason == "end_turn"
    assert message.usage.input_tokens == 120
    print("PASS non-streaming")

    # Streaming through the SDK's stream helper: text as it comes, one final message.
    with client.messages.stream(
        model="claude-test",
        max_tokens=256,
        messages=[{"role": "user", "content": "Say hello"}],
        extra_headers=session("stream"),
    ) as stream:
        pieces = list(stream.text_stream)
        final = stream.get_final_message()
    assert pieces == ["Hello", " world"], pieces
    assert text_of(final) == "Hello world", final
    assert final.stop_reason == "end_turn"
    print("PASS streaming")

    # Tool interception, non-streaming: the model fetched the offloaded log through skald;
    # the SDK sees only the final answer and no tool the program did not define.
    message = client.messages.create(
        model="claude-test",
        max_tokens=256,
        system=SYSTEM,
        messages=build_conversation(),
        tools=[BASH],
        extra_headers=session("fetch"),
    )
    assert text_of(message) == "Step 150 compiled module_150.rs.", message
    assert all(block.type != "tool_use" for block in message.content), message.content
    assert message.stop_reason == "end_turn", message.stop_reason
    print("PASS tool-interception")

    # Tool interception, streaming: one message_start … message_stop, both calls' text as
    # consecutive content blocks, no tool_use block.
    with client.messages.stream(
        model="claude-test",
        max_tokens=256,
        system=SYSTEM,
        messages=build_conversation(),
        tools=[BASH],
        extra_headers=session("fetch-stream"),
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert kinds.count("message_start") == 1, kinds
    assert kinds.count("message_stop") == 1, kinds
    assert [block.type for block in final.content] == ["text", "text"], final.content
    assert text_of(final) == "Let me look.Found it.", final
    assert final.stop_reason == "end_turn", final.stop_reason
    print("PASS streaming-tool-interception")

    # Overflow: the upstream refuses the first call as too long; skald compacts and retries.
    small = anthropic.Anthropic(
        api_key="sk-ant-provider-test",
        base_url=os.environ["SKALD_OVERFLOW_BASE_URL"],
        max_retries=0,
    )
    message = small.messages.create(
        model="claude-test",
        max_tokens=256,
        system=SYSTEM,
        messages=long_conversation(),
        tools=[BASH],
        extra_headers=session("overflow"),
    )
    assert text_of(message) == "Every build fails to link.", message
    print("PASS overflow-recovery")


if __name__ == "__main__":
    main()
