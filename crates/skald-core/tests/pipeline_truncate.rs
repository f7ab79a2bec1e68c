//! Per-result truncation (seed 003 §2.3): one test per behaviour, mirroring OpenClaw's
//! `tool-result-truncation.test.ts`, plus a snapshot of what the model sees.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod pipeline_common;

use pipeline_common::*;
use skald_core::message::{Block, Message, Role};
use skald_core::pipeline::truncate::{
    MARKER_RESERVE_CHARS, TAIL_MAX_CHARS, TruncateMode, TruncateSettings, TruncateSettingsError,
    result_budget_chars, truncate, truncation_marker,
};
use skald_core::refs::{RefPayload, ref_ids_in};
use skald_core::tokens::{estimate_messages_chars, estimate_string_chars};

const WINDOW_200K: u64 = 200_000;
/// `result_budget_chars(200_000)`: 30% of 800,000 chars.
const BUDGET_200K: usize = 240_000;

fn defaults() -> TruncateSettings {
    TruncateSettings::default()
}

fn one_result(text: &str) -> Vec<Message> {
    vec![
        user("go"),
        calls(&[("big", "bash")]),
        result("big", "bash", text),
    ]
}

fn text_chars(messages: &[Message], index: usize) -> usize {
    estimate_string_chars(&result_text(results(messages)[index]))
}

/// The text of the only result, split at the marker: (head, tail).
fn split_at_marker(text: &str) -> (&str, &str) {
    let start = text.find("\n[... ").expect("a marker");
    let end = start + text[start..].find(" ...]\n").unwrap() + " ...]\n".len();
    (&text[..start], &text[end..])
}

#[test]
fn truncation_budget_is_30_percent_of_window_capped_at_400k() {
    let settings = defaults();
    assert_eq!(result_budget_chars(128_000, &settings), 153_600);
    assert_eq!(result_budget_chars(WINDOW_200K, &settings), BUDGET_200K);
    assert_eq!(result_budget_chars(2_000_000, &settings), 400_000);
    assert_eq!(result_budget_chars(u64::MAX, &settings), 400_000);
    // A tiny window still keeps 2,000 chars plus room for the marker.
    assert_eq!(
        result_budget_chars(1_000, &settings),
        2_000 + MARKER_RESERVE_CHARS
    );
}

#[test]
fn truncation_leaves_results_under_budget_unchanged() {
    let messages = one_result(&lines(BUDGET_200K));
    let ptr = messages.as_ptr();
    let out = truncate(messages.clone(), &defaults(), WINDOW_200K);
    assert_eq!(
        out.messages, messages,
        "a result of exactly the budget fits"
    );
    assert!(out.report.is_noop());
    assert!(out.new_refs.is_empty());
    assert_eq!(out.report.budget_chars, BUDGET_200K);
    let out = truncate(messages, &defaults(), WINDOW_200K);
    assert_eq!(out.messages.as_ptr(), ptr, "moved, not rebuilt");
}

#[test]
fn truncation_marker_names_ref_and_original_is_returned() {
    let original = lines(300_000);
    let out = truncate(one_result(&original), &defaults(), WINDOW_200K);
    assert_eq!(out.report.truncated, 1);
    assert_eq!(out.new_refs.len(), 1);
    let new_ref = &out.new_refs[0];
    assert_eq!(
        new_ref.payload,
        RefPayload::new(vec![Block::text(original.clone())])
    );
    assert_eq!(new_ref.id, new_ref.payload.id());
    let text = result_text(results(&out.messages)[0]);
    assert_eq!(ref_ids_in(&text), vec![new_ref.id.clone()]);
    assert!(text.contains("chars omitted; full output: [REF_ID: "));
    assert!(text.contains("call fetch_original_data"));
    let change = &out.report.changes[0];
    assert_eq!(change.ref_id.as_deref(), Some(new_ref.id.as_str()));
    assert_eq!(change.call_id, "big");
    assert_eq!(change.tool_name.as_deref(), Some("bash"));
    assert_eq!((change.message_index, change.block_index), (2, 0));
    assert_eq!(change.chars_before, 300_000);
    assert_eq!(change.chars_after, estimate_string_chars(&text));
    assert_eq!(change.mode, TruncateMode::Head);
    assert!(change.reason.contains("budget of 240000 chars"));
    // The marker counts what is really gone.
    let (head, tail) = split_at_marker(&text);
    assert!(tail.is_empty());
    let omitted = 300_000 - head.len();
    assert!(text.contains(&format!("[... {omitted} chars omitted;")));
}

