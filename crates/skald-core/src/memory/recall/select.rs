//! Which relevant memories recall shows and at which level: [`select_memories`] fills the token
//! budget tier by tier (every memory at L0, then deeper in rank order) and says why each other
//! candidate was dropped ([`DropReason`]); [`memory_json`] is one memory as a tool result shows
//! it.

use serde::Serialize;
use serde_json::{Value, json};

use super::{RecallCandidate, RecallLevel, RecallSettings, Relevance};
use crate::memory::query::QueryPlan;
use crate::tokens::CHARS_PER_TOKEN;

/// Why a candidate was not injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// Neither relevance measure cleared its threshold.
    BelowThreshold,
    /// `max_results` relevant memories were already kept.
    OverLimit,
    /// Its abstract did not fit in what was left of the token budget.
    OverBudget,
}

/// A candidate recall shows, at the level that fit.
#[derive(Debug, Clone, PartialEq)]
pub struct SelectedMemory {
    /// The memory.
    pub candidate: RecallCandidate,
    /// The deepest level that fit the budget.
    pub level: RecallLevel,
    /// Why it was kept.
    pub relevance: Relevance,
}

impl SelectedMemory {
    /// The memory as the tool result shows it.
    pub fn to_json(&self) -> Value {
        memory_json(&self.candidate, self.level, Some(self.relevance.score()))
    }
}

/// What [`select_memories`] decided.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Selection {
    /// The memories shown, in rank order.
    pub kept: Vec<SelectedMemory>,
    /// Each dropped candidate's URI, why, and its relevance.
    pub dropped: Vec<(String, DropReason, Relevance)>,
    /// Estimated tokens of the kept memories as rendered.
    pub tokens: u64,
}

/// The JSON object of one memory in a tool result: URI, category, score (when given), the text
/// at `level` under its field name, and the creation date.
pub fn memory_json(candidate: &RecallCandidate, level: RecallLevel, score: Option<f64>) -> Value {
    let mut object = serde_json::Map::new();
    object.insert("uri".into(), json!(candidate.uri));
    object.insert("category".into(), json!(candidate.category));
    if let Some(score) = score {
        object.insert("score".into(), json!(score));
    }
    object.insert(level.field().into(), json!(candidate.text(level)));
    object.insert(
        "created_at".into(),
        json!(format_date(candidate.created_at_ms)),
    );
    Value::Object(object)
}

/// `YYYY-MM-DD` (UTC) of a time in ms since the Unix epoch.
pub fn format_date(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|time| time.format("%Y-%m-%d").to_string())
        .unwrap_or_default()
}

fn json_tokens(value: &Value) -> u64 {
    let chars = crate::tokens::estimate::json_estimate_chars(value);
    chars.div_ceil(CHARS_PER_TOKEN) as u64
}

