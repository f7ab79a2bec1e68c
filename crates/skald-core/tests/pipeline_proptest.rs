//! Property tests over arbitrary well-formed transcripts and arbitrary (even unvalidated)
//! settings: the stages never panic, never make the context longer, and never separate a tool
//! call from its result; truncation never exceeds its budget and is idempotent.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod pipeline_common;

use pipeline_common::*;
use proptest::prelude::*;
use skald_core::message::{Message, Role};
use skald_core::pipeline::prune::{
    HardClearSettings, PruneClock, PruneEnv, PruneMode, PruneSettings, PruneSkip, SoftTrimSettings,
    ToolMatch, prune,
};
use skald_core::pipeline::truncate::{TruncateSettings, result_budget_chars, truncate};
use skald_core::pipeline::turn_limit::{TurnLimitSettings, limit_turns};
use skald_core::refs::ref_ids_in;
use skald_core::tokens::estimate_messages_chars;

fn arb_prune_settings() -> impl Strategy<Value = PruneSettings> {
    (
        (0usize..5, -0.5f64..1.5, -0.5f64..1.5, 0usize..80_000),
        (0usize..10_000, 0usize..3_000, 0usize..3_000),
        (any::<bool>(), any::<bool>(), any::<bool>()),
    )
        .prop_map(
            |(
                (keep_last_assistants, soft_trim_ratio, hard_clear_ratio, min_prunable_tool_chars),
                (max_chars, head_chars, tail_chars),
                (enabled, keep_originals, deny_bash),
            )| PruneSettings {
                mode: PruneMode::Always,
                keep_last_assistants,
                soft_trim_ratio,
                hard_clear_ratio,
                min_prunable_tool_chars,
                soft_trim: SoftTrimSettings {
                    max_chars,
                    head_chars,
                    tail_chars,
                },
                hard_clear: HardClearSettings {
                    enabled,
                    ..HardClearSettings::default()
                },
                tools: ToolMatch {
                    allow: vec![],
                    deny: if deny_bash {
                        vec!["BASH".into()]
                    } else {
                        vec![]
                    },
                },
                keep_originals,
                ..PruneSettings::default()
            },
        )
}

fn check_refs(new_refs: &[skald_core::refs::NewRef]) -> Result<(), TestCaseError> {
    for new_ref in new_refs {
        prop_assert_eq!(&new_ref.id, &new_ref.payload.id());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn turn_limit_keeps_pairing_and_never_grows(
        messages in arb_transcript(),
        limit in 0usize..6,
        batch in 0usize..3,
    ) {
        pairing(&messages).unwrap();
        let before = estimate_messages_chars(&messages);
        let users = messages.iter().filter(|m| m.role == Role::User).count();
        let settings = TurnLimitSettings { limit: Some(limit), batch: batch.into() };
        let (out, report) = limit_turns(messages, &settings);
        prop_assert!(estimate_messages_chars(&out) <= before);
        prop_assert!(pairing(&out).is_ok(), "{:?}", pairing(&out));
        let kept = out.iter().filter(|m| m.role == Role::User).count();
        prop_assert_eq!(kept, users - report.turns_dropped);
        if limit > 0 && users > limit {
            prop_assert!(kept >= limit && kept <= limit + batch, "kept {}", kept);
        } else {
            prop_assert_eq!(kept, users);
        }
        if report.messages_dropped > 0 {
            let first = out.iter().find(|m| m.role != Role::System).unwrap();
            prop_assert_eq!(&first.role, &Role::User);
        }
    }

    #[test]
    fn prune_never_panics_grows_or_breaks_pairing(
        messages in arb_transcript(),
        settings in arb_prune_settings(),
        window in 0u64..200_000,
    ) {
        let before = estimate_messages_chars(&messages);
        let out = prune(messages, &settings, PruneEnv {
            context_window_tokens: window,
            now_ms: 7,
            clock: PruneClock::default(),
        });
        let after = estimate_messages_chars(&out.messages);
        prop_assert!(after <= before, "{} > {}", after, before);
        prop_assert!(pairing(&out.messages).is_ok(), "{:?}", pairing(&out.messages));
        if matches!(out.report.skipped, None | Some(PruneSkip::BelowSoftTrimRatio)) && window > 0 {
            prop_assert_eq!(out.report.chars_before, before);
            prop_assert_eq!(out.report.chars_after, after, "the report's running total is exact");
        }
        prop_assert_eq!(out.report.trimmed + out.report.cleared, out.report.changes.len());
        if settings.keep_originals {
            check_refs(&out.new_refs)?;
            // Every ref handed out is named in the context.
            let texts: String = results(&out.messages).iter().map(|r| result_text(r)).collect();
            for new_ref in &out.new_refs {
                prop_assert!(ref_ids_in(&texts).contains(&new_ref.id));
            }
        } else {
            prop_assert!(out.new_refs.is_empty());
        }
        if out.report.changes.is_empty() {
            prop_assert_eq!(out.clock, PruneClock::default());
        } else {
            prop_assert_eq!(out.clock, PruneClock::touched(7));
        }
    }

    #[test]
    fn truncate_never_exceeds_budget_grows_or_breaks_pairing(
        messages in arb_transcript(),
        window in 0u64..120_000,
        min_keep in 0usize..3_000,
    ) {
        let settings = TruncateSettings { min_keep_chars: min_keep, ..TruncateSettings::default() };
        let before = estimate_messages_chars(&messages);
        let out = truncate(messages, &settings, window);
        prop_assert!(estimate_messages_chars(&out.messages) <= before);
        prop_assert!(pairing(&out.messages).is_ok(), "{:?}", pairing(&out.messages));
        check_refs(&out.new_refs)?;
        prop_assert_eq!(out.new_refs.len(), out.report.truncated);
        if window > 0 {
            let budget = result_budget_chars(window, &settings);
            for result in results(&out.messages) {
                let chars = text_weight(result);
                prop_assert!(chars <= budget, "{} > {}", chars, budget);
            }
        }
        let again = truncate(out.messages.clone(), &settings, window);
        prop_assert!(again.report.is_noop());
        prop_assert_eq!(again.messages, out.messages);
    }

    #[test]
    fn whole_pipeline_keeps_pairing(
        messages in arb_transcript(),
        window in 1u64..100_000,
    ) {
        let before = estimate_messages_chars(&messages);
        let (messages, _) = limit_turns(messages, &TurnLimitSettings { limit: Some(3), batch: 1.into() });
        let settings = PruneSettings {
            mode: PruneMode::Always,
            keep_originals: true,
            ..PruneSettings::default()
        };
        let env = PruneEnv { context_window_tokens: window, now_ms: 0, clock: PruneClock::default() };
        let pruned = prune(messages, &settings, env);
        let truncated = truncate(pruned.messages, &TruncateSettings::default(), window);
        let out: Vec<Message> = truncated.messages;
        prop_assert!(estimate_messages_chars(&out) <= before);
        prop_assert!(pairing(&out).is_ok(), "{:?}", pairing(&out));
    }
}