#[test]
fn truncation_keeps_at_least_min_keep_chars() {
    let out = truncate(one_result(&"z".repeat(50_000)), &defaults(), 1_000);
    let text = result_text(results(&out.messages)[0]);
    let (head, _) = split_at_marker(&text);
    assert!(head.len() >= 2_000, "kept {}", head.len());
    assert!(text.len() <= 2_000 + MARKER_RESERVE_CHARS);
}

#[test]
fn truncation_cuts_at_newline_in_last_20_percent() {
    let out = truncate(one_result(&lines(300_000)), &defaults(), WINDOW_200K);
    let text = result_text(results(&out.messages)[0]);
    let (head, _) = split_at_marker(&text);
    let last_line = head.rsplit('\n').next().unwrap();
    assert_eq!(
        last_line.len(),
        31,
        "the head ends with a whole line: {last_line:?}"
    );
    assert!(head.len() > BUDGET_200K * 8 / 10);
}

#[test]
fn truncation_does_not_move_cut_to_a_distant_newline() {
    let text = format!("first line\n{}", "z".repeat(300_000));
    let out = truncate(one_result(&text), &defaults(), WINDOW_200K);
    let kept = result_text(results(&out.messages)[0]);
    let (head, _) = split_at_marker(&kept);
    assert!(head.len() > BUDGET_200K - MARKER_RESERVE_CHARS);
}

#[test]
fn truncation_keeps_error_tail() {
    let text = format!(
        "{}\nTraceback (most recent call last):\n  File \"app.py\", line 3\nValueError: boom\n",
        lines(300_000)
    );
    let out = truncate(one_result(&text), &defaults(), WINDOW_200K);
    let kept = result_text(results(&out.messages)[0]);
    assert_eq!(out.report.changes[0].mode, TruncateMode::HeadAndTail);
    let (head, tail) = split_at_marker(&kept);
    assert!(head.starts_with("line 0000"));
    assert!(tail.ends_with("ValueError: boom\n"));
    assert!(tail.contains("Traceback (most recent call last):"));
    assert!(tail.len() <= TAIL_MAX_CHARS);
    assert!(
        tail.starts_with("line "),
        "the tail starts on a line boundary: {tail:.40}"
    );
}

#[test]
fn truncation_keeps_json_closing_tail() {
    let items: Vec<String> = (0..20_000).map(|i| format!("{{\"id\": {i}}}")).collect();
    let text = format!("{{\"items\": [{}]}}", items.join(",\n"));
    let out = truncate(one_result(&text), &defaults(), 100_000);
    let kept = result_text(results(&out.messages)[0]);
    let (_, tail) = split_at_marker(&kept);
    assert!(tail.ends_with("{\"id\": 19999}]}"));
    assert!(estimate_string_chars(&kept) <= result_budget_chars(100_000, &defaults()));
}

#[test]
fn truncation_keeps_summary_tail() {
    let text = format!("{}\nTotal: 1843 passed, 0 skipped", lines(300_000));
    let out = truncate(one_result(&text), &defaults(), WINDOW_200K);
    let kept = result_text(results(&out.messages)[0]);
    assert!(kept.ends_with("Total: 1843 passed, 0 skipped"));
}

#[test]
fn truncation_head_only_without_important_tail() {
    let out = truncate(one_result(&lines(300_000)), &defaults(), WINDOW_200K);
    let kept = result_text(results(&out.messages)[0]);
    assert_eq!(out.report.changes[0].mode, TruncateMode::Head);
    assert!(kept.ends_with("to read it ...]\n"));
}

#[test]
fn truncation_never_exceeds_budget() {
    let texts = [
        lines(1_000_000),
        "漢字".repeat(200_000),
        format!("{}\nerror: exit code 1", "é😀\n".repeat(300_000)),
        format!("{}\n{}", "漢".repeat(100_000), "failed ".repeat(10_000)),
        "\n".repeat(500_000),
    ];
    for text in &texts {
        for window in [1, 1_000, 8_000, 100_000, WINDOW_200K, 2_000_000] {
            let budget = result_budget_chars(window, &defaults());
            let out = truncate(one_result(text), &defaults(), window);
            let after = text_chars(&out.messages, 0);
            assert!(after <= budget, "window {window}: {after} > {budget}");
            if estimate_string_chars(text) > budget {
                assert_eq!(out.report.truncated, 1);
            }
        }
    }
}