/// Chooses what recall injects from `candidates` (best first): relevant ones (see the module
/// docs) up to `max_results`, then filled into `max_tokens` tier by tier without cutting any
/// memory.
pub fn select_memories(
    candidates: &[RecallCandidate],
    query: &str,
    settings: &RecallSettings,
) -> Selection {
    let plan = QueryPlan::new(query);
    let mut selection = Selection::default();
    let mut relevant: Vec<(RecallCandidate, Relevance)> = Vec::new();
    for candidate in candidates {
        let relevance = Relevance::of(candidate, plan.terms());
        if !relevance.passes(settings) {
            selection
                .dropped
                .push((candidate.uri.clone(), DropReason::BelowThreshold, relevance));
        } else if relevant.len() >= settings.max_results {
            selection
                .dropped
                .push((candidate.uri.clone(), DropReason::OverLimit, relevance));
        } else {
            relevant.push((candidate.clone(), relevance));
        }
    }
    let mut used = 0u64;
    let mut kept: Vec<SelectedMemory> = Vec::new();
    for (candidate, relevance) in relevant {
        let entry = SelectedMemory {
            candidate,
            level: RecallLevel::L0,
            relevance,
        };
        let cost = json_tokens(&entry.to_json());
        if used + cost <= settings.max_tokens {
            used += cost;
            kept.push(entry);
        } else {
            selection.dropped.push((
                entry.candidate.uri.clone(),
                DropReason::OverBudget,
                relevance,
            ));
        }
    }
    for level in [RecallLevel::L1, RecallLevel::L2] {
        if level > settings.level {
            break;
        }
        for entry in &mut kept {
            if entry.candidate.text(level) == entry.candidate.text(entry.level) {
                // Same text under a deeper name: deepen for free, so the model knows it has
                // everything.
                if level == RecallLevel::L2 || entry.candidate.l2 == entry.candidate.l1 {
                    entry.level = level;
                }
                continue;
            }
            let before = json_tokens(&entry.to_json());
            let deeper = SelectedMemory {
                level,
                ..entry.clone()
            };
            let after = json_tokens(&deeper.to_json());
            if used - before + after <= settings.max_tokens {
                used = used - before + after;
                *entry = deeper;
            }
        }
    }
    selection.tokens = used;
    selection.kept = kept;
    selection
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::super::test_support::candidate;
    use super::*;

    #[test]
    fn threshold_drops_memories_that_share_one_word_of_a_long_query() {
        let settings = RecallSettings::default();
        let candidates = vec![
            candidate(
                "viking://user/a/memories/entities/db.md",
                "Billing runs on Postgres 15.",
                "Billing runs on Postgres 15.",
                "Billing runs on Postgres 15.",
            ),
            candidate(
                "viking://user/a/memories/events/lunch.md",
                "Lunch with the billing team.",
                "Lunch with the billing team.",
                "Lunch with the billing team.",
            ),
        ];
        let selection = select_memories(
            &candidates,
            "which postgres version does billing run",
            &settings,
        );
        assert_eq!(selection.kept.len(), 1);
        assert_eq!(
            selection.kept[0].candidate.uri,
            "viking://user/a/memories/entities/db.md"
        );
        assert_eq!(selection.dropped.len(), 1);
        assert_eq!(selection.dropped[0].1, DropReason::BelowThreshold);
        // A semantic match with no shared word is kept by its cosine.
        let mut semantic = candidates[1].clone();
        semantic.cosine = Some(0.6);
        let selection = select_memories(
            &[semantic],
            "which postgres version does billing run",
            &settings,
        );
        assert_eq!(selection.kept.len(), 1);
        assert_eq!(selection.kept[0].relevance.score(), 0.6);
    }

    #[test]
    fn budget_fills_tier_by_tier_without_cutting_a_memory() {
        let long = "postgres billing tuning ".repeat(40);
        let candidates: Vec<RecallCandidate> = (0..3)
            .map(|n| {
                candidate(
                    &format!("viking://user/a/memories/entities/db{n}.md"),
                    "Postgres billing tuning notes.",
                    &long,
                    &long,
                )
            })
            .collect();
        let settings = RecallSettings {
            max_tokens: 400,
            ..RecallSettings::default()
        };
        let selection = select_memories(&candidates, "postgres billing tuning", &settings);
        assert_eq!(selection.kept.len(), 3);
        assert!(selection.tokens <= 400);
        // The first is deepened to its overview; the others stay at the abstract.
        assert_eq!(selection.kept[0].level, RecallLevel::L1);
        assert_eq!(selection.kept[1].level, RecallLevel::L0);
        let tiny = RecallSettings {
            max_tokens: 50,
            ..RecallSettings::default()
        };
        let selection = select_memories(&candidates, "postgres billing tuning", &tiny);
        assert_eq!(selection.kept.len(), 1);
        assert_eq!(
            selection
                .dropped
                .iter()
                .filter(|d| d.1 == DropReason::OverBudget)
                .count(),
            2
        );
    }

    #[test]
    fn level_setting_caps_the_deepest_level_shown() {
        let c = candidate(
            "viking://user/a/memories/entities/db.md",
            "Postgres.",
            "Postgres 15 on billing.",
            "Postgres 15 on billing, tuned in May.",
        );
        for (level, field) in [
            (RecallLevel::L0, "abstract"),
            (RecallLevel::L1, "overview"),
            (RecallLevel::L2, "content"),
        ] {
            let settings = RecallSettings {
                level,
                ..RecallSettings::default()
            };
            let selection =
                select_memories(std::slice::from_ref(&c), "postgres billing", &settings);
            assert_eq!(selection.kept[0].level, level);
            assert!(selection.kept[0].to_json().get(field).is_some(), "{field}");
        }
    }
}
