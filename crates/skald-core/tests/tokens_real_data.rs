//! Ad-hoc accuracy check of token counting against provider-reported input tokens on the real
//! mini-swe-agent trajectories and Claude Code sessions in `shared/data` (never copied into the
//! project). For every assistant call, the request is every message before it; calibration is
//! online (only earlier calls teach it). Ignored by default; run with
//! `cargo test -p skald-core --release --test tokens_real_data -- --ignored --nocapture`.
//! `SKALD_MINI_SWE_DIR` and `SKALD_CLAUDE_CODE_DIR` override the folders. It parses the JSON
//! directly so that it does not depend on the codecs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use serde_json::Value;
use skald_core::message::{
    Block, ContentForm, Extra, ImageBlock, ImageSource, Message, Role, ThinkingBlock, ToolCall,
    ToolResult,
};
use skald_core::tokens::{
    Calibration, CalibrationSettings, Encoding, TokenCounter, estimate_messages_tokens,
};

fn data_dir() -> PathBuf {
    std::env::var_os("SKALD_MINI_SWE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/work/shared/data/trajectories/mini-swe-agent"))
}

struct Call {
    estimate: u64,
    bpe: u64,
    reported: u64,
}

fn role(name: &str) -> Role {
    match name {
        "system" => Role::System,
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "tool" => Role::ToolResult,
        other => Role::Custom(other.to_owned()),
    }
}

fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::Object(_) => String::new(),
    }
}

/// Per transcript, the calls in order.
fn load(counter: &mut TokenCounter) -> Vec<(String, Vec<Call>)> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(data_dir())
        .expect("data folder")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.to_string_lossy().ends_with(".traj.json"))
        .collect();
    paths.sort();
    let mut transcripts = Vec::new();
    for path in paths {
        let json: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let raw = json["messages"].as_array().unwrap();
        let messages: Vec<Message> = raw
            .iter()
            .map(|m| {
                Message::text(
                    role(m["role"].as_str().unwrap_or("user")),
                    content_text(&m["content"]),
                )
            })
            .collect();
        let mut calls = Vec::new();
        for (index, m) in raw.iter().enumerate() {
            if m["role"] != "assistant" {
                continue;
            }
            let Some(reported) = m
                .pointer("/extra/response/usage/prompt_tokens")
                .and_then(Value::as_u64)
            else {
                continue;
            };
            let request = &messages[..index];
            calls.push(Call {
                estimate: estimate_messages_tokens(request),
                bpe: counter.count_request(request),
                reported,
            });
        }
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        transcripts.push((name, calls));
    }
    transcripts
}

fn ape(predicted: u64, reported: u64) -> f64 {
    (predicted as f64 - reported as f64).abs() / reported as f64 * 100.0
}

fn summary(label: &str, mut errors: Vec<f64>) {
    errors.sort_by(f64::total_cmp);
    let mean = errors.iter().sum::<f64>() / errors.len() as f64;
    let p90 = errors[((errors.len() as f64 * 0.9).ceil() as usize).saturating_sub(1)];
    let max = errors.last().copied().unwrap_or(0.0);
    println!(
        "{label:<48} n={:<5} mean APE {mean:6.2}%  p90 {p90:6.2}%  max {max:6.2}%",
        errors.len()
    );
}

/// Online calibration: each call is corrected with what was learnt from earlier calls only.
fn calibrated(
    transcripts: &[(String, Vec<Call>)],
    settings: CalibrationSettings,
    per_transcript: bool,
    base: impl Fn(&Call) -> u64,
) -> Vec<f64> {
    let mut errors = Vec::new();
    let mut shared = Calibration::with_settings(settings);
    for (_, calls) in transcripts {
        let mut own = Calibration::with_settings(settings);
        let calibration = if per_transcript {
            &mut own
        } else {
            &mut shared
        };
        for call in calls {
            let counted = base(call);
            errors.push(ape(calibration.correct("m", counted), call.reported));
            calibration.observe("m", counted, call.reported);
        }
    }
    errors
}

