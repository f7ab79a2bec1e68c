//! Prefix breaks: calls whose request does not start with the previous call's request (its
//! leading tools and system addition, then its messages) beyond the newest messages — what makes
//! a provider's prompt cache write the rest again — each with the stage that caused it.

use std::collections::HashSet;

use serde::Serialize;
use skald_core::memory::recall::SIMULATED_CALL_PREFIX;
use skald_core::message::Message;

use crate::AssembleReport;

/// How many calls broke the previous call's prefix, by cause.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PrefixBreaks {
    /// Calls whose request does not start with the previous call's.
    pub total: u64,
    /// An output or a tool call's long arguments offloaded this call that an earlier request
    /// held whole (or the fetch tool and the REF_ID instruction appearing in front with the
    /// first offload).
    pub offload: u64,
    /// A result pruning trimmed or cleared this call.
    pub prune: u64,
    /// A result truncation cut this call.
    pub truncation: u64,
    /// Memory recall: the previous call's recalled memories gone from where they were, this
    /// call's put in their place, or recall's part of skald's system addition changed.
    pub recall: u64,
    /// skald compacted the session before this call.
    pub compaction: u64,
    /// Memory's upload dropped a range it had uploaded from the context (seed 002's second
    /// threshold) before this call.
    pub upload: u64,
    /// Anything else (the transcript's own history changing, a host's own compaction, a turn
    /// limit).
    pub other: u64,
}

impl PrefixBreaks {
    /// Adds another transcript's breaks.
    pub fn absorb(&mut self, other: PrefixBreaks) {
        self.total += other.total;
        self.offload += other.offload;
        self.prune += other.prune;
        self.truncation += other.truncation;
        self.recall += other.recall;
        self.compaction += other.compaction;
        self.upload += other.upload;
        self.other += other.other;
    }
}

/// What one call's request was, for the next call to compare with.
#[derive(Debug, Default)]
pub(super) struct PrefixTracker {
    previous: Option<Sent>,
    pub(super) breaks: PrefixBreaks,
}

#[derive(Debug)]
struct Sent {
    leading: Vec<u128>,
    messages: Vec<u128>,
    /// Where the request held recalled memories (recall's simulated call and its result).
    recalled_at: HashSet<usize>,
    offloaded: HashSet<String>,
    pruned: HashSet<String>,
    truncated: HashSet<String>,
}

/// One model call as the tracker sees it.
pub(super) struct ObservedCall<'a> {
    /// Fingerprints of the request's leading segments (skald's tools, its system addition).
    pub leading: Vec<u128>,
    /// Fingerprints of `messages`.
    pub fingerprints: &'a [u128],
    /// The request's messages.
    pub messages: &'a [Message],
    /// What the pipeline did to them.
    pub report: &'a AssembleReport,
    /// skald compacted the session before this call.
    pub compacted: bool,
    /// Memory's upload dropped a range from the context before this call.
    pub dropped: bool,
    /// Recall injected memories into this call.
    pub recalled: bool,
}

/// Whether `message` is part of recall's injection: its simulated `search_memories` call or
/// that call's result.
fn is_recall(message: &Message) -> bool {
    message
        .tool_calls()
        .map(|call| call.id.as_str())
        .chain(message.tool_results().map(|result| result.call_id.as_str()))
        .any(|id| id.starts_with(SIMULATED_CALL_PREFIX))
}

impl PrefixTracker {
    /// Notes one call.
    pub(super) fn observe(&mut self, call: ObservedCall<'_>) {
        let ObservedCall {
            leading,
            fingerprints,
            messages,
            report,
            compacted,
            dropped,
            recalled,
        } = call;
        let sent = Sent {
            leading,
            messages: fingerprints.to_vec(),
            recalled_at: messages
                .iter()
                .enumerate()
                .filter(|(_, message)| is_recall(message))
                .map(|(index, _)| index)
                .collect(),
            offloaded: report
                .offload
                .offloaded
                .iter()
                .map(|item| item.call_id.clone())
                .collect(),
            pruned: report
                .prune
                .changes
                .iter()
                .map(|change| change.call_id.clone())
                .collect(),
            truncated: report
                .truncate
                .changes
                .iter()
                .map(|change| change.call_id.clone())
                .collect(),
        };
        if let Some(previous) = self.previous.take() {
            if let Some(cause) = break_cause(&previous, &sent, messages, recalled) {
                self.breaks.total += 1;
                // A compaction or a dropped range rewrites the history whatever else changed with
                // it.
                match (compacted, dropped, cause) {
                    (true, _, _) => self.breaks.compaction += 1,
                    (false, true, _) => self.breaks.upload += 1,
                    (false, false, Cause::Offload) => self.breaks.offload += 1,
                    (false, false, Cause::Prune) => self.breaks.prune += 1,
                    (false, false, Cause::Truncation) => self.breaks.truncation += 1,
                    (false, false, Cause::Recall) => self.breaks.recall += 1,
                    (false, false, Cause::Other) => self.breaks.other += 1,
                }
            }
        }
        self.previous = Some(sent);
    }
}

