//! OpenClaw 2026.9's own cut (`truncateToolResultText`), for policies that do not keep originals:
//! nothing is stored, and the text ends with OpenClaw's notice
//! `[... N more characters truncated; rerun with narrower args if needed]` instead of a ref.
//!
//! The rules are OpenClaw's: the kept part is the budget minus the notice, at least
//! `min_keep` characters; when the last 2,000 characters look important (the same words as
//! skald's cut) and the kept part is over twice `min_keep`, the tail takes 30% of it (at most
//! 4,000) and the head the rest minus the middle marker; a head is cut back to its last newline
//! when that lies in its last 20%, a tail starts after its first newline when that lies in its
//! first 20%; the notice is appended, and the kept text shrinks until text and notice fit the
//! budget. Characters are estimator characters (CJK weighs 4), as OpenClaw's
//! `estimateStringChars`; the omitted count is in those characters too (OpenClaw's is UTF-16
//! code units), so ASCII output is byte-identical.

use crate::tokens::estimate_string_chars;

use super::{has_important_tail, prefix_end, suffix_start};

/// What OpenClaw puts between the head and the tail of a cut.
pub const MIDDLE_OMISSION_MARKER: &str =
    "\n\n⚠️ [... middle content omitted — showing head and tail ...]\n\n";

/// OpenClaw's notice ending a cut text.
pub fn notice(omitted: usize) -> String {
    format!(
        "[... {} more characters truncated; rerun with narrower args if needed]",
        omitted.max(1)
    )
}

/// Length of the notice for any omitted count up to `omitted`.
pub(super) fn notice_len(omitted: usize) -> usize {
    notice(omitted).len()
}

/// `text` cut to at most `max_chars` characters, notice included, and whether a tail was kept;
/// `None` when it fits.
pub(super) fn cut_text(text: &str, max_chars: usize, min_keep: usize) -> Option<(String, bool)> {
    let total = estimate_string_chars(text);
    if total <= max_chars {
        return None;
    }
    let min_keep = min_keep.min(max_chars.saturating_sub(notice_len(1)));
    let initial = estimate_string_chars(slice_head(text, max_chars));
    let budget = min_keep.max(max_chars.saturating_sub(notice_len(total - initial)));
    let middle = estimate_string_chars(MIDDLE_OMISSION_MARKER);
    if has_important_tail(text) && budget > min_keep.saturating_mul(2) {
        let tail_budget = ((budget as f64 * 0.3).floor() as usize).min(4_000);
        let head_budget = budget.saturating_sub(tail_budget).saturating_sub(middle);
        if head_budget > min_keep {
            let head = cut_back_to_newline(slice_head(text, head_budget));
            let mut tail = slice_tail(text, tail_budget);
            if let Some(newline) = tail.find('\n') {
                if (newline as f64) < tail.len() as f64 * 0.2 {
                    tail = tail.get(newline + 1..).unwrap_or_default();
                }
            }
            if head.len() + tail.len() < text.len() {
                let kept = format!("{head}{MIDDLE_OMISSION_MARKER}{tail}");
                let omitted = total - estimate_string_chars(head) - estimate_string_chars(tail);
                return Some((bounded(kept, omitted, max_chars), true));
            }
        }
    }
    let kept = cut_back_to_newline(slice_head(text, budget));
    let omitted = total - estimate_string_chars(kept);
    Some((bounded(kept.to_owned(), omitted, max_chars), false))
}

/// `kept` plus the notice, with `kept` shortened until both fit `max_chars`
/// (`appendBoundedTruncationSuffix`).
fn bounded(mut kept: String, omitted: usize, max_chars: usize) -> String {
    let kept_chars = estimate_string_chars(&kept);
    loop {
        let shrunk = kept_chars.saturating_sub(estimate_string_chars(&kept));
        let suffix = notice(omitted + shrunk);
        let suffix_chars = suffix.len();
        if suffix_chars >= max_chars {
            return slice_head(&notice(omitted), max_chars).to_owned();
        }
        let next = slice_head(&kept, max_chars - suffix_chars);
        if next.len() == kept.len() && estimate_string_chars(next) + suffix_chars <= max_chars {
            return kept + &suffix;
        }
        if next.is_empty() && kept.is_empty() {
            return slice_head(&suffix, max_chars).to_owned();
        }
        kept = next.to_owned();
    }
}

fn slice_head(text: &str, budget: usize) -> &str {
    text.get(..prefix_end(text, budget)).unwrap_or_default()
}

fn slice_tail(text: &str, budget: usize) -> &str {
    text.get(suffix_start(text, budget)..).unwrap_or_default()
}

/// `head` cut at its last newline when that lies in its last 20%.
fn cut_back_to_newline(head: &str) -> &str {
    match head.rfind('\n') {
        Some(newline) if newline as f64 > head.len() as f64 * 0.8 => {
            head.get(..newline).unwrap_or(head)
        }
        Some(_) | None => head,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn notice_cut_fits_the_budget_and_counts_what_it_omits() {
        let text = "x".repeat(10_000);
        let (cut, tail) = cut_text(&text, 3_000, 2_000).unwrap();
        assert!(!tail);
        assert!(cut.len() <= 3_000, "{}", cut.len());
        let kept = cut.find("[... ").unwrap();
        assert_eq!(
            &cut[kept..],
            notice(10_000 - kept),
            "the notice names the characters cut"
        );
        assert!(cut_text("short", 3_000, 2_000).is_none());
    }

    #[test]
    fn notice_cut_keeps_an_error_tail_behind_the_middle_marker() {
        let text = format!("{}\nerror: it failed", "line\n".repeat(4_000));
        let (cut, tail) = cut_text(&text, 10_000, 2_000).unwrap();
        assert!(tail);
        assert!(cut.contains(MIDDLE_OMISSION_MARKER));
        assert!(cut.contains("error: it failed"));
        assert!(estimate_string_chars(&cut) <= 10_000);
    }
}