#[test]
#[ignore = "reads real trajectories from shared/data"]
fn accuracy_on_mini_swe_agent_trajectories() {
    if !data_dir().is_dir() {
        println!("no data at {}", data_dir().display());
        return;
    }
    let mut counter = TokenCounter::new(Encoding::for_model("gemini-3-pro-preview"));
    let started = std::time::Instant::now();
    let transcripts = load(&mut counter);
    let elapsed = started.elapsed();
    let stats = counter.stats();
    let calls: usize = transcripts.iter().map(|(_, calls)| calls.len()).sum();
    println!(
        "{} transcripts, {calls} calls; counting all requests took {elapsed:?} (cache hits {}, misses {})",
        transcripts.len(),
        stats.hits,
        stats.misses
    );
    let all = || transcripts.iter().flat_map(|(_, calls)| calls.iter());
    let ratio_of = |f: &dyn Fn(&Call) -> u64| {
        let (a, b) = all().fold((0.0, 0.0), |(a, b), c| {
            (a + c.reported as f64, b + f(c) as f64)
        });
        a / b
    };
    println!(
        "overall reported/estimate {:.3}, reported/bpe {:.3}",
        ratio_of(&|c| c.estimate),
        ratio_of(&|c| c.bpe)
    );
    summary(
        "chars/4 estimate",
        all().map(|c| ape(c.estimate, c.reported)).collect(),
    );
    summary(
        "chars/4 estimate x SAFETY_MARGIN",
        all()
            .map(|c| ape(skald_core::tokens::with_margin(c.estimate), c.reported))
            .collect(),
    );
    summary("BPE o200k", all().map(|c| ape(c.bpe, c.reported)).collect());
    let defaults = CalibrationSettings::default();
    let ratio_only = CalibrationSettings {
        min_relative_spread: f64::INFINITY,
        ..defaults
    };
    for (label, settings, per_transcript) in [
        ("BPE calibrated (default), per transcript", defaults, true),
        (
            "BPE calibrated (ratio only), per transcript",
            ratio_only,
            true,
        ),
        (
            "BPE calibrated (default), across transcripts",
            defaults,
            false,
        ),
        (
            "BPE calibrated (ratio only), across transcripts",
            ratio_only,
            false,
        ),
    ] {
        summary(
            label,
            calibrated(&transcripts, settings, per_transcript, |c| c.bpe),
        );
    }
    summary(
        "chars/4 calibrated (default), per transcript",
        calibrated(&transcripts, defaults, true, |c| c.estimate),
    );
    sweep(&transcripts);
}

fn claude_dir() -> PathBuf {
    std::env::var_os("SKALD_CLAUDE_CODE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/work/shared/data/trajectories/claude-code"))
}

fn claude_blocks(content: &Value) -> Vec<Block> {
    let parts = match content {
        Value::String(text) => return vec![Block::text(text.clone())],
        Value::Array(parts) => parts,
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::Object(_) => return Vec::new(),
    };
    parts
        .iter()
        .map(|part| match part["type"].as_str().unwrap_or("") {
            "text" => Block::text(part["text"].as_str().unwrap_or("")),
            "thinking" => Block::Thinking(ThinkingBlock {
                thinking: part["thinking"].as_str().unwrap_or("").to_owned(),
                signature: None,
                extra: Extra::new(),
            }),
            "tool_use" => Block::ToolCall(ToolCall {
                id: part["id"].as_str().unwrap_or("").to_owned(),
                name: part["name"].as_str().unwrap_or("").to_owned(),
                arguments: part["input"].clone(),
                arguments_text: None,
                extra: Extra::new(),
            }),
            "tool_result" => Block::ToolResult(ToolResult {
                call_id: part["tool_use_id"].as_str().unwrap_or("").to_owned(),
                tool_name: None,
                content: claude_blocks(&part["content"]).into(),
                content_form: ContentForm::Blocks,
                is_error: part["is_error"].as_bool(),
                details: None,
                extra: Extra::new(),
            }),
            "image" => Block::Image(ImageBlock {
                source: ImageSource::Url { url: String::new() },
                extra: Extra::new(),
            }),
            _ => Block::Opaque(part.clone()),
        })
        .collect()
}