enum Cause {
    Offload,
    Prune,
    Truncation,
    Recall,
    Other,
}

/// Why `now` does not start with `before`, or `None` when it does. `recalled`: recall injected
/// memories into `now`.
fn break_cause(before: &Sent, now: &Sent, messages: &[Message], recalled: bool) -> Option<Cause> {
    if before.leading != now.leading {
        // Refs put the fetch tool and the REF_ID instruction in front with the first offload;
        // memory's tools and profile are there from the first call, and recall injected into
        // the system addition (no simulated call) changes it.
        let first_offload = before.offloaded.is_empty() && !now.offloaded.is_empty();
        return Some(if first_offload {
            Cause::Offload
        } else if recalled {
            Cause::Recall
        } else if now.offloaded.is_empty() {
            Cause::Other
        } else {
            Cause::Offload
        });
    }
    let shared = before
        .messages
        .iter()
        .zip(&now.messages)
        .take_while(|(a, b)| a == b)
        .count();
    if shared == before.messages.len() {
        return None;
    }
    if before.recalled_at.contains(&shared) || now.recalled_at.contains(&shared) {
        return Some(Cause::Recall);
    }
    let Some(changed) = messages.get(shared) else {
        // The request got shorter than the previous one without changing what it kept.
        return Some(Cause::Other);
    };
    let ids: Vec<&str> = changed
        .tool_results()
        .map(|result| result.call_id.as_str())
        .chain(changed.tool_calls().map(|call| call.id.as_str()))
        .collect();
    // An argument offload names its call's field (`{call id}#{field}`).
    let names = |item: &str, id: &str| {
        item == id
            || item
                .strip_prefix(id)
                .is_some_and(|field| field.starts_with('#'))
    };
    let newly = |now: &HashSet<String>, before: &HashSet<String>| {
        now.iter()
            .filter(|item| !before.contains(*item))
            .any(|item| ids.iter().any(|id| names(item, id)))
    };
    Some(if newly(&now.offloaded, &before.offloaded) {
        Cause::Offload
    } else if newly(&now.pruned, &before.pruned) {
        Cause::Prune
    } else if newly(&now.truncated, &before.truncated) {
        Cause::Truncation
    } else {
        Cause::Other
    })
}

#[cfg(test)]
mod tests {
    use skald_core::message::{Block, ContentForm, Extra, Role, ToolResult};
    use skald_core::pipeline::offload::Offloaded;

    use super::*;

    fn result(call_id: &str, text: &str) -> Message {
        Message::new(
            Role::ToolResult,
            vec![Block::ToolResult(ToolResult {
                call_id: call_id.to_owned(),
                tool_name: None,
                content: vec![Block::text(text)].into(),
                content_form: ContentForm::Text,
                is_error: None,
                details: None,
                extra: Extra::new(),
            })],
        )
    }

    fn offloaded(call_id: &str) -> AssembleReport {
        let mut report = AssembleReport::default();
        report.offload.offloaded.push(Offloaded {
            message_index: 1,
            call_id: call_id.to_owned(),
            ref_id: "r".repeat(64),
            chars_before: 10_000,
            chars_after: 100,
        });
        report
    }