#[test]
fn truncation_shares_budget_across_blocks_in_proportion() {
    let messages = vec![result_of(
        "multi",
        None,
        vec![Block::text(lines(300_000)), Block::text(lines(100_000))],
    )];
    let out = truncate(messages, &defaults(), WINDOW_200K);
    let result = results(&out.messages)[0];
    let sizes: Vec<usize> = result
        .content
        .iter()
        .map(|b| {
            let Block::Text(t) = b else {
                panic!("unexpected {b:?}")
            };
            t.text.len()
        })
        .collect();
    assert_eq!(sizes.len(), 2, "blocks stay separate");
    assert!(sizes[0] <= 180_000 && sizes[0] > 170_000, "{sizes:?}");
    assert!(sizes[1] <= 60_000 && sizes[1] > 55_000, "{sizes:?}");
    assert!(sizes.iter().sum::<usize>() <= BUDGET_200K);
    for block in &result.content {
        let Block::Text(text) = block else { panic!() };
        assert_eq!(ref_ids_in(&text.text), vec![out.new_refs[0].id.clone()]);
    }
}

#[test]
fn truncation_keeps_small_blocks_whole() {
    let messages = vec![result_of(
        "multi",
        None,
        vec![
            Block::text("exit status: 0"),
            Block::text(lines(500_000)),
            Block::text("log written to /tmp/x.log"),
        ],
    )];
    let out = truncate(messages, &defaults(), WINDOW_200K);
    let content = &results(&out.messages)[0].content;
    assert_eq!(content[0], Block::text("exit status: 0"));
    assert_eq!(content[2], Block::text("log written to /tmp/x.log"));
    assert!(text_chars(&out.messages, 0) <= BUDGET_200K);
}

#[test]
fn truncation_joins_many_small_blocks() {
    let mut content: Vec<Block> = (0..400).map(|_| Block::text(lines(1_000))).collect();
    content.insert(3, image());
    let out = truncate(
        vec![result_of("many", None, content)],
        &defaults(),
        WINDOW_200K,
    );
    let content = &results(&out.messages)[0].content;
    assert_eq!(content.len(), 2, "one text block and the image");
    assert!(matches!(content[0], Block::Text(_)));
    assert!(matches!(content[1], Block::Image(_)));
    assert_eq!(out.report.changes[0].mode, TruncateMode::Joined);
    assert!(text_chars(&out.messages, 0) <= BUDGET_200K);
    assert_eq!(
        out.new_refs[0].payload.blocks.len(),
        401,
        "the original keeps every block"
    );
}

#[test]
fn truncation_keeps_non_text_blocks() {
    let content = vec![
        Block::text(lines(300_000)),
        image(),
        Block::Opaque(serde_json::json!({"type": "document", "title": "spec"})),
    ];
    let out = truncate(
        vec![result_of("img", None, content.clone())],
        &defaults(),
        WINDOW_200K,
    );
    let after = &results(&out.messages)[0].content;
    assert_eq!(after.len(), 3);
    assert_eq!(after[1], content[1]);
    assert_eq!(after[2], content[2]);
}

#[test]
fn truncation_large_synthetic_keeps_begin_and_final() {
    let text = format!("BEGIN\n{}\nFINAL: done\n", lines(1_900_000));
    let out = truncate(one_result(&text), &defaults(), 128_000);
    let kept = result_text(results(&out.messages)[0]);
    assert!(kept.starts_with("BEGIN\n"));
    assert!(kept.ends_with("FINAL: done\n"));
    assert!(estimate_string_chars(&kept) <= 153_600);
}

#[test]
fn truncation_is_deterministic_and_idempotent() {
    let text = format!("{}\nerror: exit code 2", lines(300_000));
    let first = truncate(one_result(&text), &defaults(), WINDOW_200K);
    let second = truncate(one_result(&text), &defaults(), WINDOW_200K);
    assert_eq!(first.messages, second.messages);
    assert_eq!(first.new_refs, second.new_refs);
    let again = truncate(first.messages.clone(), &defaults(), WINDOW_200K);
    assert!(again.report.is_noop());
    assert_eq!(again.messages, first.messages);
}

#[test]
fn truncation_handles_each_result_of_a_message() {
    let messages = vec![
        calls(&[("a", "read"), ("b", "read"), ("c", "read")]),
        Message::new(
            Role::ToolResult,
            vec![
                result_block("a", None, vec![Block::text(lines(300_000))]),
                result_block("b", None, vec![Block::text("small")]),
                result_block("c", None, vec![Block::text(lines(250_000))]),
                Block::text("user note after the results"),
            ],
        ),
    ];
    let out = truncate(messages, &defaults(), WINDOW_200K);
    let blocks: Vec<(usize, usize)> = out
        .report
        .changes
        .iter()
        .map(|c| (c.message_index, c.block_index))
        .collect();
    assert_eq!(blocks, vec![(1, 0), (1, 2)]);
    assert_eq!(out.new_refs.len(), 2);
    assert_eq!(out.report.chars_before, 550_000);
    assert!(out.report.chars_after <= 2 * BUDGET_200K);
    assert_eq!(out.report.summary().split(' ').nth(1), Some("2"));
    pairing(&out.messages).unwrap();
}

