//! Context pruning (seed 003 §2.2): one test per behaviour, mirroring OpenClaw's
//! `context-pruning.test.ts` and `pruner.test.ts`, plus snapshots of what the model sees.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod pipeline_common;

use pipeline_common::*;
use skald_core::message::{Block, Message, Role};
use skald_core::pipeline::prune::{
    DEFAULT_HARD_CLEAR_PLACEHOLDER, HardClearSettings, PruneAction, PruneClock, PruneEnv,
    PruneMode, PruneSettings, PruneSettingsError, PruneSkip, SoftTrimSettings, ToolMatch,
    default_cleared_summary, prune, prune_with,
};
use skald_core::refs::{self, RefId, RefPayload, ref_ids_in};
use skald_core::tokens::estimate_messages_chars;

const MINUTE: i64 = 60_000;

/// No TTL gate.
fn always() -> PruneSettings {
    PruneSettings {
        mode: PruneMode::Always,
        ..PruneSettings::default()
    }
}

/// Hard clear of every prunable result, no soft trim: isolates protections.
fn clear_everything() -> PruneSettings {
    PruneSettings {
        soft_trim_ratio: 0.0,
        hard_clear_ratio: 0.0,
        min_prunable_tool_chars: 0,
        soft_trim: SoftTrimSettings {
            max_chars: usize::MAX,
            head_chars: 10,
            tail_chars: 10,
        },
        ..always()
    }
}

fn window(tokens: u64) -> PruneEnv {
    PruneEnv {
        context_window_tokens: tokens,
        now_ms: 0,
        clock: PruneClock::default(),
    }
}

/// A user message, then `n` rounds of one `read` call and its result of `size` characters.
fn rounds(n: usize, size: usize) -> Vec<Message> {
    let mut messages = vec![user("go")];
    for round in 0..n {
        let id = format!("c{round}");
        messages.push(calls(&[(&id, "read")]));
        messages.push(result(&id, "read", &lines(size)));
    }
    messages
}

fn cleared_ids(messages: &[Message]) -> Vec<String> {
    results(messages)
        .into_iter()
        .filter(|r| result_text(r) == DEFAULT_HARD_CLEAR_PLACEHOLDER)
        .map(|r| r.call_id.clone())
        .collect()
}

#[test]
fn prune_mode_off_changes_nothing() {
    let messages = rounds(5, 20_000);
    let settings = PruneSettings {
        mode: PruneMode::Off,
        ..clear_everything()
    };
    let out = prune(messages.clone(), &settings, window(1_000));
    assert_eq!(out.messages, messages);
    assert_eq!(out.report.skipped, Some(PruneSkip::Off));
    assert!(!out.report.skipped_by_ttl);
}

#[test]
fn prune_protects_results_of_last_n_assistants_and_clears_older() {
    let out = prune(rounds(5, 20_000), &clear_everything(), window(1_000));
    assert_eq!(cleared_ids(&out.messages), vec!["c0", "c1"]);
    assert_eq!(out.report.cleared, 2);
    assert_eq!(out.report.prunable_results, 2);
    for protected in &results(&out.messages)[2..] {
        assert_eq!(result_text(protected).len(), 20_000);
    }
    let change = &out.report.changes[0];
    assert_eq!(
        (change.message_index, change.block_index, change.action),
        (2, 0, PruneAction::Cleared)
    );
    assert_eq!(change.call_id, "c0");
    assert_eq!(change.tool_name.as_deref(), Some("read"));
    assert_eq!((change.chars_before, change.chars_after), (20_000, 33));
}

#[test]
fn prune_keep_last_one_assistant_protects_only_the_last_results() {
    let settings = PruneSettings {
        keep_last_assistants: 1,
        ..clear_everything()
    };
    let out = prune(rounds(4, 10_000), &settings, window(1_000));
    assert_eq!(cleared_ids(&out.messages), vec!["c0", "c1", "c2"]);
}

