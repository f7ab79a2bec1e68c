//! skald as the context engine of the real OpenClaw (the `openclaw` npm package, pinned in
//! `integrations/openclaw/package-lock.json`, on Node 24): the plugin built from the working
//! tree and installed with `openclaw plugins install`, headless `openclaw agent --local` turns
//! against `skald serve` and a scripted OpenAI-compatible provider. The assertions are on what
//! crossed the wire: the provider's requests, skald's stored session and memories, and the
//! plugin's trace of every lifecycle call OpenClaw made.
//!
//! These tests never skip: no node or npm is a failure (`.ci/run` checks they ran).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod hosts;

use std::collections::HashSet;
use std::time::Duration;

use hosts::chat_upstream::{ChatUpstream, FETCH_LINES, REMEMBERED, first_ref_id};
use hosts::openclaw::{OpenClaw, SkaldServer, installed};
use serde_json::{Value, json};

/// The message entries of a session skald holds, in order.
fn stored_messages(skald: &SkaldServer, session: &str) -> Vec<Value> {
    let entries = skald
        .get(&format!("/v1/sessions/{session}/entries"))
        .unwrap_or_else(|| panic!("skald holds no session {session}:\n{}", skald.log()));
    entries["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|entry| entry["type"] == "message")
        .map(|entry| entry["message"].clone())
        .collect()
}

/// What a failure message needs: the provider's requests and skald's log.
fn context(upstream: &ChatUpstream, skald: &SkaldServer, what: &str) -> String {
    format!(
        "{what}\n{}\n--- skald ---\n{}",
        upstream.dump(),
        skald.log()
    )
}

#[test]
fn openclaw_runs_turns_with_skald_as_its_engine() {
    let upstream = ChatUpstream::start();
    let mut skald = SkaldServer::start();
    let openclaw = OpenClaw::new(
        &upstream.base_url(),
        &skald.url(),
        Some(&skald.key),
        "skald",
    );
    let session = "oc-main";
    // The workspace's rules (issue 28, gap 3): the plugin sends them with every compaction,
    // whose summary appends the seed's sections.
    std::fs::write(
        openclaw.workspace.path().join("AGENTS.md"),
        "# AGENTS.md\n\n## Session Startup\n\nRead NOTES.md first.\n\n## Tools\n\nAnything.\n\n\
         ## Red Lines\n\n- Never email a customer without asking.\n",
    )
    .unwrap();

    // Turn 1: a tool output too large to keep in the context.
    let big = openclaw.turn(session, "BIG: list the numbers");
    big.assert_completed_with_skald("turn BIG");
    let assemble = big.calls("assemble")[0];
    assert!(
        assemble["params"]["tokenBudget"]
            .as_u64()
            .is_some_and(|budget| budget < 128_000),
        "the host's tokenBudget is the window less the reserve and the prompt: {}",
        assemble["params"]
    );

    // Turn 2: the output is a placeholder on the next call, and the model gets the original
    // back by calling skald's tool, which OpenClaw runs through skald.
    let fetch = openclaw.turn(session, "FETCH: which were the last numbers?");
    fetch.assert_completed_with_skald("turn FETCH");
    let calls = upstream.turn("FETCH");
    assert!(
        calls.len() >= 2,
        "{}",
        context(&upstream, &skald, "FETCH: fewer than two model calls")
    );
    let first = &calls[0];
    assert!(
        first_ref_id(&first.text()).is_some() && !first.text().contains("3999"),
        "the large output should reach the model as a placeholder: {}",
        context(&upstream, &skald, "")
    );
    assert!(
        first
            .tool_names()
            .iter()
            .any(|name| name == "fetch_original_data"),
        "skald's fetch tool should be offered directly: {:?}",
        first.tool_names()
    );
    assert_eq!(
        first.answered,
        "tool:fetch_original_data",
        "{}",
        context(&upstream, &skald, "")
    );
    let after = &calls[1];
    assert!(
        after.text().contains("3999")
            && after
                .text()
                .contains(FETCH_LINES.split(':').next().unwrap()),
        "the fetched original (lines {FETCH_LINES}) should come back to the model: {}",
        context(&upstream, &skald, "")
    );

    // Turn 3: the model keeps a memory with skald's commit_memory tool.
    let remember = openclaw.turn(session, "REMEMBER: my editor is helix");
    remember.assert_completed_with_skald("turn REMEMBER");
    assert_eq!(upstream.turn("REMEMBER")[0].answered, "tool:commit_memory");
    let (status, found) = skald.post("/v1/memory/search", &json!({"query": "editor helix"}));
    assert!(
        status == 200 && found.to_string().contains("helix"),
        "skald should hold the committed memory: {status} {found}"
    );

    // Two more turns, so that there is history to compact.
    for n in 1..=2 {
        openclaw
            .turn(session, &format!("small talk {n}"))
            .assert_completed_with_skald("small talk");
    }

    // A compaction the host asks for (`openclaw sessions compact`, through its gateway) is
    // skald's: OpenClaw calls the engine's compact, and skald writes the checkpoint.
    let checkpoints = |skald: &SkaldServer| {
        skald
            .get(&format!("/v1/sessions/{session}/entries"))
            .unwrap()["entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|entry| entry["type"] == "compaction")
            .count()
    };
    let before = checkpoints(&skald);
    let traced = openclaw.trace_records().len();
    let gateway = openclaw.gateway();
    let compacted = openclaw.cli(
        &[
            "sessions",
            "compact",
            &format!("agent:main:explicit:{session}"),
            "--json",
        ],
        "sessions-compact",
        Duration::from_secs(180),
    );
    let answer: Value = serde_json::from_str(&compacted.stdout).unwrap_or(Value::Null);
    assert!(
        compacted.success() && answer["ok"] == true && answer["compacted"] == true,
        "openclaw sessions compact: {answer}\n{}\n--- gateway ---\n{}",
        compacted.tail(3000),
        gateway.log()
    );
    drop(gateway);
    let calls: Vec<Value> = openclaw.trace_records()[traced..]
        .iter()
        .filter(|record| record["method"] == "compact")
        .cloned()
        .collect();
    assert!(
        calls
            .iter()
            .any(|call| call["params"]["force"] == true && call["result"]["compacted"] == true),
        "the host's compaction should be skald's compact, forced: {calls:?}"
    );
    assert_eq!(
        checkpoints(&skald),
        before + 1,
        "one more checkpoint in skald's session"
    );
    let entries = skald
        .get(&format!("/v1/sessions/{session}/entries"))
        .unwrap();
    let summary = entries["entries"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|entry| entry["type"] == "compaction")
        .and_then(|entry| entry["summary"].as_str())
        .unwrap_or_default()
        .to_owned();
    assert!(
        summary.contains("<workspace-critical-rules>")
            && summary.contains("Read NOTES.md first.")
            && summary.contains("Never email a customer without asking.")
            && !summary.contains("Anything."),
        "the workspace's AGENTS.md rules should end the summary: {summary}"
    );

    // skald restarts between turns; the next turn finds everything where it was.
    skald.restart();

    // Turn 4, a new session: recall brings the memory into the model's context, in messages
    // OpenClaw accepts.
    let recall = openclaw.turn("oc-recall", "Which editor do I use? RECALL");
    recall.assert_completed_with_skald("turn RECALL");
    let recalled = &upstream.turn("RECALL")[0];
    assert!(
        recalled.text().contains("helix"),
        "recall should inject the memory kept in another session: {}",
        context(&upstream, &skald, "")
    );
    assert!(recalled.text().contains(REMEMBERED) || recalled.text().contains("helix"));

    // More history after the host's compaction, for the next one.
    for n in 3..=5 {
        openclaw
            .turn(session, &format!("small talk {n}"))
            .assert_completed_with_skald("small talk");
    }

    // Turn 5: the provider refuses the request as too long; OpenClaw asks skald to compact,
    // skald compacts, and the retried call succeeds.
    let overflow = openclaw.turn(session, "OVERFLOW: and one more thing");
    overflow.assert_completed_with_skald("turn OVERFLOW");
    let compactions = overflow.calls("compact");
    assert!(
        !compactions.is_empty(),
        "OpenClaw should call skald's compact after the overflow: {:?}\n{}",
        overflow.methods(),
        context(&upstream, &skald, "")
    );
    assert_eq!(
        compactions[0]["result"]["compacted"], true,
        "skald should compact after the overflow: {}",
        compactions[0]
    );
    let entries = skald
        .get(&format!("/v1/sessions/{session}/entries"))
        .unwrap();
    assert!(
        entries.to_string().contains("\"type\":\"compaction\""),
        "the compaction should be a checkpoint in skald's session"
    );

    // A retried commit: the host's last commit sent again through the plugin is a duplicate
    // and stores nothing.
    let stored_before = stored_messages(&skald, session).len();
    let last_commit = openclaw
        .trace_records()
        .into_iter()
        .rev()
        .find(|record| record["method"] == "commitTurn" && record["params"]["sessionId"] == session)
        .expect("a commit in the trace");
    let retried = retry_commit(&openclaw, &skald, &last_commit["params"]);
    assert_eq!(
        retried["status"], "duplicate",
        "a retried commit: {retried}"
    );
    assert_eq!(stored_messages(&skald, session).len(), stored_before);

    // skald's session holds each committed message exactly once, in the host's order.
    let committed: Vec<Value> = openclaw
        .trace_records()
        .into_iter()
        .filter(|record| {
            record["method"] == "commitTurn" && record["params"]["sessionId"] == session
        })
        .flat_map(|record| {
            record["params"]["messages"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .collect();
    let stored = stored_messages(&skald, session);
    assert_eq!(
        stored.len(),
        committed.len(),
        "skald should hold every committed message once"
    );
    for (stored, committed) in stored.iter().zip(&committed) {
        assert_eq!(stored["role"], committed["role"]);
        assert_eq!(stored["timestamp"], committed["timestamp"]);
    }
    let keys: Vec<&str> = stored
        .iter()
        .filter_map(|message| message["idempotencyKey"].as_str())
        .collect();
    let unique: HashSet<&&str> = keys.iter().collect();
    assert_eq!(
        keys.len(),
        unique.len(),
        "a user message stored twice: {keys:?}"
    );
}

/// OpenClaw's overflow recovery asks skald's compact as an overflow (issue 28, gap 4): when the
/// provider refuses a request as too long and every summary call then fails, skald writes the
/// seed's last-resort note as the summary, so the compaction succeeds and the retried call goes
/// out. Asked as a plain forced compaction, skald cancelled it and the turn failed.
#[test]
fn openclaw_overflow_recovery_compacts_even_when_every_summary_call_fails() {
    let upstream = ChatUpstream::start();
    let skald = SkaldServer::start_with_config(&format!(
        "[llm.summary]\nkind = \"openai\"\nbase_url = {:?}\nmodel = \"scripted-summary\"\n",
        upstream.base_url()
    ));
    let openclaw = OpenClaw::new(
        &upstream.base_url(),
        &skald.url(),
        Some(&skald.key),
        "skald",
    );
    let session = "oc-overflow";
    // A large tool output first, so that the history before the recent turns is worth
    // compacting even into a one-line note; then the recent turns the compaction keeps.
    openclaw
        .turn(session, "BIG: list the numbers")
        .assert_completed_with_skald("turn BIG");
    for n in 1..=4 {
        openclaw
            .turn(session, &format!("small talk {n}"))
            .assert_completed_with_skald("small talk");
    }

    let overflow = openclaw.turn(session, "OVERFLOW: and one more thing");
    overflow.assert_completed_with_skald("turn OVERFLOW");
    let compactions = overflow.calls("compact");
    let recovery = compactions
        .iter()
        .find(|call| call["params"]["runtimeContext"]["trigger"] == "overflow")
        .unwrap_or_else(|| {
            panic!(
                "OpenClaw should call compact for its overflow recovery: {compactions:?}\n{}",
                context(&upstream, &skald, "")
            )
        });
    assert_eq!(
        (&recovery["result"]["ok"], &recovery["result"]["compacted"]),
        (&json!(true), &json!(true)),
        "skald should compact after the overflow though no summary could be written: {}\n{}",
        recovery["result"],
        skald.log()
    );
    let refused = upstream
        .requests()
        .iter()
        .filter(|request| request.answered == "summary_refused")
        .count();
    assert!(
        refused >= 1,
        "skald should have tried its summary model first: {}",
        upstream.dump()
    );
    let entries = skald
        .get(&format!("/v1/sessions/{session}/entries"))
        .unwrap();
    let checkpoint = entries["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["type"] == "compaction")
        .unwrap_or_else(|| panic!("no checkpoint in skald's session: {entries}"));
    assert!(
        checkpoint["summary"]
            .as_str()
            .is_some_and(|summary| summary.contains("Summary unavailable")),
        "the last-resort note should stand for the history: {checkpoint}"
    );
    assert!(
        upstream.turn("OVERFLOW").last().unwrap().answered == "text",
        "the retried call should be answered: {}",
        upstream.dump()
    );
}

/// A session too short for the upload or a compaction still leaves its memory when OpenClaw
/// ends it (issue 28, gap 1): `sessions.reset` with `reason: "new"` (what `/new` does) fires
/// OpenClaw's `session_end` hook in the gateway, the plugin sends it to skald, and skald archives
/// the session and extracts the preference said in it. Before, nothing was written.
#[test]
fn openclaw_ending_a_short_session_archives_its_memory() {
    let upstream = ChatUpstream::start();
    let skald = SkaldServer::start();
    let openclaw = OpenClaw::new(
        &upstream.base_url(),
        &skald.url(),
        Some(&skald.key),
        "skald",
    );
    let session = "oc-short";
    openclaw
        .turn(session, "I prefer dark mode in every editor.")
        .assert_completed_with_skald("turn PREFERENCE");
    let found = |skald: &SkaldServer| {
        let (status, found) = skald.post(
            "/v1/memory/search",
            &json!({"query": "dark mode editor", "category": "preferences"}),
        );
        assert_eq!(status, 200, "{found}");
        found["results"]
            .as_array()
            .is_some_and(|results| !results.is_empty())
    };
    assert!(
        !found(&skald),
        "a short session reaches no memory by itself"
    );

    let traced = openclaw.trace_records().len();
    let gateway = openclaw.gateway();
    let reset = openclaw.cli(
        &[
            "gateway",
            "call",
            "sessions.reset",
            "--params",
            &json!({"key": format!("agent:main:explicit:{session}"), "reason": "new"}).to_string(),
            "--json",
        ],
        "sessions-reset",
        Duration::from_secs(120),
    );
    assert!(
        reset.success(),
        "openclaw gateway call sessions.reset:\n{}\n--- gateway ---\n{}",
        reset.tail(3000),
        gateway.log()
    );
    // The hook runs in the gateway after the reset answered.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !found(&skald) {
        assert!(
            std::time::Instant::now() < deadline,
            "the ended session's preference is not in memory:\n--- gateway ---\n{}\n{}",
            gateway.log(),
            context(&upstream, &skald, "")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(gateway);
    let ends: Vec<Value> = openclaw.trace_records()[traced..]
        .iter()
        .filter(|record| record["method"] == "endSession")
        .cloned()
        .collect();
    assert!(
        ends.iter()
            .any(|call| call["params"]["sessionId"] == session && call["params"]["reason"] == "new"),
        "OpenClaw's session_end should reach the plugin: {ends:?}"
    );
    let entries = skald
        .get(&format!("/v1/sessions/{session}/entries"))
        .unwrap();
    let records: Vec<&Value> = entries["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|entry| entry["customType"] == "skald.memory_extraction")
        .collect();
    assert_eq!(records.len(), 1, "{entries}");
    assert_eq!(records[0]["data"]["origin"]["reason"], "new", "{entries}");
}

/// Sends `params` (a `commitTurn` the host made) again through the plugin's engine, in a Node
/// process of its own, as the host does when it retries after a crash.
fn retry_commit(openclaw: &OpenClaw, skald: &SkaldServer, params: &Value) -> Value {
    let installed = &openclaw.installed;
    let params_path = openclaw.state.path().join("retry-params.json");
    std::fs::write(&params_path, params.to_string()).unwrap();
    let script = format!(
        "import {{ SkaldClient, SkaldContextEngine, CommitSpool, parseConfig }} from {dist:?};\n\
         import {{ readFileSync }} from 'node:fs';\n\
         const config = parseConfig({{ url: {url:?} }}, process.env, undefined);\n\
         const engine = new SkaldContextEngine(new SkaldClient(config), new CommitSpool(undefined), console);\n\
         const params = JSON.parse(readFileSync({params:?}, 'utf8'));\n\
         console.log(JSON.stringify(await engine.commitTurn(params)));\n",
        dist = installed.plugin.join("dist/index.js").display().to_string(),
        url = skald.url(),
        params = params_path.display().to_string(),
    );
    run_plugin_script(openclaw, skald, "retry", &script)
}

/// Runs `script` (an ES module using the built plugin) under Node 24 with the skald key; the
/// JSON it printed last.
fn run_plugin_script(openclaw: &OpenClaw, skald: &SkaldServer, name: &str, script: &str) -> Value {
    let script_path = openclaw.state.path().join(format!("{name}.mjs"));
    std::fs::write(&script_path, script).unwrap();
    let mut command = openclaw
        .installed
        .command("node", &[script_path.to_str().unwrap()]);
    command.env("SKALD_API_KEY", &skald.key);
    let finished = hosts::run(
        command,
        openclaw.state.path(),
        name,
        Duration::from_secs(300),
    );
    assert!(
        finished.success(),
        "the {name} script failed:\n{}",
        finished.tail(3000)
    );
    serde_json::from_str(finished.stdout.trim().lines().last().unwrap()).unwrap()
}

/// The plugin's own tests (`npm test`: its client, spool and engine against a local fake of
/// skald's API), under Node 24.
#[test]
fn openclaw_plugin_unit_tests_pass() {
    let installed = installed();
    let finished = hosts::run(
        installed.command("npm", &["test"]),
        &installed.plugin,
        "npm-test",
        Duration::from_secs(300),
    );
    assert!(
        finished.success(),
        "npm test of the plugin failed:\n{}",
        finished.tail(6000)
    );
}

/// The tools the plugin registers are skald's own definitions, as `GET /v1/tools` lists them.
#[test]
fn openclaw_plugin_tool_definitions_are_skalds() {
    let skald = SkaldServer::start();
    let listed = skald.get("/v1/tools").expect("GET /v1/tools");
    let shipped: Value = serde_json::from_str(
        &std::fs::read_to_string(
            hosts::repo_root().join("integrations/openclaw/src/tool-definitions.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        listed["tools"], shipped,
        "integrations/openclaw/src/tool-definitions.json differs from GET /v1/tools: regenerate it"
    );
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(
            hosts::repo_root().join("integrations/openclaw/openclaw.plugin.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let names: Vec<&Value> = shipped
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| &tool["name"])
        .collect();
    let contracted: Vec<&Value> = manifest["contracts"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .collect();
    assert_eq!(
        names, contracted,
        "the manifest's contracts.tools must name every tool"
    );
}

/// Benchmark, run on demand (`cargo test -p skald-cli --test openclaw_host -- --ignored
/// bench_openclaw --nocapture`): the same scripted turn (a tool call, then the answer) in fresh
/// sessions with skald as the engine and with OpenClaw's `legacy`, alternating, `SKALD_BENCH_RUNS`
/// times each (default 5); prints the p50 wall time of a turn for each, the p50 time the plugin
/// spent in its lifecycle calls per turn, and the HTTP bytes of one assemble at 50 and 500
/// messages (the request the plugin sends, and skald's answer). Asserts only that every turn
/// completed: the figures are for the closing note, not a pass/fail target.
#[test]
#[ignore = "benchmark: run on demand"]
fn bench_openclaw_turn_overhead_and_assemble_bytes() {
    let runs: usize = std::env::var("SKALD_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let upstream = ChatUpstream::start();
    let skald = SkaldServer::start();
    let with_skald = OpenClaw::new(
        &upstream.base_url(),
        &skald.url(),
        Some(&skald.key),
        "skald",
    );
    let legacy = OpenClaw::new(&upstream.base_url(), &skald.url(), None, "legacy");
    // One warm-up turn each (first start of a state directory prepares its database).
    with_skald
        .turn("warm", "small talk")
        .assert_completed_with_skald("warm-up");
    assert!(legacy.turn("warm", "small talk").finished.success());
    let (mut skald_ms, mut legacy_ms, mut plugin_ms) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..runs {
        let turn = with_skald.turn(&format!("bench-{run}"), "BIG: list the numbers");
        turn.assert_completed_with_skald("bench turn");
        skald_ms.push(turn.elapsed.as_secs_f64() * 1000.0);
        plugin_ms.push(
            turn.trace
                .iter()
                .filter(|record| record["method"] != "dispose")
                .map(|record| record["ms"].as_f64().unwrap_or(0.0))
                .sum::<f64>(),
        );
        let plain = legacy.turn(&format!("bench-{run}"), "BIG: list the numbers");
        assert!(plain.finished.success(), "{}", plain.finished.tail(3000));
        legacy_ms.push(plain.elapsed.as_secs_f64() * 1000.0);
    }
    let p50 = |values: &mut Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    let bytes = assemble_bytes(&with_skald, &skald);
    println!(
        "{}",
        json!({
            "runs": runs,
            "turn_wall_ms_p50": {"skald": p50(&mut skald_ms), "legacy": p50(&mut legacy_ms)},
            "plugin_lifecycle_ms_per_turn_p50": p50(&mut plugin_ms),
            "assemble_bytes": bytes,
        })
    );
}

/// The bytes of one assemble through the plugin, at 50 and 500 messages in the session: the
/// request the plugin sends and skald's answer, counted by wrapping the plugin's `fetch`.
fn assemble_bytes(openclaw: &OpenClaw, skald: &SkaldServer) -> Value {
    let installed = &openclaw.installed;
    let script = format!(
        "import {{ SkaldClient, SkaldContextEngine, CommitSpool, parseConfig }} from {dist:?};\n\
         const counts = [];\n\
         const counting = async (url, init) => {{\n\
           const response = await fetch(url, init);\n\
           const text = await response.text();\n\
           if (url.endsWith('/assemble')) counts.push({{ request: (init.body ?? '').length, response: text.length }});\n\
           return new Response(text, {{ status: response.status, headers: response.headers }});\n\
         }};\n\
         const config = parseConfig({{ url: {url:?} }}, process.env, undefined);\n\
         const engine = new SkaldContextEngine(new SkaldClient(config, counting), new CommitSpool(undefined), console);\n\
         const out = {{}};\n\
         for (const size of [50, 500]) {{\n\
           const sessionId = `bytes-${{size}}`;\n\
           for (let turn = 0; turn < size / 2; turn++) {{\n\
             await engine.commitTurn({{ advancementKey: `${{sessionId}}-${{turn}}`, sessionId, messages: [\n\
               {{ role: 'user', content: `question ${{turn}}: how does the cache key work?`, timestamp: turn * 2 }},\n\
               {{ role: 'assistant', content: [{{ type: 'text', text: `answer ${{turn}}: it includes the tenant.` }}], api: 'openai-completions', provider: 'mock', model: 'mock-1', usage: {{ input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0, cost: {{ input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 }} }}, stopReason: 'stop', timestamp: turn * 2 + 1 }}] }});\n\
           }}\n\
           counts.length = 0;\n\
           const history = Array.from({{ length: size }}, (_, n) => ({{ role: 'user', content: `m${{n}}`, timestamp: n }}));\n\
           await engine.assemble({{ sessionId, messages: history, tokenBudget: 93000, availableTools: new Set(['exec', 'read', 'fetch_original_data']), model: 'mock-1', prompt: 'next question' }});\n\
           out[size] = counts[0];\n\
         }}\n\
         console.log(JSON.stringify(out));\n",
        dist = installed.plugin.join("dist/index.js").display().to_string(),
        url = skald.url(),
    );
    run_plugin_script(openclaw, skald, "bytes", &script)
}