#[test]
fn truncation_with_unknown_window_or_disabled_changes_nothing() {
    let messages = one_result(&lines(500_000));
    let out = truncate(messages.clone(), &defaults(), 0);
    assert_eq!(out.messages, messages);
    assert_eq!(out.report.budget_chars, 0);
    let disabled = TruncateSettings {
        enabled: false,
        ..defaults()
    };
    let out = truncate(messages.clone(), &disabled, WINDOW_200K);
    assert_eq!(out.messages, messages);
}

#[test]
fn truncation_counts_cjk_four_chars_each() {
    // 100,000 CJK characters weigh 400,000: over a 240,000 budget though only 100,000 chars long.
    let out = truncate(one_result(&"漢".repeat(100_000)), &defaults(), WINDOW_200K);
    assert_eq!(out.report.truncated, 1);
    let kept = result_text(results(&out.messages)[0]);
    assert!(estimate_string_chars(&kept) <= BUDGET_200K);
    assert!(kept.chars().filter(|c| *c == '漢').count() > 59_000);
}

#[test]
fn truncate_settings_load_and_validate() {
    let settings: TruncateSettings =
        serde_json::from_str(r#"{"hard_max_chars": 100000, "min_keep_chars": 1000}"#).unwrap();
    assert_eq!(settings.max_context_share, 0.3);
    assert!(settings.enabled);
    settings.validate().unwrap();
    let defaults: TruncateSettings = serde_json::from_str("{}").unwrap();
    assert_eq!(defaults, TruncateSettings::default());
    assert_eq!(defaults.hard_max_chars, 400_000);
    assert_eq!(defaults.min_keep_chars, 2_000);
    assert!(serde_json::from_str::<TruncateSettings>(r#"{"hard_max": 1}"#).is_err());

    for share in [0.0, -1.0, 1.5, f64::INFINITY] {
        let bad = TruncateSettings {
            max_context_share: share,
            ..TruncateSettings::default()
        };
        assert!(matches!(
            bad.validate(),
            Err(TruncateSettingsError::Share(_))
        ));
    }
    let small = TruncateSettings {
        hard_max_chars: 1_000,
        ..TruncateSettings::default()
    };
    assert_eq!(
        small.validate().unwrap_err(),
        TruncateSettingsError::HardMaxTooSmall {
            minimum: 2_256,
            found: 1_000
        }
    );
    assert!(
        small
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("hard_max_chars: expected at least")
    );
}

#[test]
fn marker_format_is_stable() {
    let id = RefPayload::new(vec![Block::text("x")]).id();
    assert_eq!(
        truncation_marker(42, &id),
        format!(
            "\n[... 42 chars omitted; full output: [REF_ID: {id}] - call fetch_original_data \
             with this ref id to read it ...]\n"
        )
    );
}

#[test]
fn truncate_layout_snapshot() {
    let settings = TruncateSettings {
        min_keep_chars: 100,
        ..defaults()
    };
    // A 500-token window: 150 tokens = 600 chars per result.
    assert_eq!(result_budget_chars(500, &settings), 600);
    let error_log = format!(
        "{}\nerror[E0425]: cannot find value `x` in this scope\nerror: could not compile `app`\n",
        lines(1_500)
    );
    let messages = vec![
        system("You are a careful agent."),
        user("Build it."),
        calls(&[("build", "bash"), ("read", "read"), ("ls", "bash")]),
        result("build", "bash", &error_log),
        result("read", "read", &lines(1_200)),
        result("ls", "bash", "Cargo.toml\nsrc/\n"),
        calls(&[("multi", "fetch")]),
        result_of(
            "multi",
            Some("fetch"),
            vec![
                Block::text("HTTP 200"),
                Block::text(lines(700)),
                Block::text(lines(500)),
            ],
        ),
        assistant("The build fails: `x` is undefined."),
    ];
    let before = estimate_messages_chars(&messages);
    let out = truncate(messages, &settings, 500);
    assert_eq!(out.report.truncated, 3);
    assert!(estimate_messages_chars(&out.messages) < before);
    insta::assert_snapshot!(render(&out.messages));
}
