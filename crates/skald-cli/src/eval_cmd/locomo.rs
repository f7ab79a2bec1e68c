//! The LoCoMo data set as `skald eval locomo` reads it: conversations, their sessions and turns,
//! the questions with the evidence turns they cite (corrected by an errors file), and the
//! memories each session's turns become.

use std::collections::HashMap;

use anyhow::{Context, Result, bail};
use serde_json::Value;
use skald_core::ids::Tenant;
use skald_core::memory::levels::{MAX_OVERVIEW_CHARS, cut_at_word};
use skald_core::memory::uri::MemoryUri;
use skald_engine::storage::{MemorySource, NewMemory};

/// A turn, by session and position (`D{session}:{turn}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TurnRef {
    pub session: u32,
    pub turn: u32,
}

impl TurnRef {
    /// Reads `D3:14`; also the slips found in the data (`D:11:26`, `D8:6; D9:17` gives two).
    pub fn parse_all(text: &str) -> Vec<TurnRef> {
        text.split([';', ',', ' '])
            .filter_map(|part| {
                let rest = part.trim().strip_prefix('D')?;
                let rest = rest.strip_prefix(':').unwrap_or(rest);
                let (session, turn) = rest.split_once(':')?;
                Some(TurnRef {
                    session: session.parse().ok()?,
                    turn: turn.parse().ok()?,
                })
            })
            .collect()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    pub id: TurnRef,
    pub dia_id: String,
    pub speaker: String,
    pub text: String,
    /// The description of an image the speaker shared, and what was searched to find it.
    pub caption: Option<String>,
    pub image_query: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub number: u32,
    pub date_ms: Option<i64>,
    pub turns: Vec<Turn>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    pub text: String,
    pub category: i64,
    pub evidence: Vec<TurnRef>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    pub sample_id: String,
    pub sessions: Vec<Session>,
    pub questions: Vec<Question>,
}

/// `1:56 pm on 8 May, 2023` → epoch milliseconds (UTC).
pub fn parse_session_date(text: &str) -> Option<i64> {
    chrono::NaiveDateTime::parse_from_str(text.trim(), "%I:%M %p on %d %B, %Y")
        .ok()
        .map(|time| time.and_utc().timestamp_millis())
}

fn evidence_of(value: Option<&Value>) -> Vec<TurnRef> {
    value
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(Value::as_str)
                .flat_map(TurnRef::parse_all)
                .collect()
        })
        .unwrap_or_default()
}

/// Reads the conversations of a LoCoMo file, applying `corrections` (question id → evidence).
pub fn parse_locomo(
    text: &str,
    corrections: &HashMap<String, Vec<TurnRef>>,
) -> Result<Vec<Conversation>> {
    let root: Value = serde_json::from_str(text).context("the LoCoMo file is not JSON")?;
    let Some(items) = root.as_array() else {
        bail!("the LoCoMo file must be a JSON array of conversations");
    };
    let mut conversations = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let sample_id = item
            .get("sample_id")
            .and_then(Value::as_str)
            .map_or_else(|| format!("conv-{index}"), str::to_owned);
        let Some(body) = item.get("conversation").and_then(Value::as_object) else {
            bail!("conversation {index} ({sample_id}) has no `conversation` object");
        };
        let mut sessions = Vec::new();
        for number in 1_u32.. {
            let date_key = format!("session_{number}_date_time");
            let key = format!("session_{number}");
            if !body.contains_key(&date_key) && !body.contains_key(&key) {
                break;
            }
            let date_ms = body
                .get(&date_key)
                .and_then(Value::as_str)
                .and_then(parse_session_date);
            let mut turns = Vec::new();
            for turn in body
                .get(&key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let field = |name: &str| turn.get(name).and_then(Value::as_str).map(str::to_owned);
                let (Some(dia_id), Some(speaker), Some(text)) =
                    (field("dia_id"), field("speaker"), field("text"))
                else {
                    bail!("{sample_id} session {number}: a turn lacks dia_id, speaker or text");
                };
                let Some(id) = TurnRef::parse_all(&dia_id).first().copied() else {
                    bail!(
                        "{sample_id} session {number}: turn id {dia_id:?} is not D<session>:<turn>"
                    );
                };
                turns.push(Turn {
                    id,
                    dia_id,
                    speaker,
                    text,
                    caption: field("blip_caption").filter(|caption| !caption.trim().is_empty()),
                    image_query: field("query").filter(|query| !query.trim().is_empty()),
                });
            }
            sessions.push(Session {
                number,
                date_ms,
                turns,
            });
        }
        let mut questions = Vec::new();
        for (q_index, qa) in item
            .get("qa")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let Some(text) = qa.get("question").and_then(Value::as_str) else {
                continue;
            };
            let id = format!("locomo_{index}_qa{q_index}");
            let evidence = match corrections.get(&id) {
                Some(corrected) => corrected.clone(),
                None => evidence_of(qa.get("evidence")),
            };
            questions.push(Question {
                text: text.to_owned(),
                category: qa.get("category").and_then(Value::as_i64).unwrap_or(0),
                evidence,
            });
        }
        conversations.push(Conversation {
            sample_id,
            sessions,
            questions,
        });
    }
    Ok(conversations)
}