#[test]
fn prune_keep_last_zero_assistants_makes_everything_after_first_user_prunable() {
    let settings = PruneSettings {
        keep_last_assistants: 0,
        ..clear_everything()
    };
    let out = prune(rounds(3, 10_000), &settings, window(1_000));
    assert_eq!(cleared_ids(&out.messages), vec!["c0", "c1", "c2"]);
}

#[test]
fn prune_never_touches_results_before_first_user() {
    let mut messages = vec![
        system("You are skald's test agent."),
        calls(&[("soul", "read")]),
        result("soul", "read", &lines(20_000)),
    ];
    messages.extend(rounds(2, 20_000));
    let settings = PruneSettings {
        keep_last_assistants: 0,
        ..clear_everything()
    };
    let out = prune(messages, &settings, window(1_000));
    assert_eq!(cleared_ids(&out.messages), vec!["c0", "c1"]);
    assert_eq!(result_text(results(&out.messages)[0]).len(), 20_000);
}

#[test]
fn prune_without_user_message_prunes_nothing() {
    let messages = vec![
        calls(&[("a", "read")]),
        result("a", "read", &lines(20_000)),
        calls(&[("b", "read")]),
        result("b", "read", &lines(20_000)),
    ];
    let settings = PruneSettings {
        keep_last_assistants: 0,
        ..clear_everything()
    };
    let out = prune(messages.clone(), &settings, window(1_000));
    assert_eq!(out.messages, messages);
    assert!(out.report.is_noop());
}

#[test]
fn too_few_assistants_means_no_pruning() {
    let out = prune(rounds(2, 20_000), &clear_everything(), window(1_000));
    assert!(out.report.is_noop());
    assert_eq!(
        out.report.skipped,
        Some(PruneSkip::TooFewAssistants {
            found: 2,
            needed: 3
        })
    );
}

#[test]
fn unknown_context_window_prunes_nothing() {
    let out = prune(rounds(5, 20_000), &clear_everything(), window(0));
    assert_eq!(out.report.skipped, Some(PruneSkip::NoContextWindow));
    assert!(out.report.is_noop());
}

#[test]
fn below_soft_trim_ratio_nothing_changes_and_nothing_is_rebuilt() {
    let messages = rounds(5, 20_000);
    let total = estimate_messages_chars(&messages);
    let ptr = messages.as_ptr();
    let text_ptr = result_text_ptr(&messages, 2);
    // A window where the context fills 29% of it.
    let tokens = (total as f64 / 0.29 / 4.0) as u64;
    let out = prune(messages, &always(), window(tokens));
    assert_eq!(out.report.skipped, Some(PruneSkip::BelowSoftTrimRatio));
    assert!(out.report.ratio_before < 0.3 && out.report.ratio_before > 0.28);
    assert_eq!(out.report.chars_before, total);
    assert_eq!(out.report.chars_after, total);
    assert_eq!(out.messages.as_ptr(), ptr, "the list is moved, not rebuilt");
    assert_eq!(result_text_ptr(&out.messages, 2), text_ptr);
    assert_eq!(out.clock, PruneClock::default(), "no change, no touch");
}

fn result_text_ptr(messages: &[Message], index: usize) -> *const u8 {
    let result = messages[index].tool_results().next().unwrap();
    let Block::Text(text) = &result.content[0] else {
        panic!("expected text, found {:?}", result.content[0])
    };
    text.text.as_ptr()
}

