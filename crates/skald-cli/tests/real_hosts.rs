//! The real, pinned agent CLIs (`hosts/package-lock.json`: Claude Code and Codex) driven headless
//! through `skald serve` in front of a scripted upstream (`hosts/upstream.rs`), so a change in
//! what the hosts send, or in how skald forwards it, fails CI.
//!
//! Each run is a multi-step tool loop whose first output is large (`seq 1 4000`, 18,893 chars):
//! - direct to the upstream (no skald): proves the script itself is valid for the host;
//! - through skald: the run completes, the upstream sees the large output as a `[REF_ID: …]`
//!   placeholder later on, the model's hidden `fetch_original_data` round never reaches the
//!   host (its output and transcripts), tools and system prompt stay identical between calls
//!   and the message prefix only changes where skald offloaded, and no skald key or `x-skald-*`
//!   header goes upstream.
//!
//! The first run installs the CLIs with `npm ci` (see `hosts/mod.rs`; `SKALD_HOSTS_VERSION=latest`
//! tries the newest published ones). Measurement (calls, skald's overhead, cache-prefix breaks,
//! cost at list prices) is an ignored test:
//! `SKALD_HOSTS_MEASURE=24 cargo test -p skald-cli --test real_hosts -- --ignored --nocapture`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod hosts;

use hosts::upstream::{Api, FETCH_ID, FINAL_TEXT, Recorded, Script, Upstream, items};
use hosts::{HostRun, Skald, claude_code, claude_code_in, codex, codex_with, json_lines, workdir};
use serde_json::Value;

/// The small steps of the tests' script (the large one comes first, the answer last).
const SMALL_STEPS: usize = 3;

fn script_for(workdir: &tempfile::TempDir, small: usize) -> Script {
    Script::new(workdir.path().join("notes.txt").to_str().unwrap(), small)
}

/// The context for a failure: the host's output tail and what the upstream saw.
fn context(run: &HostRun, upstream: &Upstream, skald: Option<&Skald>) -> String {
    let log = skald
        .map(|s| {
            format!(
                "\n--- skald log (tail) ---\n{}",
                hosts::tail(&s.log(), 3000)
            )
        })
        .unwrap_or_default();
    format!("{}\n{}{log}", run.finished.tail(3000), upstream.dump())
}

// ---------------------------------------------------------------------------------------------
// Checks
// ---------------------------------------------------------------------------------------------

/// Claude Code's last stream-json line is a successful `result`.
fn assert_claude_completed(run: &HostRun, upstream: &Upstream, skald: Option<&Skald>) {
    let lines = json_lines(&run.finished.stdout);
    let last = lines.last().cloned().unwrap_or(Value::Null);
    assert!(
        run.finished.success()
            && last["type"] == "result"
            && last["subtype"] == "success"
            && last["is_error"] != true,
        "Claude Code did not complete the run: {} (api_error_status {}, subtype {})\n{}",
        last["result"],
        last["api_error_status"],
        last["subtype"],
        context(run, upstream, skald)
    );
    assert!(
        last["result"]
            .as_str()
            .unwrap_or_default()
            .contains(FINAL_TEXT),
        "Claude Code's result is not the scripted answer: {last}"
    );
}

/// Codex exits 0 with `turn.completed` and the scripted answer.
fn assert_codex_completed(run: &HostRun, upstream: &Upstream, skald: Option<&Skald>) {
    let events = json_lines(&run.finished.stdout);
    let completed = events.iter().any(|e| e["type"] == "turn.completed");
    let answered = events.iter().any(|e| {
        e["item"]["type"] == "agent_message"
            && e["item"]["text"]
                .as_str()
                .unwrap_or_default()
                .contains(FINAL_TEXT)
    });
    assert!(
        run.finished.success() && completed && answered,
        "codex exec did not complete the run (turn.completed: {completed}, answer: {answered})\n{}",
        context(run, upstream, skald)
    );
}

/// The host's model calls ran the whole script: one per step plus the answer, plus `extra`.
fn assert_script_ran(upstream: &Upstream, script: &Script, extra: usize) {
    let calls = upstream.model_calls();
    assert_eq!(
        calls.len(),
        script.host_calls() + extra,
        "model calls\n{}",
        upstream.dump()
    );
}

