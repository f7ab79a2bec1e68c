//! Descriptive statistics of a conversation: messages by role, tool calls by name and the size
//! distribution of tool results. What `skald inspect` prints, computed without I/O.

use std::collections::BTreeMap;

use crate::message::{Block, Message, Role};

/// Count, median, 90th percentile and maximum of a list of sizes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Distribution {
    /// How many sizes there are.
    pub count: usize,
    /// The middle size (the lower of the two middles for an even count).
    pub median: usize,
    /// The size 90 % of the list are at or below.
    pub p90: usize,
    /// The largest size.
    pub max: usize,
}

impl Distribution {
    /// Summarises `values` (nearest-rank percentiles; all zero for an empty list).
    pub fn of(mut values: Vec<usize>) -> Distribution {
        if values.is_empty() {
            return Distribution::default();
        }
        values.sort_unstable();
        Distribution {
            count: values.len(),
            median: nearest_rank(&values, 0.5),
            p90: nearest_rank(&values, 0.9),
            max: values.last().copied().unwrap_or(0),
        }
    }
}

/// The nearest-rank percentile of sorted, non-empty `values`.
fn nearest_rank(sorted: &[usize], quantile: f64) -> usize {
    let rank = (quantile * sorted.len() as f64).ceil() as usize;
    let index = rank.clamp(1, sorted.len()) - 1;
    sorted.get(index).copied().unwrap_or(0)
}

/// What a conversation holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConversationStats {
    /// Messages by [`Role::name`].
    pub messages_by_role: BTreeMap<String, usize>,
    /// Tool calls by tool name.
    pub tool_calls_by_name: BTreeMap<String, usize>,
    /// Characters of text per tool result.
    pub tool_result_chars: Distribution,
}

impl ConversationStats {
    /// Walks `messages` once.
    pub fn of(messages: &[Message]) -> ConversationStats {
        let mut stats = ConversationStats::default();
        let mut result_sizes = Vec::new();
        for message in messages {
            *stats
                .messages_by_role
                .entry(message.role.name().to_owned())
                .or_default() += 1;
            for block in &message.content {
                match block {
                    Block::ToolCall(call) => {
                        *stats
                            .tool_calls_by_name
                            .entry(call.name.clone())
                            .or_default() += 1;
                    }
                    Block::ToolResult(result) => result_sizes.push(result.text_chars()),
                    Block::Text(_) | Block::Image(_) | Block::Thinking(_) | Block::Opaque(_) => {}
                }
            }
        }
        stats.tool_result_chars = Distribution::of(result_sizes);
        stats
    }

    /// Number of messages with the given role.
    pub fn count(&self, role: &Role) -> usize {
        self.messages_by_role.get(role.name()).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::message::{ContentForm, Extra, ToolCall, ToolResult};
    use serde_json::json;

    #[test]
    fn distribution_uses_nearest_rank() {
        let d = Distribution::of((1..=10).collect());
        assert_eq!((d.count, d.median, d.p90, d.max), (10, 5, 9, 10));
        assert_eq!(Distribution::of(vec![]), Distribution::default());
        assert_eq!(Distribution::of(vec![7]).p90, 7);
    }

    #[test]
    fn counts_roles_calls_and_result_sizes() {
        let call = Block::ToolCall(ToolCall {
            id: "c1".into(),
            name: "read".into(),
            arguments: json!({"path": "a"}),
            arguments_text: None,
            extra: Extra::new(),
        });
        let result = Block::ToolResult(ToolResult {
            call_id: "c1".into(),
            tool_name: Some("read".into()),
            content: vec![Block::text("héllo")].into(),
            content_form: ContentForm::Blocks,
            is_error: None,
            details: None,
            extra: Extra::new(),
        });
        let messages = vec![
            Message::text(Role::User, "go"),
            Message::new(Role::Assistant, vec![call]),
            Message::new(Role::ToolResult, vec![result]),
        ];
        let stats = ConversationStats::of(&messages);
        assert_eq!(stats.count(&Role::User), 1);
        assert_eq!(stats.count(&Role::ToolResult), 1);
        assert_eq!(stats.tool_calls_by_name.get("read"), Some(&1));
        assert_eq!(stats.tool_result_chars.max, 5);
    }
}