#[test]
fn soft_trim_keeps_head_and_tail_plus_note() {
    // 6 rounds of 20,000 chars in a 200,000-char window: ratio 0.6 ≥ 0.3.
    let out = prune(rounds(6, 20_000), &always(), window(50_000));
    assert_eq!(out.report.trimmed, 3);
    assert_eq!(out.report.cleared, 0, "ratio after soft trim is below 0.5");
    assert!(out.report.ratio_before >= 0.6 && out.report.ratio_after < 0.5);
    let original = lines(20_000);
    let trimmed = result_text(results(&out.messages)[0]);
    let expected = format!(
        "{}\n...\n{}\n\n[Tool result trimmed: kept first 1500 chars and last 1500 chars of 20000 \
         chars.]",
        &original[..1500],
        &original[original.len() - 1500..]
    );
    assert_eq!(trimmed, expected);
    let trims: Vec<_> = out
        .report
        .changes
        .iter()
        .map(|c| (c.call_id.as_str(), c.action))
        .collect();
    assert_eq!(
        trims,
        vec![
            ("c0", PruneAction::Trimmed),
            ("c1", PruneAction::Trimmed),
            ("c2", PruneAction::Trimmed)
        ]
    );
    assert!(
        out.report
            .reason_lines()
            .all(|r| r.starts_with("soft trim"))
    );
}

trait Reasons {
    fn reason_lines(&self) -> impl Iterator<Item = &str>;
}

impl Reasons for skald_core::pipeline::PruneReport {
    fn reason_lines(&self) -> impl Iterator<Item = &str> {
        self.changes.iter().map(|c| c.reason.as_str())
    }
}

#[test]
fn soft_trim_keeps_head_and_tail_across_blocks() {
    let messages = vec![
        user("go"),
        calls(&[("x", "read")]),
        result_of(
            "x",
            Some("read"),
            vec![
                Block::text("A".repeat(10)),
                Block::text("B".repeat(500)),
                Block::text("C".repeat(10)),
            ],
        ),
        assistant("a"),
        assistant("b"),
        assistant("c"),
    ];
    let settings = PruneSettings {
        soft_trim_ratio: 0.0,
        hard_clear: HardClearSettings {
            enabled: false,
            ..HardClearSettings::default()
        },
        soft_trim: SoftTrimSettings {
            max_chars: 100,
            head_chars: 12,
            tail_chars: 12,
        },
        ..always()
    };
    let out = prune(messages, &settings, window(100_000));
    let result = results(&out.messages)[0];
    assert_eq!(result.content.len(), 1, "trimmed text is one block");
    assert_eq!(
        result_text(result),
        format!(
            "AAAAAAAAAA\nB\n...\nB\nCCCCCCCCCC\n\n[Tool result trimmed: kept first 12 chars and \
             last 12 chars of 522 chars.]"
        )
    );
}

#[test]
fn soft_trim_counts_cjk_four_chars_each() {
    // 3,000 CJK characters are 12,000 estimator characters: over the 4,000 soft-trim limit.
    let text = "漢".repeat(3_000);
    let mut messages = vec![
        user("go"),
        calls(&[("x", "read")]),
        result("x", "read", &text),
    ];
    messages.extend([assistant("a"), assistant("b"), assistant("c")]);
    let out = prune(messages, &always(), window(10_000));
    assert_eq!(out.report.trimmed, 1);
    let trimmed = result_text(results(&out.messages)[0]);
    assert!(
        trimmed.starts_with(&"漢".repeat(375)),
        "1,500 chars = 375 CJK"
    );
    assert!(!trimmed.starts_with(&"漢".repeat(376)));
    assert!(trimmed.ends_with("of 12000 chars.]"), "{trimmed}");
}

#[test]
fn soft_trim_skips_results_within_max_chars() {
    let out = prune(rounds(6, 4_000), &always(), window(10_000));
    assert_eq!(out.report.trimmed, 0);
}

#[test]
fn hard_clear_only_when_prunable_chars_reach_minimum() {
    let settings = PruneSettings {
        soft_trim: SoftTrimSettings {
            max_chars: usize::MAX,
            head_chars: 10,
            tail_chars: 10,
        },
        ..always()
    };
    // Two prunable results of 20,000: 40,000 < 50,000, although the window is overfull.
    let out = prune(rounds(5, 20_000), &settings, window(5_000));
    assert!(out.report.ratio_before > 1.0);
    assert_eq!(out.report.prunable_tool_chars / 1000, 40);
    assert_eq!(out.report.cleared, 0);
    // Three prunable results: 60,000 ≥ 50,000.
    let out = prune(rounds(6, 20_000), &settings, window(5_000));
    assert_eq!(out.report.cleared, 3);
}

