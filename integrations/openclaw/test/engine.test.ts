// The plugin against a local fake of skald's engine API: what each lifecycle method sends, and
// that no method throws on skald's account (OpenClaw quarantines an engine that throws).

import assert from "node:assert/strict";
import { mkdtemp, readdir, utimes, writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { CommitSpool } from "../src/spool.js";
import { SkaldClient, parseConfig, SkaldError } from "../src/client.js";
import { SkaldContextEngine, skaldSessionId } from "../src/engine.js";
import { skaldTools, TOOL_DEFINITIONS } from "../src/tools.js";

interface Seen {
  method: string;
  path: string;
  body: Record<string, unknown>;
  key: string | undefined;
}

type Handler = (seen: Seen) => { status: number; body: unknown };

/** A fake `skald serve`: records every request and answers with `handler`. */
async function fakeSkald(handler: Handler): Promise<{ url: string; seen: Seen[]; server: Server }> {
  const seen: Seen[] = [];
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    let data = "";
    request.on("data", (chunk: Buffer) => (data += chunk.toString()));
    request.on("end", () => {
      const record: Seen = {
        method: request.method ?? "",
        path: request.url ?? "",
        body: data ? (JSON.parse(data) as Record<string, unknown>) : {},
        key: request.headers["x-skald-key"] as string | undefined,
      };
      seen.push(record);
      const answer = handler(record);
      response.writeHead(answer.status, { "content-type": "application/json" });
      response.end(JSON.stringify(answer.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return { url: `http://127.0.0.1:${port}`, seen, server };
}

const quiet = { info() {}, warn() {}, error() {} };

function engineFor(url: string, spoolDir?: string, timeoutMs = 2_000): SkaldContextEngine {
  const config = parseConfig({ url, timeoutMs }, { SKALD_API_KEY: "sk-skald-test" }, undefined);
  return new SkaldContextEngine(new SkaldClient({ ...config, spoolDir }), new CommitSpool(spoolDir), quiet);
}

const anchor = {
  agentId: "main",
  sessionId: "s1",
  sessionKey: "agent:main:explicit:s1",
  storePath: "/tmp/x.sqlite",
  generation: "g",
  entryId: "e",
  rawSeq: 1,
  effectiveParentId: "p",
  activeMessagePosition: 0,
};

function commitParams(key: string): Parameters<SkaldContextEngine["commitTurn"]>[0] {
  return {
    advancementKey: key,
    admission: anchor,
    terminal: anchor,
    messages: [{ role: "user", content: "hello", timestamp: 1 }],
    sessionId: "s1",
  } as unknown as Parameters<SkaldContextEngine["commitTurn"]>[0];
}

test("info declares transcript semantics and owned compaction, so OpenClaw never downgrades the turn", () => {
  const engine = engineFor("http://127.0.0.1:9");
  assert.equal(engine.info.id, "skald");
  assert.equal(engine.info.ownsCompaction, true);
  assert.deepEqual(engine.info.transcriptSemantics, {
    currentTurnFence: "before-current-turn-entry-v1",
    turnAdvancementIdempotency: "atomic-idempotent-v1",
  });
});

test("config: defaults, the key from the named variable, and errors that name the field", () => {
  const config = parseConfig(undefined, { SKALD_API_KEY: "sk-skald-1" }, "/agents/main");
  assert.equal(config.url, "http://127.0.0.1:7420");
  assert.equal(config.apiKey, "sk-skald-1");
  assert.equal(config.memory, true);
  assert.equal(config.spoolDir, "/agents/main/skald-spool");
  assert.equal(parseConfig({ apiKeyEnv: "OTHER" }, { OTHER: "k" }, undefined).apiKey, "k");
  assert.throws(() => parseConfig({ urll: "x" }, {}, undefined), /unknown field "urll"/);
  assert.throws(() => parseConfig({ url: "ftp://x" }, {}, undefined), /not an http\(s\) URL/);
  assert.throws(() => parseConfig({ memory: "yes" }, {}, undefined), /memory must be a boolean/);
});

test("session ids skald refuses are hashed, stable ones pass through", () => {
  assert.equal(skaldSessionId("run-1"), "run-1");
  const hashed = skaldSessionId("a session/with spaces");
  assert.match(hashed, /^openclaw-[0-9a-f]{40}$/);
  assert.equal(hashed, skaldSessionId("a session/with spaces"));
});

test("assemble sends no messages for a session skald holds: a call costs the same at any length", async () => {
  const fake = await fakeSkald(() => ({ status: 200, body: { messages: [], estimatedTokens: 3 } }));
  try {
    const engine = engineFor(fake.url);
    const history = Array.from({ length: 500 }, (_, n) => ({ role: "user", content: `m${n}`, timestamp: n }));
    await engine.assemble({
      sessionId: "s1",
      messages: history,
      tokenBudget: 1,
      availableTools: new Set(["exec", "fetch_original_data"]),
    } as unknown as Parameters<SkaldContextEngine["assemble"]>[0]);
    const sent = fake.seen[0];
    assert.ok(sent);
    assert.equal(sent.path, "/v1/sessions/s1/assemble");
    assert.equal(sent.body.messages, undefined);
    assert.equal(sent.body.tokenBudget, 1);
    assert.deepEqual(sent.body.availableTools, ["exec", "fetch_original_data"]);
    assert.equal(sent.key, "sk-skald-test");
  } finally {
    fake.server.close();
  }
});

test("assemble of a session skald never saw sends the host's history once", async () => {
  const fake = await fakeSkald((seen) =>
    seen.body.messages === undefined
      ? { status: 404, body: { error: { message: "no session" } } }
      : { status: 200, body: { messages: seen.body.messages, estimatedTokens: 5 } },
  );
  try {
    const engine = engineFor(fake.url);
    const history = [{ role: "user", content: "earlier", timestamp: 1 }];
    const result = await engine.assemble({ sessionId: "s1", messages: history } as unknown as Parameters<
      SkaldContextEngine["assemble"]
    >[0]);
    assert.equal(fake.seen.length, 2);
    assert.deepEqual(fake.seen[1]?.body.messages, history);
    assert.deepEqual(result.messages, history);
  } finally {
    fake.server.close();
  }
});

test("assemble never throws: skald unreachable answers with the host's messages", async () => {
  const engine = engineFor("http://127.0.0.1:9", undefined, 300);
  const history = [{ role: "user", content: "hi", timestamp: 1 }];
  const result = await engine.assemble({ sessionId: "s1", messages: history } as unknown as Parameters<
    SkaldContextEngine["assemble"]
  >[0]);
  assert.deepEqual(result.messages, history);
  assert.ok(result.estimatedTokens > 0);
});

test("a commit skald cannot take waits in the spool and goes first, with its key, once skald is back", async () => {
  const spool = await mkdtemp(join(tmpdir(), "skald-spool-"));
  const down = engineFor("http://127.0.0.1:9", spool, 300);
  assert.deepEqual(await down.commitTurn(commitParams("turn-1")), { status: "committed" });
  assert.equal((await readdir(spool)).filter((name) => name.endsWith(".json")).length, 1);

  const fake = await fakeSkald((seen) =>
    seen.path.endsWith("/commit-turn")
      ? { status: 200, body: { status: "committed", committedMessages: 1 } }
      : { status: 200, body: { messages: [], estimatedTokens: 1 } },
  );
  try {
    const up = engineFor(fake.url, spool);
    await up.commitTurn(commitParams("turn-2"));
    const keys = fake.seen.filter((s) => s.path.endsWith("/commit-turn")).map((s) => s.body.advancementKey);
    assert.deepEqual(keys, ["turn-1", "turn-2"]);
    assert.deepEqual((await readdir(spool)).filter((name) => name.endsWith(".json")), []);
  } finally {
    fake.server.close();
  }
});

test("a commit skald refuses is kept aside, never lost, and the turn goes on", async () => {
  const spool = await mkdtemp(join(tmpdir(), "skald-spool-"));
  const fake = await fakeSkald(() => ({ status: 400, body: { error: { message: "not an AgentMessage" } } }));
  try {
    const engine = engineFor(fake.url, spool);
    assert.deepEqual(await engine.commitTurn(commitParams("bad")), { status: "committed" });
    assert.equal(fake.seen.length, 1, "a 400 is not retried");
    const rejected = await readdir(join(spool, "rejected"));
    assert.equal(rejected.filter((name) => name.endsWith(".json")).length, 1);
  } finally {
    fake.server.close();
  }
});

test("a duplicate commit is reported as the host expects", async () => {
  const fake = await fakeSkald(() => ({ status: 200, body: { status: "duplicate", committedMessages: 0 } }));
  try {
    assert.deepEqual(await engineFor(fake.url).commitTurn(commitParams("k")), { status: "duplicate" });
  } finally {
    fake.server.close();
  }
});

test("compact never throws: a failure is ok:false with the reason", async () => {
  const engine = engineFor("http://127.0.0.1:9", undefined, 300);
  const result = await engine.compact({ sessionId: "s1", sessionKey: "k" } as Parameters<SkaldContextEngine["compact"]>[0]);
  assert.equal(result.ok, false);
  assert.equal(result.compacted, false);
  assert.match(result.reason ?? "", /cannot reach/);
});

test("an overflow compaction is asked of skald as one; other compactions name no trigger", async () => {
  const fake = await fakeSkald(() => ({ status: 200, body: { ok: true, compacted: true } }));
  try {
    const engine = engineFor(fake.url);
    type Compact = Parameters<SkaldContextEngine["compact"]>[0];
    const base = { sessionId: "s1", sessionKey: "agent:main:explicit:s1", force: true };
    await engine.compact({ ...base, runtimeContext: { trigger: "overflow" } } as Compact);
    await engine.compact({
      ...base,
      runtimeSettings: { diagnostics: { fallbackReason: null, degradedReason: "context_overflow" } },
    } as unknown as Compact);
    await engine.compact({ ...base, runtimeContext: { trigger: "budget" } } as Compact);
    await engine.compact(base as Compact);
    const compacts = fake.seen.filter((seen) => seen.path === "/v1/sessions/s1/compact");
    assert.deepEqual(
      compacts.map((seen) => seen.body.trigger),
      ["overflow", "overflow", undefined, undefined],
    );
    assert.ok(compacts.every((seen) => seen.body.force === true));
  } finally {
    fake.server.close();
  }
});

test("a session's end is sent to skald with its reason, and never throws", async () => {
  const fake = await fakeSkald((seen) =>
    seen.path.startsWith("/v1/sessions/gone/")
      ? { status: 404, body: { error: { message: "no session" } } }
      : { status: 200, body: { status: "archived" } },
  );
  try {
    const engine = engineFor(fake.url);
    for (const reason of ["new", "reset", "idle", undefined]) {
      await engine.endSession({ sessionId: "s1", sessionKey: "agent:main:explicit:s1", reason, nextSessionId: "s2" });
    }
    await engine.endSession({ sessionId: "gone" });
    const ends = fake.seen.filter((seen) => seen.path === "/v1/sessions/s1/end");
    assert.deepEqual(
      ends.map((seen) => seen.body.reason),
      ["new", "reset", "ended", "ended"],
    );
    assert.equal(ends[0]?.body.nextSessionId, "s2");
    assert.equal(fake.seen.filter((seen) => seen.path === "/v1/sessions/gone/end").length, 1);
  } finally {
    fake.server.close();
  }
  // skald unreachable: logged, not thrown.
  await engineFor("http://127.0.0.1:9", undefined, 300).endSession({ sessionId: "s1", reason: "new" });
});

test("the workspace's AGENTS.md goes with every compact and assemble, read again when it changes", async () => {
  const fake = await fakeSkald(() => ({ status: 200, body: { ok: true, compacted: false, messages: [], estimatedTokens: 0 } }));
  const workspace = await mkdtemp(join(tmpdir(), "skald-ws-"));
  try {
    const config = parseConfig({ url: fake.url, timeoutMs: 2_000 }, {}, undefined);
    const engine = new SkaldContextEngine(new SkaldClient(config), new CommitSpool(undefined), quiet, workspace);
    type Compact = Parameters<SkaldContextEngine["compact"]>[0];
    type Assemble = Parameters<SkaldContextEngine["assemble"]>[0];
    const compact = { sessionId: "s1", sessionKey: "k", force: true } as Compact;
    await engine.compact(compact);
    const agents = join(workspace, "AGENTS.md");
    await writeFile(agents, "## Red Lines\n\n- Never push to main.\n");
    await engine.compact(compact);
    await engine.assemble({ sessionId: "s1", messages: [] } as unknown as Assemble);
    await writeFile(agents, "## Red Lines\n\n- Never delete fixtures.\n");
    await utimes(agents, new Date(), new Date(Date.now() + 5_000));
    await engine.compact(compact);
    const sent = fake.seen
      .filter((seen) => seen.path.endsWith("/compact") || seen.path.endsWith("/assemble"))
      .map((seen) => seen.body.agentsMd);
    assert.deepEqual(sent, [
      undefined,
      "## Red Lines\n\n- Never push to main.\n",
      "## Red Lines\n\n- Never push to main.\n",
      "## Red Lines\n\n- Never delete fixtures.\n",
    ]);
  } finally {
    fake.server.close();
  }
});

test("the client retries 5xx and unreachable, never a 4xx", async () => {
  let calls = 0;
  const fake = await fakeSkald(() => {
    calls += 1;
    return calls < 3 ? { status: 503, body: { error: { message: "busy" } } } : { status: 200, body: { ok: true } };
  });
  try {
    const client = new SkaldClient(parseConfig({ url: fake.url, timeoutMs: 5_000 }, {}, undefined));
    assert.deepEqual(await client.post("/x", {}), { ok: true });
    assert.equal(calls, 3);
    calls = 100;
    const refusing = await fakeSkald(() => ({ status: 422, body: { error: { message: "bad field" } } }));
    try {
      const other = new SkaldClient(parseConfig({ url: refusing.url, timeoutMs: 5_000 }, {}, undefined));
      await assert.rejects(other.post("/x", {}), (error: unknown) => {
        assert.ok(error instanceof SkaldError);
        assert.equal(error.status, 422);
        assert.match(error.message, /bad field/);
        return true;
      });
      assert.equal(refusing.seen.length, 1);
    } finally {
      refusing.server.close();
    }
  } finally {
    fake.server.close();
  }
});

test("tools run through skald; a tool error throws with skald's message for the model", async () => {
  const fake = await fakeSkald((seen) =>
    seen.path === "/v1/tools/fetch_original_data"
      ? { status: 200, body: { content: "=== ref abc\n1 one", isError: false } }
      : { status: 200, body: { content: "search_memories: unknown argument \"qeury\"", isError: true } },
  );
  try {
    const client = new SkaldClient(parseConfig({ url: fake.url }, {}, undefined));
    const tools = skaldTools(client);
    assert.deepEqual(
      tools.map((tool) => tool.name),
      TOOL_DEFINITIONS.map((tool) => tool.name),
    );
    const fetchTool = tools.find((tool) => tool.name === "fetch_original_data");
    const search = tools.find((tool) => tool.name === "search_memories");
    assert.ok(fetchTool && search);
    const result = await fetchTool.execute("call-1", { ref_ids: ["abc"] });
    assert.deepEqual(result.content, [{ type: "text", text: "=== ref abc\n1 one" }]);
    assert.deepEqual(fake.seen[0]?.body, { arguments: { ref_ids: ["abc"] } });
    await assert.rejects(search.execute("call-2", { qeury: "x" }), /unknown argument/);
    const withoutMemory = skaldTools(new SkaldClient(parseConfig({ url: fake.url, memory: false }, {}, undefined)));
    assert.deepEqual(
      withoutMemory.map((tool) => tool.name),
      ["fetch_original_data"],
    );
  } finally {
    fake.server.close();
  }
});

test("a completed sub-agent's session gets skald's after-turn work; a rolled-back spawn is forgotten", async () => {
  const fake = await fakeSkald(() => ({ status: 200, body: {} }));
  try {
    const engine = engineFor(fake.url);
    await engine.prepareSubagentSpawn({
      parentSessionKey: "agent:main:main",
      childSessionKey: "agent:main:subagent:1",
      childSessionId: "child-1",
      contextMode: "isolated",
    });
    await engine.onSubagentEnded({ childSessionKey: "agent:main:subagent:1", reason: "completed" });
    assert.deepEqual(
      fake.seen.map((seen) => seen.path),
      ["/v1/sessions/child-1/after-turn"],
    );
    const preparation = await engine.prepareSubagentSpawn({
      parentSessionKey: "agent:main:main",
      childSessionKey: "agent:main:subagent:2",
      childSessionId: "child-2",
    });
    await preparation?.rollback();
    await engine.onSubagentEnded({ childSessionKey: "agent:main:subagent:2", reason: "deleted" });
    assert.equal(fake.seen.length, 1, "a deleted child runs nothing");
  } finally {
    fake.server.close();
  }
});

test("once skald is found unreachable, calls fail at once for a while instead of each waiting its deadline", async () => {
  let clock = 1_000_000;
  const client = new SkaldClient(
    parseConfig({ url: "http://127.0.0.1:9", timeoutMs: 300 }, {}, undefined),
    undefined,
    () => clock,
  );
  await assert.rejects(client.post("/x", {}), /cannot reach/);
  const started = Date.now();
  await assert.rejects(client.post("/x", {}), /unreachable moments ago/);
  assert.ok(Date.now() - started < 100, "the second call did not wait");
  clock += 20_000;
  await assert.rejects(client.post("/x", {}), /cannot reach/);
});
