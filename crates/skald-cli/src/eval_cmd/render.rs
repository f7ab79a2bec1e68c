//! The terminal form of a LoCoMo report: recall and injection precision by question category
//! and overall as a table, and what the table does not show on a line under it.

use super::evaluate::{LocomoReport, RecallFigures};
use crate::output;

/// What the table does not show, on a line under it.
pub(super) fn summary_line(report: &LocomoReport) -> String {
    format!(
        "{} conversations, {} turns ({} stored, {} exact + {} near duplicates merged); \
         {} questions scored, {} without evidence; search p50 {:.2} ms, p95 {:.2} ms \
         (depth {}); ingest {:.0} memories/s; {}{}; injection: turn precision {:.3}, \
         floor min_text_relevance {} and min_term_coverage {}, at most {} memories in {} tokens",
        report.conversations,
        report.turns,
        report.memories_stored,
        report.merged_exact,
        report.merged_near,
        report.questions_scored,
        report.questions_without_evidence,
        report.search_p50_ms,
        report.search_p95_ms,
        report.search_depth,
        report.ingest_memories_per_s,
        report.mode,
        report
            .embedder
            .as_deref()
            .map_or_else(String::new, |name| format!(" ({name})")),
        report.injection_turn_precision,
        report.injection_min_text_relevance,
        report.injection_min_term_coverage,
        report.injection_max_results,
        report.injection_max_tokens,
    )
}

pub(super) fn render_table(report: &LocomoReport) -> comfy_table::Table {
    let mut table = output::table(&[
        "questions",
        "n",
        "session R@1",
        "session R@5",
        "session R@10",
        "turn R@1",
        "turn R@5",
        "turn R@10",
        "injected precision",
        "nothing injected",
    ]);
    let row = |label: String, figures: &RecallFigures| {
        vec![
            label,
            figures.questions.to_string(),
            format!("{:.3}", figures.session_recall_at_1),
            format!("{:.3}", figures.session_recall_at_5),
            format!("{:.3}", figures.session_recall_at_10),
            format!("{:.3}", figures.turn_recall_at_1),
            format!("{:.3}", figures.turn_recall_at_5),
            format!("{:.3}", figures.turn_recall_at_10),
            format!(
                "{:.3} of {}",
                figures.injection_precision, figures.memories_injected
            ),
            figures.nothing_injected.to_string(),
        ]
    };
    for category in &report.by_category {
        table.add_row(row(
            format!("{} {}", category.category, category.name),
            &category.recall,
        ));
    }
    let overall = RecallFigures {
        questions: report.questions_scored,
        session_recall_at_1: report.session_recall_at_1,
        session_recall_at_5: report.session_recall_at_5,
        session_recall_at_10: report.session_recall_at_10,
        turn_recall_at_1: report.turn_recall_at_1,
        turn_recall_at_5: report.turn_recall_at_5,
        turn_recall_at_10: report.turn_recall_at_10,
        turn_any_at_10: report.turn_any_at_10,
        turn_all_at_10: report.turn_all_at_10,
        injection_precision: report.injection_precision,
        injection_turn_precision: report.injection_turn_precision,
        memories_injected: report.memories_injected,
        nothing_injected: report.questions_nothing_injected,
    };
    table.add_row(row("all".to_owned(), &overall));
    table
}