#[test]
fn hard_clear_clears_oldest_first_until_below_ratio() {
    let settings = PruneSettings {
        soft_trim: SoftTrimSettings {
            max_chars: usize::MAX,
            head_chars: 10,
            tail_chars: 10,
        },
        ..always()
    };
    // ~140,400 chars in a 220,000-char window: clearing two results brings it below 0.5.
    let out = prune(rounds(7, 20_000), &settings, window(55_000));
    assert_eq!(cleared_ids(&out.messages), vec!["c0", "c1"]);
    assert!(out.report.ratio_before >= 0.5);
    assert!(out.report.ratio_after < 0.5);
    assert!(
        out.report.changes[0]
            .reason
            .starts_with("hard clear: context ratio 0.6")
    );
}

#[test]
fn hard_clear_disabled_only_soft_trims() {
    let settings = PruneSettings {
        hard_clear: HardClearSettings {
            enabled: false,
            ..HardClearSettings::default()
        },
        ..always()
    };
    let out = prune(rounds(8, 20_000), &settings, window(5_000));
    assert_eq!(out.report.cleared, 0);
    assert_eq!(out.report.trimmed, 5);
}

#[test]
fn prune_never_grows_a_result() {
    let mut messages = vec![
        user("go"),
        calls(&[("tiny", "read")]),
        result("tiny", "read", "ok"),
    ];
    messages.extend(rounds(4, 100).into_iter().skip(1));
    let before = estimate_messages_chars(&messages);
    let out = prune(messages, &clear_everything(), window(10));
    assert_eq!(result_text(results(&out.messages)[0]), "ok");
    assert!(estimate_messages_chars(&out.messages) <= before);
}

#[test]
fn seed_image_results_are_never_pruned() {
    // Seed 003 (`openclaw-seed`); OpenClaw 2026.9 trims them (see pipeline_openclaw.rs).
    let mut messages = vec![
        user("look"),
        calls(&[("shot", "screenshot")]),
        result_of(
            "shot",
            Some("screenshot"),
            vec![Block::text(lines(20_000)), image()],
        ),
    ];
    messages.extend(rounds(4, 20_000).into_iter().skip(1));
    let out = prune(messages, &clear_everything(), window(1_000));
    let shot = results(&out.messages)[0];
    assert_eq!(shot.content.len(), 2);
    assert_eq!(result_text(shot).len(), 20_000);
    assert_eq!(cleared_ids(&out.messages), vec!["c0"]);
}

fn named_rounds(names: &[&str]) -> Vec<Message> {
    let mut messages = vec![user("go")];
    for (index, name) in names.iter().enumerate() {
        let id = format!("{name}_{index}");
        messages.push(calls(&[(&id, name)]));
        messages.push(result(&id, name, &lines(10_000)));
    }
    messages.extend([assistant("a"), assistant("b"), assistant("c")]);
    messages
}

#[test]
fn deny_wins_over_allow() {
    let settings = PruneSettings {
        tools: ToolMatch {
            allow: vec!["read*".into(), "BASH".into()],
            deny: vec!["read_secret".into()],
        },
        ..clear_everything()
    };
    let names = ["read_file", "Bash", "read_secret", "grep"];
    let out = prune(named_rounds(&names), &settings, window(1_000));
    assert_eq!(cleared_ids(&out.messages), vec!["read_file_0", "Bash_1"]);
}