    fn observed<'a>(
        leading: Vec<u128>,
        fingerprints: &'a [u128],
        messages: &'a [Message],
        report: &'a AssembleReport,
    ) -> ObservedCall<'a> {
        ObservedCall {
            leading,
            fingerprints,
            messages,
            report,
            compacted: false,
            dropped: false,
            recalled: false,
        }
    }

    #[test]
    fn a_request_that_extends_the_previous_is_no_break_and_an_offload_in_it_is_one() {
        let mut tracker = PrefixTracker::default();
        let first = [
            Message::text(Role::User, "run it"),
            result("c1", "long log"),
        ];
        tracker.observe(observed(
            vec![],
            &[1, 2],
            &first,
            &AssembleReport::default(),
        ));
        let second = [
            first[0].clone(),
            first[1].clone(),
            Message::text(Role::User, "and?"),
        ];
        tracker.observe(observed(
            vec![],
            &[1, 2, 3],
            &second,
            &AssembleReport::default(),
        ));
        assert_eq!(tracker.breaks, PrefixBreaks::default());

        // The log goes behind a ref: the request now differs from its second message on, and
        // the fetch tool and REF_ID instruction are in front.
        let third = [
            first[0].clone(),
            result("c1", "[REF_ID: r] (Summary: log)"),
            second[2].clone(),
        ];
        tracker.observe(observed(vec![9], &[1, 7, 3], &third, &offloaded("c1")));
        assert_eq!(tracker.breaks.total, 1);
        assert_eq!(tracker.breaks.offload, 1);

        // A tool call's long arguments go behind a ref (`{call id}#{field}`): an offload too.
        let call = Message::new(
            Role::Assistant,
            vec![Block::ToolCall(skald_core::message::ToolCall {
                id: "c2".to_owned(),
                name: "write".to_owned(),
                arguments: serde_json::json!({"content": "[REF_ID: r]"}),
                arguments_text: None,
                extra: Extra::new(),
            })],
        );
        let with_call = [
            third[0].clone(),
            third[1].clone(),
            third[2].clone(),
            call.clone(),
        ];
        tracker.observe(observed(
            vec![9],
            &[1, 7, 3, 8],
            &with_call,
            &offloaded("c1"),
        ));
        assert_eq!(tracker.breaks.total, 1, "extending the request is no break");
        let mut arguments = offloaded("c1");
        arguments.offload.offloaded.push(Offloaded {
            message_index: 1,
            call_id: "c2#content".to_owned(),
            ref_id: "r".repeat(64),
            chars_before: 10_000,
            chars_after: 100,
        });
        tracker.observe(observed(vec![9], &[1, 7, 3, 6], &with_call, &arguments));
        assert_eq!(tracker.breaks.total, 2);
        assert_eq!(tracker.breaks.offload, 2);

        // Same front, the history edited by the transcript itself: another cause.
        let fourth = [Message::text(Role::User, "edited")];
        tracker.observe(observed(vec![9], &[5], &fourth, &arguments));
        assert_eq!(tracker.breaks.total, 3);
        assert_eq!(tracker.breaks.other, 1);
    }

    #[test]
    fn recalled_memories_gone_from_where_they_were_are_a_recall_break_and_a_compaction_wins() {
        let mut tracker = PrefixTracker::default();
        let ask = Message::text(Role::User, "what did we decide?");
        let recall_call = Message::new(
            Role::Assistant,
            vec![Block::ToolCall(skald_core::message::ToolCall {
                id: format!("{SIMULATED_CALL_PREFIX}1"),
                name: "search_memories".to_owned(),
                arguments: serde_json::json!({"query": "decide"}),
                arguments_text: None,
                extra: Extra::new(),
            })],
        );
        let recall_result = result(&format!("{SIMULATED_CALL_PREFIX}1"), "the build uses LTO");
        let first = [ask.clone(), recall_call, recall_result];
        let nothing = AssembleReport::default();
        let mut recalled = observed(vec![], &[1, 2, 3], &first, &nothing);
        recalled.recalled = true;
        tracker.observe(recalled);
        // The next call has the answer where the recall pair was.
        let second = [ask.clone(), Message::text(Role::Assistant, "LTO.")];
        tracker.observe(observed(
            vec![],
            &[1, 4],
            &second,
            &AssembleReport::default(),
        ));
        assert_eq!(tracker.breaks.total, 1);
        assert_eq!(tracker.breaks.recall, 1);

        let third = [Message::text(Role::User, "summary of the session")];
        let mut compacted = observed(vec![], &[9], &third, &nothing);
        compacted.compacted = true;
        tracker.observe(compacted);
        assert_eq!(tracker.breaks.total, 2);
        assert_eq!(tracker.breaks.compaction, 1);
        assert_eq!(tracker.breaks.other, 0);
    }
}