/// Main-chain requests of a Claude Code session: every distinct assistant message id is one call
/// whose request is the messages before its first line (since the last compaction).
fn load_claude(counter: &mut TokenCounter, path: &std::path::Path) -> Vec<Call> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut messages: Vec<Message> = Vec::new();
    let mut calls = Vec::new();
    let mut last_id = String::new();
    for line in text.lines() {
        let Ok(entry) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if entry["isSidechain"] == Value::Bool(true) {
            continue;
        }
        match entry["type"].as_str().unwrap_or("") {
            "system" if entry["subtype"] == "compact_boundary" => {
                messages.clear();
                last_id.clear();
            }
            "user" => {
                let blocks = claude_blocks(&entry["message"]["content"]);
                let role = if blocks.iter().any(|b| matches!(b, Block::ToolResult(_))) {
                    Role::ToolResult
                } else {
                    Role::User
                };
                messages.push(Message::new(role, blocks));
            }
            "assistant" => {
                let message = &entry["message"];
                let id = message["id"].as_str().unwrap_or("").to_owned();
                let blocks = claude_blocks(&message["content"]);
                if id == last_id {
                    if let Some(previous) = messages.last_mut() {
                        previous.content.extend(blocks);
                    }
                    continue;
                }
                let usage = &message["usage"];
                let reported = [
                    "input_tokens",
                    "cache_read_input_tokens",
                    "cache_creation_input_tokens",
                ]
                .iter()
                .filter_map(|key| usage[*key].as_u64())
                .sum::<u64>();
                if reported > 0 && !messages.is_empty() {
                    calls.push(Call {
                        estimate: estimate_messages_tokens(&messages),
                        bpe: counter.count_request(&messages),
                        reported,
                    });
                }
                messages.push(Message::new(Role::Assistant, blocks));
                last_id = id;
            }
            _ => {}
        }
    }
    calls
}

#[test]
#[ignore = "reads real transcripts from shared/data"]
fn accuracy_on_claude_code_sessions() {
    if !claude_dir().is_dir() {
        println!("no data at {}", claude_dir().display());
        return;
    }
    let mut counter = TokenCounter::new(Encoding::for_model("claude-opus-4-6"));
    let mut paths: Vec<PathBuf> = std::fs::read_dir(claude_dir())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .collect();
    paths.sort();
    let transcripts: Vec<(String, Vec<Call>)> = paths
        .iter()
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, load_claude(&mut counter, path))
        })
        .collect();
    for (name, calls) in &transcripts {
        let first = calls.first().map(|c| (c.bpe, c.reported));
        println!(
            "{name}: {} calls, first (bpe, reported) {first:?}",
            calls.len()
        );
    }
    let all = || transcripts.iter().flat_map(|(_, calls)| calls.iter());
    summary(
        "chars/4 estimate",
        all().map(|c| ape(c.estimate, c.reported)).collect(),
    );
    summary("BPE o200k", all().map(|c| ape(c.bpe, c.reported)).collect());
    let defaults = CalibrationSettings::default();
    let ratio_only = CalibrationSettings {
        min_relative_spread: f64::INFINITY,
        ..defaults
    };
    for (label, settings, per_transcript) in [
        ("BPE calibrated (default), per transcript", defaults, true),
        (
            "BPE calibrated (ratio only), per transcript",
            ratio_only,
            true,
        ),
        (
            "BPE calibrated (default), across transcripts",
            defaults,
            false,
        ),
        (
            "BPE calibrated (ratio only), across transcripts",
            ratio_only,
            false,
        ),
    ] {
        summary(
            label,
            calibrated(&transcripts, settings, per_transcript, |c| c.bpe),
        );
    }
    sweep(&transcripts);
}

/// Mean / p90 APE of the calibrated BPE count over a grid of settings.
fn sweep(transcripts: &[(String, Vec<Call>)]) {
    for alpha in [0.3, 0.5, 1.0] {
        for forgetting in [0.8, 0.9, 0.95] {
            let settings = CalibrationSettings {
                ratio_alpha: alpha,
                forgetting,
                ..CalibrationSettings::default()
            };
            let stats = |per_transcript| {
                let mut errors = calibrated(transcripts, settings, per_transcript, |c| c.bpe);
                errors.sort_by(f64::total_cmp);
                let mean = errors.iter().sum::<f64>() / errors.len() as f64;
                let p90 = errors[((errors.len() as f64 * 0.9).ceil() as usize).saturating_sub(1)];
                let max = errors.last().copied().unwrap_or(0.0);
                format!("{mean:5.2}% / {p90:5.2}% / max {max:5.1}%")
            };
            println!(
                "  sweep alpha {alpha} forgetting {forgetting}: per transcript {}, across {}",
                stats(true),
                stats(false)
            );
        }
    }
}