#[test]
fn tool_globs_are_case_insensitive_with_wildcards() {
    let tools = ToolMatch {
        allow: vec![],
        deny: vec!["Web_*".into(), "mcp__*__secret?".into()],
    };
    assert!(!tools.is_prunable("web_fetch"));
    assert!(!tools.is_prunable("WEB_SEARCH"));
    assert!(!tools.is_prunable("mcp__vault__secret1"));
    assert!(tools.is_prunable("mcp__vault__secrets_list"));
    assert!(tools.is_prunable("read"), "empty allow allows every tool");
    let only_read = ToolMatch {
        allow: vec!["read".into()],
        deny: vec![],
    };
    assert!(only_read.is_prunable(" READ "));
    assert!(!only_read.is_prunable("reader"));
    assert!(
        !only_read.is_prunable(""),
        "an unknown tool is not in the allow list"
    );
    let deny_all = ToolMatch {
        allow: vec!["*".into()],
        deny: vec!["*".into()],
    };
    assert!(!deny_all.is_prunable("read"));
}

#[test]
fn results_without_tool_name_take_the_call_name() {
    // Anthropic style: both results of a turn in one message, no tool names on results.
    let mut messages = vec![
        user("go"),
        calls(&[("r1", "read"), ("b1", "bash")]),
        skald_core::message::Message::new(
            Role::ToolResult,
            vec![
                result_block("r1", None, vec![Block::text(lines(10_000))]),
                result_block("b1", None, vec![Block::text(lines(10_000))]),
            ],
        ),
    ];
    messages.extend([assistant("a"), assistant("b"), assistant("c")]);
    let settings = PruneSettings {
        tools: ToolMatch {
            allow: vec![],
            deny: vec!["bash".into()],
        },
        ..clear_everything()
    };
    let out = prune(messages, &settings, window(1_000));
    assert_eq!(cleared_ids(&out.messages), vec!["r1"]);
    let change = &out.report.changes[0];
    assert_eq!((change.message_index, change.block_index), (2, 0));
    assert_eq!(change.tool_name.as_deref(), Some("read"));
}

#[test]
fn cache_ttl_mode_prunes_once_then_waits() {
    let settings = PruneSettings::default();
    assert_eq!(settings.mode, PruneMode::CacheTtl);
    let start = 1_700_000_000_000;
    let env = |now_ms: i64, clock: PruneClock| PruneEnv {
        context_window_tokens: 50_000,
        now_ms,
        clock,
    };
    // The cache was last touched 5 minutes ago: it has expired, prune.
    let first = prune(
        rounds(6, 20_000),
        &settings,
        env(start + 5 * MINUTE, PruneClock::touched(start)),
    );
    assert_eq!(first.report.trimmed, 3);
    assert_eq!(first.clock, PruneClock::touched(start + 5 * MINUTE));
    // One minute later the cache is warm again: nothing happens.
    let second = prune(
        rounds(6, 20_000),
        &settings,
        env(start + 6 * MINUTE, first.clock),
    );
    assert!(second.report.is_noop());
    assert!(second.report.skipped_by_ttl);
    assert_eq!(
        second.report.skipped,
        Some(PruneSkip::CacheWarm {
            elapsed_ms: MINUTE,
            ttl_ms: 300_000
        })
    );
    assert_eq!(second.clock, first.clock);
    // Once the TTL has passed again, pruning runs again.
    let third = prune(
        rounds(6, 20_000),
        &settings,
        env(start + 10 * MINUTE, second.clock),
    );
    assert_eq!(third.report.trimmed, 3);
    // Already-pruned messages need nothing more, so the clock is left alone.
    let again = prune(
        third.messages,
        &settings,
        env(start + 20 * MINUTE, third.clock),
    );
    assert!(again.report.is_noop());
    assert_eq!(again.clock, third.clock);
}

#[test]
fn cache_ttl_mode_never_prunes_without_a_cache_touch() {
    let out = prune(
        rounds(6, 20_000),
        &PruneSettings::default(),
        PruneEnv {
            context_window_tokens: 50_000,
            now_ms: 1_000_000,
            clock: PruneClock::default(),
        },
    );
    assert_eq!(out.report.skipped, Some(PruneSkip::NoCacheTouch));
    assert!(out.report.skipped_by_ttl);
    assert!(out.report.is_noop());
}

#[test]
fn always_mode_ignores_the_clock() {
    let out = prune(rounds(6, 20_000), &always(), window(50_000));
    assert_eq!(out.report.trimmed, 3);
    assert_eq!(out.clock, PruneClock::touched(0));
}