/// Reads an errors file: `question_id` → `correct_evidence`, for entries that have one.
pub fn parse_corrections(text: &str) -> Result<HashMap<String, Vec<TurnRef>>> {
    let root: Value = serde_json::from_str(text).context("the errors file is not JSON")?;
    let Some(items) = root.as_array() else {
        bail!("the errors file must be a JSON array of {{question_id, correct_evidence}}");
    };
    let mut corrections = HashMap::new();
    for item in items {
        let (Some(id), Some(evidence)) = (
            item.get("question_id").and_then(Value::as_str),
            item.get("correct_evidence")
                .filter(|value| value.is_array()),
        ) else {
            continue;
        };
        corrections.insert(id.to_owned(), evidence_of(Some(evidence)));
    }
    Ok(corrections)
}

/// The name a LoCoMo question category has in the paper.
pub fn category_name(category: i64) -> &'static str {
    match category {
        1 => "multi-hop",
        2 => "temporal",
        3 => "open-domain",
        4 => "single-hop",
        5 => "adversarial",
        _ => "other",
    }
}

fn slug(text: &str) -> String {
    let slug: String = text
        .chars()
        .map(|c| {
            if c.is_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let slug = slug.trim_matches('-').to_owned();
    if slug.is_empty() {
        "speaker".to_owned()
    } else {
        slug
    }
}

pub(super) fn tenant_of(sample_id: &str, index: usize) -> Result<Tenant> {
    let cleaned: String = sample_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        .take(100)
        .collect();
    let name = if cleaned
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
    {
        cleaned
    } else {
        format!("conversation-{index}")
    };
    Ok(Tenant::parse(name)?)
}

/// A turn as text: the speaker, what they said and the image they shared, if any (what a
/// memory of the turn holds: a photo is part of what was said).
fn spoken(turn: &Turn) -> String {
    let image = match (&turn.image_query, &turn.caption) {
        (Some(query), Some(caption)) => format!(" [shared an image of {query}: {caption}]"),
        (Some(query), None) => format!(" [shared an image of {query}]"),
        (None, Some(caption)) => format!(" [shared an image: {caption}]"),
        (None, None) => String::new(),
    };
    format!("{}: {}{image}", turn.speaker, turn.text)
}

/// The memories of one session: each turn with its context as L1.
pub fn session_memories(
    conversation: &Conversation,
    session: &Session,
    context_before: usize,
    context_after: usize,
) -> Result<Vec<NewMemory>> {
    let sample = slug(&conversation.sample_id);
    let mut memories = Vec::new();
    for (position, turn) in session.turns.iter().enumerate() {
        let uri = MemoryUri::parse_entry(&format!(
            "viking://session/{sample}-session-{}/{}",
            session.number,
            turn.dia_id
                .replace(|c: char| !c.is_alphanumeric() && c != ':', "-")
        ))?;
        let content = spoken(turn);
        let mut memory = NewMemory::new(uri, content).with_source(MemorySource::new(
            format!("{sample}:session_{}", session.number),
            [turn.dia_id.clone()],
        ));
        if let Some(date) = session.date_ms {
            memory = memory.created_at(date);
        }
        if context_before + context_after > 0 {
            let first = position.saturating_sub(context_before);
            let last = (position + context_after + 1).min(session.turns.len());
            let lines: Vec<String> = session
                .turns
                .get(first..last)
                .unwrap_or_default()
                .iter()
                .map(spoken)
                .collect();
            memory = memory.with_l1(cut_at_word(&lines.join("\n"), MAX_OVERVIEW_CHARS));
        }
        memories.push(memory);
    }
    Ok(memories)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn turn_refs_read_the_slips_found_in_the_data() {
        let turn = |session, turn| TurnRef { session, turn };
        assert_eq!(TurnRef::parse_all("D3:14"), [turn(3, 14)]);
        assert_eq!(TurnRef::parse_all("D:11:26"), [turn(11, 26)]);
        assert_eq!(TurnRef::parse_all("D8:6; D9:17"), [turn(8, 6), turn(9, 17)]);
        assert!(TurnRef::parse_all("D").is_empty());
    }

    #[test]
    fn session_dates_parse() {
        assert_eq!(
            parse_session_date("1:56 pm on 8 May, 2023"),
            Some(1_683_554_160_000)
        );
        assert!(parse_session_date("10:37 am on 27 June, 2023").is_some());
        assert_eq!(parse_session_date("sometime"), None);
    }
}
