"""The official `openai` SDK against skald's proxy (driven by tests/proxy_sdk.rs).

The Rust test scripts the upstream behind skald in the order the scenarios run here; each
scenario asserts what the SDK hands the program and prints `PASS <name>`. Any failure raises, so
the script exits non-zero with the traceback.

Environment: SKALD_BASE_URL (a skald whose clients hold a skald key), SKALD_KEY (that key),
SKALD_OVERFLOW_BASE_URL (an open skald with a small window, for the overflow scenario).
"""

import json
import os

import openai

SYSTEM = "You are a build assistant."
BASH = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a shell command",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
}


def build_log():
    return "".join(
        f"2026-01-01 INFO step {line:03} compiled module_{line}.rs ok\n" for line in range(300)
    )


def build_conversation():
    """A conversation whose tool result is large enough to be offloaded behind a ref."""
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Run the build and tell me how it went."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_build",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command":"make"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_build", "content": build_log()},
        {"role": "assistant", "content": "The build finished."},
        {"role": "user", "content": "Did step 150 compile?"},
    ]


def long_conversation():
    """Six turns, three with 8,000-character logs: fits skald's estimate, not the upstream's."""
    messages = [{"role": "system", "content": SYSTEM}]
    for turn, size in enumerate([8000, 8000, 8000, 300, 300, 300]):
        log, line = "", 0
        while True:
            text = f"build {turn} line {line}: linking /srv/app/src/main_{turn}.rs\n"
            if len(log) + len(text) > size:
                break
            log += text
            line += 1
        call = f"call_{turn}"
        messages += [
            {"role": "user", "content": f"Step {turn}: check the build log for job {turn}."},
            {
                "role": "assistant",
                "content": f"Reading build {turn}.",
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {
                            "name": "bash",
                            "arguments": json.dumps({"command": f"cat build-{turn}.log"}),
                        },
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call, "content": log},
            {"role": "assistant", "content": f"Build {turn} fails to link main_{turn}.rs."},
        ]
    messages.append({"role": "user", "content": "Which builds failed, and why?"})
    return messages


def session(name):
    return {"x-skald-session": f"openai-sdk-{name}"}


def main():
    client = openai.OpenAI(
        api_key=os.environ["SKALD_KEY"], base_url=os.environ["SKALD_BASE_URL"], max_retries=0
    )

    # Non-streaming: the upstream's answer, parsed by the SDK.
    completion = client.chat.completions.create(
        model="gpt-test",
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Hi"}],
        temperature=0.2,
        extra_headers=session("plain"),
    )
    assert completion.choices[0].message.content == "ok from upstream", completion
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage.prompt_tokens == 120
    print("PASS non-streaming")

    # Streaming with create(stream=True): the pieces in order, usage at the end.
    stream = client.chat.completions.create(
        model="gpt-test",
        messages=[{"role": "user", "content": "Say hello"}],
        stream=True,
        stream_options={"include_usage": True},
        extra_headers=session("stream"),
    )
    pieces, usage = [], None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            if choice.delta.content:
                pieces.append(choice.delta.content)
    assert pieces == ["Hello", " world"], pieces
    assert usage is not None and usage.prompt_tokens == 100, usage
    print("PASS streaming")

    # Tool interception, non-streaming: the model fetched the offloaded log through skald;
    # the SDK sees only the final answer and no tool the program did not define.
    completion = client.chat.completions.create(
        model="gpt-test",
        messages=build_conversation(),
        tools=[BASH],
        extra_headers=session("fetch"),
    )
    message = completion.choices[0].message
    assert message.content == "Step 150 compiled module_150.rs.", message
    assert not message.tool_calls, message.tool_calls
    print("PASS tool-interception")

    # Tool interception, streaming, through the SDK's accumulating stream helper: one message,
    # the text of both upstream calls, no tool call, a consistent chunk sequence.
    with client.chat.completions.stream(
        model="gpt-test",
        messages=build_conversation(),
        tools=[BASH],
        extra_headers=session("fetch-stream"),
    ) as stream:
        texts = [event.delta for event in stream if event.type == "content.delta"]
        final = stream.get_final_completion()
    message = final.choices[0].message
    # The text after the hidden round starts a new paragraph instead of running on.
    assert "".join(texts) == "Let me look. \n\nFound it.", texts
    assert message.content == "Let me look. \n\nFound it.", message
    assert not message.tool_calls, message.tool_calls
    assert final.choices[0].finish_reason == "stop", final.choices[0].finish_reason
    print("PASS streaming-tool-interception")

    # Overflow: the upstream refuses the first call as too long; skald compacts and retries.
    small = openai.OpenAI(
        api_key="sk-provider-test",
        base_url=os.environ["SKALD_OVERFLOW_BASE_URL"],
        max_retries=0,
    )
    completion = small.chat.completions.create(
        model="gpt-test",
        messages=long_conversation(),
        tools=[BASH],
        extra_headers=session("overflow"),
    )
    assert completion.choices[0].message.content == "Every build fails to link.", completion
    print("PASS overflow-recovery")


if __name__ == "__main__":
    main()