#[test]
fn keep_originals_returns_refs_and_names_them() {
    let settings = PruneSettings {
        keep_originals: true,
        ..always()
    };
    let original = lines(20_000);
    // Soft trim: the note names the ref of the original.
    let out = prune(rounds(6, 20_000), &settings, window(50_000));
    assert_eq!(out.new_refs.len(), 3);
    let first = &out.new_refs[0];
    assert_eq!(
        first.payload,
        RefPayload::new(vec![Block::text(original.clone())])
    );
    assert_eq!(first.id, first.payload.id());
    let trimmed = result_text(results(&out.messages)[0]);
    assert_eq!(ref_ids_in(&trimmed), vec![first.id.clone()]);
    assert!(trimmed.contains("call fetch_original_data"));
    assert_eq!(
        out.report.changes[0].ref_id.as_deref(),
        Some(first.id.as_str())
    );

    // Hard clear: the placeholder is a ref placeholder.
    let settings = PruneSettings {
        keep_originals: true,
        ..clear_everything()
    };
    let out = prune(rounds(4, 20_000), &settings, window(1_000));
    assert_eq!(out.new_refs.len(), 1);
    let cleared = result_text(results(&out.messages)[0]);
    let id = &out.new_refs[0].id;
    assert_eq!(RefId::parse(&cleared).unwrap(), *id);
    assert!(cleared.starts_with("[REF_ID: "));
    assert!(cleared.contains("(Summary: old read result of 20000 chars cleared from context"));
    assert_eq!(out.new_refs[0].payload.text(), original);
}

#[test]
fn soft_trim_then_clear_in_one_prune_reuses_the_original_ref() {
    let settings = PruneSettings {
        keep_originals: true,
        soft_trim_ratio: 0.0,
        hard_clear_ratio: 0.0,
        min_prunable_tool_chars: 0,
        ..always()
    };
    let mut seen = Vec::new();
    let out = prune_with(rounds(4, 20_000), &settings, window(1_000), &mut |result| {
        seen.push((result.call_id.to_owned(), result.chars));
        format!("custom digest of {}", result.tool_name.unwrap_or("?"))
    });
    assert_eq!(
        seen,
        vec![("c0".to_owned(), 20_000)],
        "the summary sees the original"
    );
    assert_eq!(
        out.new_refs.len(),
        1,
        "one ref: the original, not the trimmed text"
    );
    let cleared = result_text(results(&out.messages)[0]);
    assert_eq!(
        cleared,
        refs::placeholder(&out.new_refs[0].id, "custom digest of read")
    );
    let actions: Vec<_> = out.report.changes.iter().map(|c| c.action).collect();
    assert_eq!(actions, vec![PruneAction::Trimmed, PruneAction::Cleared]);
    assert_eq!((out.report.trimmed, out.report.cleared), (1, 1));
}

#[test]
fn default_summary_names_tool_and_size() {
    let summary = default_cleared_summary(&skald_core::pipeline::ClearedResult {
        call_id: "c",
        tool_name: None,
        content: &[],
        chars: 12,
    });
    assert_eq!(
        summary,
        "old tool result of 12 chars cleared from context; fetch_original_data returns it"
    );
}

#[test]
fn prune_survives_empty_and_odd_content() {
    let mut messages = vec![
        user("go"),
        calls(&[("e", "read"), ("o", "read")]),
        result_of("e", Some("read"), vec![]),
        result_of(
            "o",
            None,
            vec![Block::Opaque(
                serde_json::json!({"type": "document", "x": null}),
            )],
        ),
        Message::new(Role::ToolResult, vec![]),
        Message::new(Role::Custom("note".into()), vec![]),
    ];
    messages.extend([assistant("a"), assistant("b"), assistant("c")]);
    let out = prune(messages.clone(), &clear_everything(), window(1));
    assert_eq!(out.messages.len(), messages.len());
    pairing(&out.messages).unwrap();
}