/// The message/input segments of a call (string content as one text block, `cache_control`
/// removed), without the scripted fetch round.
fn segments(call: &Recorded) -> Vec<String> {
    let mut out = Vec::new();
    for item in items(&call.body) {
        match (&item["content"], call.api) {
            (Value::Array(blocks), Api::Anthropic) => {
                for block in blocks {
                    let mut block = block.clone();
                    if let Some(object) = block.as_object_mut() {
                        object.remove("cache_control");
                    }
                    out.push(format!("{}:{block}", item["role"]));
                }
            }
            (Value::String(text), Api::Anthropic) => out.push(format!(
                "{}:{}",
                item["role"],
                serde_json::json!({"type": "text", "text": text})
            )),
            _ => out.push(item.to_string()),
        }
    }
    out.retain(|segment| !segment.contains(FETCH_ID));
    out
}

fn without_cache_control(value: &Value) -> Value {
    match value {
        Value::Array(list) => Value::Array(list.iter().map(without_cache_control).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, _)| *key != "cache_control")
                .map(|(key, value)| (key.clone(), without_cache_control(value)))
                .collect(),
        ),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => value.clone(),
    }
}

/// Where two consecutive calls break the cacheable prefix (None: the later one extends the
/// earlier, allowing a segment that became a `[REF_ID:` placeholder when `allow_offload`).
fn prefix_break(before: &Recorded, after: &Recorded, allow_offload: bool) -> Option<String> {
    if without_cache_control(&before.body["tools"]) != without_cache_control(&after.body["tools"]) {
        return Some(format!(
            "the tool list changed: {:?} -> {:?}",
            before.tool_names(),
            after.tool_names()
        ));
    }
    for key in ["system", "instructions"] {
        if without_cache_control(&before.body[key]) != without_cache_control(&after.body[key]) {
            return Some(format!("`{key}` changed"));
        }
    }
    let (old, new) = (segments(before), segments(after));
    for (index, (a, b)) in old.iter().zip(&new).enumerate() {
        let offloaded = b.contains("[REF_ID:") && !a.contains("[REF_ID:");
        if a != b && !(allow_offload && offloaded) {
            return Some(format!(
                "message segment {index} changed:\n  before: {}\n  after:  {}",
                hosts::tail(a, 300),
                hosts::tail(b, 300)
            ));
        }
    }
    if new.len() < old.len() {
        return Some(format!(
            "the history shrank: {} -> {}",
            old.len(),
            new.len()
        ));
    }
    None
}

fn prefix_breaks(calls: &[Recorded], allow_offload: bool) -> Vec<String> {
    calls
        .windows(2)
        .enumerate()
        .filter_map(|(index, pair)| {
            prefix_break(&pair[0], &pair[1], allow_offload)
                .map(|why| format!("call {} -> {}: {why}", index + 1, index + 2))
        })
        .collect()
}

fn assert_prefix_stable(upstream: &Upstream, allow_offload: bool) {
    let breaks = prefix_breaks(&upstream.model_calls(), allow_offload);
    assert!(
        breaks.is_empty(),
        "the cacheable prefix broke between upstream calls:\n{}\n{}",
        breaks.join("\n"),
        upstream.dump()
    );
}

