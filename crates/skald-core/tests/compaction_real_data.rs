//! Ad-hoc check of compaction planning on the real Claude Code sessions in the shared data
//! folder (not part of the project): plans an overflow compaction of each whole session for a
//! 200k window, and a manual one of each span Claude Code itself compacted (the context before
//! each `compact_boundary`), runs them with a summarizer that answers with the five sections and
//! the requested identifiers, and prints what the plan decided (with its `## Tool Failures`
//! section). Ignored by default; run
//! `SKALD_SHARED_DATA=/path/to/shared/data cargo test -p skald-core --test compaction_real_data -- --ignored --nocapture`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use skald_core::codec;
use skald_core::codec::claude_code::{is_compact_boundary, request_start};
use skald_core::compaction::*;
use skald_core::message::Message;

fn data_dir() -> PathBuf {
    std::env::var_os("SKALD_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"))
}

#[test]
#[ignore = "reads the shared real-data folder"]
fn real_sessions_plan_and_run() {
    let dir = data_dir().join("trajectories/claude-code");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        eprintln!("no data under {}; nothing to check", dir.display());
        return;
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .collect();
    files.sort();
    for path in files {
        let input = std::fs::read_to_string(&path).unwrap();
        let decoded = codec::decode(&input).unwrap();
        let messages = decoded.conversation.messages;
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        plan_and_run(&name, &messages, CompactionTrigger::Overflow);
        for (number, boundary) in messages
            .iter()
            .enumerate()
            .filter(|(_, message)| is_compact_boundary(message))
            .map(|(index, _)| index)
            .enumerate()
        {
            let span: Vec<Message> = messages[request_start(&messages, boundary)..boundary]
                .iter()
                .filter(|message| message.is_model_visible())
                .cloned()
                .collect();
            let label = format!("{name} before compact_boundary {}", number + 1);
            plan_and_run(&label, &span, CompactionTrigger::Manual);
        }
    }
}

fn plan_and_run(name: &str, messages: &[Message], trigger: CompactionTrigger) {
    let plan = plan_compaction(
        messages,
        200_000,
        &CompactionSettings::default(),
        trigger,
        &CompactionInputs::default(),
    )
    .unwrap();
    eprintln!(
        "{name}: {} messages, {} tokens; kept from #{} ({} tail tokens, budget {}), span {} \
             messages / {} tokens in {} parts ({} calls expected), dropped {:?}, language {:?}",
        messages.len(),
        plan.tokens_before,
        plan.first_kept_index(),
        plan.tail_tokens,
        plan.tail_budget_tokens,
        plan.span.len(),
        plan.span_tokens,
        plan.stages.parts.len(),
        plan.stages.expected_calls(),
        plan.dropped
            .as_ref()
            .map(|d| (d.messages.len(), d.dropped_tokens)),
        plan.language,
    );
    eprintln!(
        "  {trigger:?}; split turn: {:?}",
        plan.split.turn_split.as_ref().map(|split| (
            split.reason,
            split.preserved_from,
            split.turn_start,
            split.preserved_tokens,
            split.kept_tokens
        ))
    );
    eprintln!("  identifiers: {:?}", plan.identifiers);
    eprintln!(
        "  latest ask: {:?}",
        plan.latest_user_ask
            .as_deref()
            .map(|ask| ask.chars().take(120).collect::<String>())
    );
    eprintln!(
        "  files: {} read, {} modified; {} tool failures; tail truncation: {:?}",
        plan.appendices.files.read.len(),
        plan.appendices.files.modified.len(),
        plan.appendices.tool_failures.len(),
        plan.tail_truncation.as_ref().map(|t| (
            t.report.truncated,
            t.tokens_before,
            t.tokens_after
        )),
    );
    let failures = format_tool_failures(
        &plan.appendices.tool_failures,
        plan.appendices.max_tool_failures,
    );
    for line in failures.lines() {
        eprintln!("    {line}");
    }
    let mut run = CompactionRun::new(plan);
    let mut calls = 0;
    while let Some(request) = run.next_request() {
        calls += 1;
        let ids: Vec<String> = request
            .identifiers
            .iter()
            .map(|id| format!("- {id}"))
            .collect();
        let ask = run.plan().latest_user_ask.clone().unwrap_or_default();
        run.record(Ok(format!(
            "## Decisions\n- x\n## Open TODOs\n- x\n## Constraints/Rules\n- x\n\
                 ## Pending user asks\n- {ask}\n## Exact identifiers\n{}",
            ids.join("\n")
        )));
    }
    let outcome = run.finish();
    eprintln!("  {calls} calls: {}", outcome.describe());
}