#[test]
fn prune_settings_load_with_defaults_and_reject_unknown_fields() {
    let settings: PruneSettings = serde_json::from_str(
        r#"{"mode": "always", "keep_last_assistants": 2,
            "soft_trim": {"max_chars": 8000},
            "hard_clear": {"placeholder": "[cleared]"},
            "tools": {"deny": ["bash"]},
            "keep_originals": true}"#,
    )
    .unwrap();
    assert_eq!(settings.mode, PruneMode::Always);
    assert_eq!(settings.keep_last_assistants, 2);
    assert_eq!(settings.soft_trim.max_chars, 8_000);
    assert_eq!(settings.soft_trim.head_chars, 1_500);
    assert!(settings.hard_clear.enabled);
    assert_eq!(settings.ttl_ms, 300_000);
    assert_eq!(settings.tools.deny, vec!["bash"]);
    settings.validate().unwrap();

    let defaults: PruneSettings = serde_json::from_str("{}").unwrap();
    assert_eq!(defaults, PruneSettings::default());
    assert_eq!(defaults.mode, PruneMode::CacheTtl);
    assert_eq!(
        (defaults.soft_trim_ratio, defaults.hard_clear_ratio),
        (0.3, 0.5)
    );
    assert_eq!(defaults.min_prunable_tool_chars, 50_000);
    assert_eq!(
        defaults.hard_clear.placeholder,
        "[Old tool result content cleared]"
    );
    assert!(!defaults.keep_originals);
    defaults.validate().unwrap();
    let off: PruneSettings = serde_json::from_str(r#"{"mode": "off"}"#).unwrap();
    assert_eq!(off.mode, PruneMode::Off);

    for bad in [
        r#"{"soft_trim_ratios": 0.3}"#,
        r#"{"soft_trim": {"max": 1}}"#,
        r#"{"mode": "sometimes"}"#,
    ] {
        assert!(serde_json::from_str::<PruneSettings>(bad).is_err(), "{bad}");
    }
}

#[test]
fn prune_settings_validate_rejects_nonsense() {
    let check = |settings: PruneSettings, expected: PruneSettingsError| {
        assert_eq!(settings.validate().unwrap_err(), expected);
    };
    check(
        PruneSettings {
            soft_trim_ratio: 1.5,
            ..PruneSettings::default()
        },
        PruneSettingsError::Ratio {
            field: "soft_trim_ratio",
            found: 1.5,
        },
    );
    let nan = PruneSettings {
        hard_clear_ratio: f64::NAN,
        ..PruneSettings::default()
    };
    assert!(matches!(
        nan.validate(),
        Err(PruneSettingsError::Ratio {
            field: "hard_clear_ratio",
            ..
        })
    ));
    check(
        PruneSettings {
            soft_trim_ratio: 0.6,
            ..PruneSettings::default()
        },
        PruneSettingsError::RatioOrder {
            soft: 0.6,
            hard: 0.5,
        },
    );
    check(
        PruneSettings {
            ttl_ms: 0,
            ..PruneSettings::default()
        },
        PruneSettingsError::ZeroTtl,
    );
    check(
        PruneSettings {
            soft_trim: SoftTrimSettings {
                max_chars: 3_000,
                ..SoftTrimSettings::default()
            },
            ..PruneSettings::default()
        },
        PruneSettingsError::SoftTrimSizes {
            kept: 3_000,
            max_chars: 3_000,
        },
    );
    check(
        PruneSettings {
            hard_clear: HardClearSettings {
                enabled: true,
                placeholder: " ".into(),
            },
            ..PruneSettings::default()
        },
        PruneSettingsError::EmptyPlaceholder,
    );
    check(
        PruneSettings {
            tools: ToolMatch {
                allow: vec!["read".into()],
                deny: vec!["bash".into(), "".into()],
            },
            ..PruneSettings::default()
        },
        PruneSettingsError::EmptyGlob {
            list: "deny",
            index: 1,
        },
    );
    let message = PruneSettings {
        soft_trim_ratio: -0.1,
        ..PruneSettings::default()
    }
    .validate()
    .unwrap_err()
    .to_string();
    assert_eq!(
        message,
        "soft_trim_ratio: expected a ratio between 0 and 1, found -0.1"
    );
    assert!(
        PruneSettings {
            ttl_ms: 0,
            mode: PruneMode::Always,
            ..PruneSettings::default()
        }
        .validate()
        .is_ok()
    );
}