/// What only holds through skald.
fn assert_through_skald(run: &HostRun, upstream: &Upstream, skald: &Skald) {
    let calls = upstream.model_calls();
    // The large output went up whole once, then as a placeholder.
    let placeholder = calls
        .iter()
        .position(|call| call.body.to_string().contains("[REF_ID: "));
    assert!(
        placeholder.is_some(),
        "no upstream call carried a [REF_ID: …] placeholder\n{}",
        context(run, upstream, Some(skald))
    );
    // The scripted hidden fetch happened and its result went back up ...
    assert!(
        calls.iter().any(|call| call.answer == "fetch"),
        "the upstream never had the chance to call fetch_original_data (no call offered it \
         with a ref at the scripted step)\n{}",
        upstream.dump()
    );
    assert!(
        calls.iter().any(|call| {
            items(&call.body)
                .iter()
                .any(|item| item.to_string().contains(&format!("{FETCH_ID}_")))
                && call.body.to_string().contains("3999")
        }),
        "the fetch result never reached the upstream\n{}",
        upstream.dump()
    );
    // ... but never reached the host.
    for (what, text) in [
        ("output", run.finished.stdout.clone()),
        ("transcripts", run.transcripts()),
    ] {
        for needle in ["fetch_original_data", FETCH_ID] {
            assert!(
                !text.contains(needle),
                "the hidden fetch round leaked into the host's {what}: `{needle}` at …{}…",
                &text[text.find(needle).unwrap().saturating_sub(300)..]
                    .chars()
                    .take(600)
                    .collect::<String>()
            );
        }
    }
    assert_prefix_stable(upstream, true);
    // No skald key or skald header upstream.
    for request in upstream.requests() {
        for (name, value) in &request.headers {
            assert!(
                !value.contains(&skald.key) && !value.contains("sk-skald"),
                "the skald key went upstream in {name}"
            );
            assert!(
                !name.to_ascii_lowercase().starts_with("x-skald"),
                "a skald header went upstream: {name}"
            );
        }
        assert!(
            !request.body.to_string().contains(&skald.key),
            "the skald key went upstream in a body"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

#[test]
fn claude_code_runs_the_script_direct() {
    let dir = workdir();
    let script = script_for(&dir, SMALL_STEPS);
    let upstream = Upstream::start(script.clone());
    let run = claude_code(&upstream.url(), None, dir);
    assert_claude_completed(&run, &upstream, None);
    assert_script_ran(&upstream, &script, 0);
    // The large output went up whole (below Claude Code's own <persisted-output> cut).
    let calls = upstream.model_calls();
    let second = calls[1].body.to_string();
    assert!(second.contains("\\n3999\\n4000"), "{}", upstream.dump());
    assert!(!second.contains("persisted-output"), "{}", upstream.dump());
    assert_prefix_stable(&upstream, false);
    // The cache simulation sees the client's breakpoints.
    let last = calls.last().unwrap().usage.clone().unwrap();
    assert!(
        last["cache_read_input_tokens"].as_u64().unwrap() > 0,
        "{last}"
    );
}

#[test]
fn codex_runs_the_script_direct() {
    let dir = workdir();
    let script = script_for(&dir, SMALL_STEPS);
    let upstream = Upstream::start(script.clone());
    let run = codex(&format!("{}/v1", upstream.url()), None, dir);
    assert_codex_completed(&run, &upstream, None);
    assert_script_ran(&upstream, &script, 0);
    let calls = upstream.model_calls();
    assert!(
        calls[1].body.to_string().contains("\\n3999\\n4000"),
        "{}",
        upstream.dump()
    );
    assert_prefix_stable(&upstream, false);
    let last = calls.last().unwrap().usage.clone().unwrap();
    assert!(
        last["input_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap()
            > 0,
        "{last}"
    );
}

#[test]
fn claude_code_runs_through_skald() {
    let dir = workdir();
    let script = script_for(&dir, SMALL_STEPS);
    let upstream = Upstream::start(script.clone());
    let skald = Skald::start(&upstream.url());
    let run = claude_code(&skald.url, Some(&skald.key), dir);
    assert_claude_completed(&run, &upstream, Some(&skald));
    assert_through_skald(&run, &upstream, &skald);
    assert_script_ran(&upstream, &script, 1);
}

#[test]
fn codex_runs_through_skald() {
    let dir = workdir();
    let script = script_for(&dir, SMALL_STEPS);
    let upstream = Upstream::start(script.clone());
    let skald = Skald::start(&upstream.url());
    let run = codex(&format!("{}/v1", skald.url), Some(&skald.key), dir);
    assert_codex_completed(&run, &upstream, Some(&skald));
    assert_through_skald(&run, &upstream, &skald);
    assert_script_ran(&upstream, &script, 1);
    // The run is one session, named by Codex's own thread id.
    let sessions = skald.sessions();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    assert!(
        sessions[0]["session_id"]
            .as_str()
            .is_some_and(|id| id.starts_with("codex-")),
        "{sessions:?}"
    );
}

/// Two `claude -p` runs with the same prompt are two skald sessions (each named by Claude Code's
/// own session id), and `--resume` of the first continues the first's session instead of
/// starting a third or landing in the second.
#[test]
fn claude_code_runs_are_sessions_of_their_own_and_a_resume_continues_its_own() {
    let dir = workdir();
    let script = script_for(&dir, SMALL_STEPS);
    let upstream = Upstream::start(script);
    let skald = Skald::start(&upstream.url());
    let first = claude_code(&skald.url, Some(&skald.key), dir);
    assert_claude_completed(&first, &upstream, Some(&skald));
    let second = claude_code(&skald.url, Some(&skald.key), workdir());
    assert_claude_completed(&second, &upstream, Some(&skald));
    let session_of = |run: &HostRun| {
        json_lines(&run.finished.stdout)
            .iter()
            .rev()
            .find_map(|line| line["session_id"].as_str().map(str::to_owned))
            .expect("Claude Code's stream names its session")
    };
    let (first_id, second_id) = (session_of(&first), session_of(&second));
    assert_ne!(first_id, second_id);
    let skald_session = |id: &str| {
        skald
            .sessions()
            .into_iter()
            .find(|session| {
                session["session_id"]
                    .as_str()
                    .is_some_and(|name| name.starts_with(&format!("claude-code-{id}-")))
            })
            .unwrap_or_else(|| {
                panic!(
                    "no skald session for Claude Code's {id}: {:?}",
                    skald.sessions()
                )
            })
    };
    let before = skald_session(&first_id);
    skald_session(&second_id);
    assert_eq!(skald.sessions().len(), 2, "{:?}", skald.sessions());

    let resumed = claude_code_in(
        &skald.url,
        Some(&skald.key),
        &first.workdir,
        &first.state_dir,
        &["--resume", &first_id, "-p", "One more time, please."],
    );
    let last = json_lines(&resumed.stdout)
        .last()
        .cloned()
        .unwrap_or(Value::Null);
    assert!(
        resumed.success() && last["type"] == "result" && last["is_error"] != true,
        "the resumed run failed: {last}\n{}",
        resumed.tail(4000)
    );
    assert_eq!(skald.sessions().len(), 2, "{:?}", skald.sessions());
    let after = skald_session(&first_id);
    assert!(
        after["messages"].as_u64() > before["messages"].as_u64(),
        "the resume did not continue its session: {before} -> {after}"
    );
}

/// Codex with the WebSocket transport on first asks `GET /v1/responses` for an upgrade; skald
/// answers 426, and Codex goes on over HTTP at once — one attempt, no retries, no error item.
#[test]
fn codex_with_websockets_on_falls_back_to_http_at_once() {
    let dir = workdir();
    let script = script_for(&dir, SMALL_STEPS);
    let upstream = Upstream::start(script.clone());
    let skald = Skald::start(&upstream.url());
    let run = codex_with(
        &format!("{}/v1", skald.url),
        Some(&skald.key),
        dir,
        "supports_websockets = true\n",
    );
    assert_codex_completed(&run, &upstream, Some(&skald));
    assert_script_ran(&upstream, &script, 1);
    let log = skald.log();
    let upgrades = log
        .lines()
        .filter(|line| line.contains("method=\"GET\" path=\"/v1/responses\""))
        .count();
    assert!(
        (1..=1).contains(&upgrades),
        "expected one refused WebSocket upgrade, saw {upgrades}\n{log}"
    );
    assert!(
        !run.finished.stdout.contains("Falling back")
            && !run.finished.stdout.contains("Reconnecting"),
        "Codex reported a transport problem:\n{}",
        run.finished.stdout
    );
}

// ---------------------------------------------------------------------------------------------
// Measurement
// ---------------------------------------------------------------------------------------------

/// One run's numbers.
struct Measured {
    calls: usize,
    completed: bool,
    /// Median time between consecutive model calls at the upstream, ms.
    gap_p50_ms: f64,
    breaks: usize,
    cost_usd: f64,
    cached_share: f64,
}

fn p50(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Cost at list prices from the upstream's usage log: Anthropic Sonnet ($3/M input, writes
/// ×1.25, reads ×0.1, $15/M output); OpenAI ($1.25/M input, cached input ×0.1, $10/M output).
fn measure_upstream(upstream: &Upstream, completed: bool) -> Measured {
    let calls = upstream.model_calls();
    let gaps = calls
        .windows(2)
        .map(|pair| (pair[1].at - pair[0].at).as_secs_f64() * 1000.0)
        .collect();
    let (mut cost, mut input, mut cached) = (0.0, 0.0, 0.0);
    for call in &calls {
        let usage = call.usage.clone().unwrap_or(Value::Null);
        let get = |pointer: &str| {
            usage
                .pointer(pointer)
                .and_then(Value::as_f64)
                .unwrap_or(0.0)
        };
        let output = get("/output_tokens");
        if call.api == Api::Anthropic {
            let (plain, write, read) = (
                get("/input_tokens"),
                get("/cache_creation_input_tokens"),
                get("/cache_read_input_tokens"),
            );
            cost += (plain * 3.0 + write * 3.75 + read * 0.3 + output * 15.0) / 1e6;
            input += plain + write + read;
            cached += read;
        } else {
            let (all, hit) = (
                get("/input_tokens"),
                get("/input_tokens_details/cached_tokens"),
            );
            cost += ((all - hit) * 1.25 + hit * 0.125 + output * 10.0) / 1e6;
            input += all;
            cached += hit;
        }
    }
    Measured {
        calls: calls.len(),
        completed,
        gap_p50_ms: p50(gaps),
        breaks: prefix_breaks(&calls, false).len(),
        cost_usd: cost,
        cached_share: if input > 0.0 { cached / input } else { 0.0 },
    }
}

fn measure_host(name: &str, small: usize) {
    let mut rows = Vec::new();
    for through_skald in [false, true] {
        let dir = workdir();
        let script = script_for(&dir, small);
        let upstream = Upstream::start(script);
        let skald = through_skald.then(|| Skald::start(&upstream.url()));
        let base = skald.as_ref().map_or(upstream.url(), |s| s.url.clone());
        let key = skald.as_ref().map(|s| s.key.clone());
        let run = if name == "claude-code" {
            claude_code(&base, key.as_deref(), dir)
        } else {
            codex(&format!("{base}/v1"), key.as_deref(), dir)
        };
        let measured = measure_upstream(&upstream, run.finished.success());
        // skald's own time per proxied request, from its log line (`overhead_ms`: the
        // request's time to its answer's headers minus the upstream's).
        let overheads: Vec<f64> = skald
            .as_ref()
            .map(|s| {
                s.log()
                    .lines()
                    .filter(|line| line.contains("upstream_calls"))
                    .filter_map(|line| {
                        let value = line.split("overhead_ms=").nth(1)?;
                        value.split_whitespace().next()?.parse::<f64>().ok()
                    })
                    .collect()
            })
            .unwrap_or_default();
        rows.push((through_skald, measured, overheads));
    }
    let direct_gap = rows[0].1.gap_p50_ms;
    for (through_skald, m, overheads) in &rows {
        println!(
            "{name:<12} {:<7} completed={} calls={:>3} gap_p50={:>7.1}ms (vs direct {:>+6.1}ms) \
             skald_overhead_p50={:>6.2}ms over {} requests prefix_breaks={:>2} \
             cached_share={:>5.1}% cost=${:.4}",
            if *through_skald { "skald" } else { "direct" },
            m.completed,
            m.calls,
            m.gap_p50_ms,
            m.gap_p50_ms - direct_gap,
            p50(overheads.clone()),
            overheads.len(),
            m.breaks,
            m.cached_share * 100.0,
            m.cost_usd,
        );
    }
}

/// `SKALD_HOSTS_MEASURE=N` (default 22 small steps, so ≥ 24 model calls per run): each host
/// direct and through skald; prints calls, overhead, prefix breaks and cost.
#[test]
#[ignore = "measurement: run with --ignored --nocapture"]
fn measure_hosts_direct_and_through_skald() {
    let small = std::env::var("SKALD_HOSTS_MEASURE")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|n| *n >= 2)
        .unwrap_or(22);
    measure_host("claude-code", small);
    measure_host("codex", small);
}