/// A small conversation and scaled-down settings, so the snapshot shows every rule at once:
/// a protected bootstrap read, a trimmed result, a cleared result, an image result, a denied tool
/// and the protected tail.
fn snapshot_conversation() -> Vec<Message> {
    vec![
        system("You are a careful agent."),
        calls(&[("boot", "read")]),
        result("boot", "read", &lines(300)),
        user("Why does the build fail?"),
        calls(&[("c1", "bash")]),
        result("c1", "bash", &lines(340)),
        calls(&[("c2", "read")]),
        result("c2", "read", &lines(600)),
        calls(&[("c3", "screenshot")]),
        result_of(
            "c3",
            Some("screenshot"),
            vec![Block::text(lines(300)), image()],
        ),
        calls(&[("c4", "secret_store")]),
        result("c4", "secret_store", &lines(300)),
        calls(&[("c5", "read")]),
        result("c5", "read", &lines(300)),
        assistant("The linker cannot find libfoo."),
    ]
}

fn snapshot_settings() -> PruneSettings {
    PruneSettings {
        keep_last_assistants: 2,
        soft_trim_ratio: 0.3,
        hard_clear_ratio: 0.5,
        min_prunable_tool_chars: 500,
        soft_trim: SoftTrimSettings {
            max_chars: 350,
            head_chars: 64,
            tail_chars: 64,
        },
        tools: ToolMatch {
            allow: vec![],
            deny: vec!["secret_*".into()],
        },
        ..always()
    }
}

#[test]
fn prune_layout_snapshot() {
    let messages = snapshot_conversation();
    let out = prune(messages, &snapshot_settings(), window(5_050));
    assert_eq!((out.report.trimmed, out.report.cleared), (1, 1));
    insta::assert_snapshot!(render(&out.messages));
}

#[test]
fn prune_layout_snapshot_keeping_originals() {
    let settings = PruneSettings {
        keep_originals: true,
        ..snapshot_settings()
    };
    // Ref placeholders are longer than the plain one, so the same cut needs a slightly larger
    // window.
    let out = prune(snapshot_conversation(), &settings, window(5_130));
    assert_eq!((out.report.trimmed, out.report.cleared), (1, 1));
    assert_eq!(out.new_refs.len(), 2);
    insta::assert_snapshot!(render(&out.messages));
}

#[test]
fn cut_refs_stay_named_without_keep_originals() {
    let id = RefPayload::new(vec![Block::text("stored elsewhere")]).id();
    let text = format!(
        "{}\n{}\n{}",
        lines(8_000),
        refs::placeholder(&id, "log: 9000 lines"),
        lines(8_000)
    );
    let messages = || {
        let mut messages = vec![
            user("go"),
            calls(&[("x", "read")]),
            result("x", "read", &text),
        ];
        messages.extend([assistant("a"), assistant("b"), assistant("c")]);
        messages
    };
    let trimmed = prune(messages(), &always(), window(5_000));
    assert_eq!(trimmed.report.trimmed, 1);
    let kept = result_text(results(&trimmed.messages)[0]);
    assert!(
        kept.ends_with(&format!("Refs in the removed part: [REF_ID: {id}]")),
        "{kept}"
    );
    assert!(trimmed.new_refs.is_empty());

    let cleared = prune(messages(), &clear_everything(), window(5_000));
    assert_eq!(
        result_text(results(&cleared.messages)[0]),
        format!("[Old tool result content cleared] Refs in the removed part: [REF_ID: {id}]")
    );
}
