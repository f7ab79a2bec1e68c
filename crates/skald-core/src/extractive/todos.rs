//! Open TODOs: the latest todo list a todo tool wrote (Claude Code's `TodoWrite`, its
//! `TaskCreate`/`TaskUpdate`, Codex's `update_plan`, any tool named like a todo list), unchecked
//! boxes, `TODO:` lines and "next step / still need to / remaining" statements of the latest
//! assistant turns. An item is dropped once a later list marks it done or a later assistant
//! sentence reports it done.

use serde_json::Value;

use crate::message::ToolCall;
use crate::tokens::estimate::is_cjk;

use super::decisions::strength;
use super::span::{Span, result_text};
use super::text::{
    any_phrase, checked_box, compact_spaces, content_words, fold_case, has_phrase, prose_lines,
    sentences, strip_list_marker, unchecked_box, word_overlap,
};
use super::{Body, Candidate, Labels};

/// Share of an item's topic words a later "done" sentence must repeat to close it.
const DONE_OVERLAP: f64 = 0.6;
/// An item needs this many topic words before a sentence can close it by overlap.
const MIN_WORDS_TO_MATCH: usize = 2;

const LIST_SCORE: i64 = 300;
/// What is being done now outranks what waits.
const IN_PROGRESS_BONUS: i64 = 50;
const CURRENT_WORK_SCORE: i64 = 280;
/// Most sentences taken as the work in progress.
const MAX_CURRENT_WORK: usize = 2;
const BOX_SCORE: i64 = 180;
const MARKER_SCORE: i64 = 170;
const HEADED_SCORE: i64 = 160;
const CUE_SCORE: i64 = 150;

const TODO_CUES: &[&str] = &[
    "next step",
    "next steps",
    "still need to",
    "still needs",
    "still to do",
    "remaining",
    "left to do",
    "not yet",
    "follow-up",
    "follow up",
    "todo",
    "to do:",
    "下一步",
    "接下来",
    "还需要",
    "仍需",
    "待办",
    "剩下",
    "剩余",
    "尚未",
    "还没有",
    "后续",
];

const DONE_CUES: &[&str] = &[
    "done",
    "completed",
    "complete",
    "finished",
    "fixed",
    "implemented",
    "added",
    "passes",
    "passing",
    "pass",
    "resolved",
    "committed",
    "pushed",
    "merged",
    "created",
    "updated",
    "works",
    "✓",
    "✅",
    "完成",
    "已修复",
    "已添加",
    "已实现",
    "通过",
    "搞定",
    "已提交",
    "已补充",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Pending,
    InProgress,
    Done,
}

#[derive(Debug, Clone)]
struct ListItem {
    text: String,
    status: Status,
}

fn status_of(item: &serde_json::Map<String, Value>) -> Status {
    let flag = |key: &str| item.get(key) == Some(&Value::Bool(true));
    if flag("done") || flag("completed") || flag("checked") {
        return Status::Done;
    }
    let status = item
        .get("status")
        .or_else(|| item.get("state"))
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    match status.as_str() {
        "completed" | "complete" | "done" | "cancelled" | "canceled" | "skipped" | "deleted" => {
            Status::Done
        }
        "in_progress" | "in-progress" | "inprogress" | "active" | "doing" | "running" => {
            Status::InProgress
        }
        _ => Status::Pending,
    }
}

fn item_text(item: &Value) -> Option<String> {
    match item {
        Value::String(text) => Some(text.clone()),
        Value::Object(fields) => ["content", "text", "title", "step", "subject", "task"]
            .iter()
            .find_map(|key| fields.get(*key).and_then(Value::as_str))
            .map(str::to_owned),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::Array(_) => None,
    }
    .map(|text| compact_spaces(&text))
    .filter(|text| !text.is_empty())
}

/// The items of a todo-list call, or `None` when the call is not one.
fn todo_list(call: &ToolCall) -> Option<Vec<ListItem>> {
    let name = call.name.to_ascii_lowercase();
    if !(name.contains("todo") || name == "update_plan") {
        return None;
    }
    let items = match &call.arguments {
        Value::Array(items) => items,
        Value::Object(fields) => ["todos", "items", "plan", "tasks"]
            .iter()
            .find_map(|key| fields.get(*key).and_then(Value::as_array))?,
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => return None,
    };
    Some(
        items
            .iter()
            .filter_map(|item| {
                let text = item_text(item)?;
                let status = item.as_object().map_or(Status::Pending, status_of);
                Some(ListItem { text, status })
            })
            .collect(),
    )
}

/// The number a `TaskCreate` result gives its task ("Task #3 created").
fn created_task_id(text: &str) -> Option<String> {
    let at = text.find('#')?;
    let digits: String = text
        .get(at + 1..)?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    (!digits.is_empty()).then_some(digits)
}

/// The todo lists of the span: the latest list call's items and the tasks of task tools, with
/// the positions where items were seen done.
#[derive(Debug, Default)]
struct Lists {
    open: Vec<ListItem>,
    /// Topic words of items some list marked done, with the position it did so.
    done: Vec<(Vec<String>, usize)>,
}

fn read_lists(span: &Span<'_>) -> Lists {
    let mut latest: Option<Vec<ListItem>> = None;
    let mut tasks: Vec<(String, ListItem)> = Vec::new();
    let mut done = Vec::new();
    for turn in &span.turns {
        for call in &turn.calls {
            let result = span.result_for(&call.id);
            if result.is_some_and(|result| result.failed()) {
                continue;
            }
            if let Some(items) = todo_list(call) {
                for item in items.iter().filter(|item| item.status == Status::Done) {
                    done.push((content_words(&item.text), turn.index));
                }
                latest = Some(items);
                continue;
            }
            match call.name.as_str() {
                "TaskCreate" => {
                    let Some(text) = item_text(&call.arguments) else {
                        continue;
                    };
                    let id = result
                        .and_then(|result| created_task_id(&result_text(result)))
                        .unwrap_or_else(|| (tasks.len() + 1).to_string());
                    tasks.push((
                        id,
                        ListItem {
                            text,
                            status: Status::Pending,
                        },
                    ));
                }
                "TaskUpdate" => {
                    let fields = call.arguments.as_object();
                    let id = fields
                        .and_then(|fields| fields.get("taskId").or_else(|| fields.get("id")))
                        .map(|id| match id {
                            Value::String(text) => text.clone(),
                            other @ (Value::Null
                            | Value::Bool(_)
                            | Value::Number(_)
                            | Value::Array(_)
                            | Value::Object(_)) => other.to_string(),
                        });
                    let status = fields.map(status_of);
                    if let (Some(id), Some(status)) = (id, status) {
                        if fields.is_some_and(|fields| fields.contains_key("status")) {
                            for (task_id, item) in &mut tasks {
                                if *task_id == id {
                                    item.status = status;
                                    if status == Status::Done {
                                        done.push((content_words(&item.text), turn.index));
                                    }
                                }
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }
    let mut open: Vec<ListItem> = latest.unwrap_or_default();
    open.extend(tasks.into_iter().map(|(_, item)| item));
    open.retain(|item| item.status != Status::Done);
    Lists { open, done }
}

/// True for a sentence that states something still to do ("next step", "still need to", 下一步…).
pub(super) fn is_todo_statement(sentence: &str) -> bool {
    any_phrase(&fold_case(sentence), TODO_CUES)
}

/// What the assistant said it was doing when the span ends in the middle of work (its latest
/// prose came with tool calls, not as an answer): up to [`MAX_CURRENT_WORK`] plan sentences.
fn current_work(span: &Span<'_>) -> Vec<String> {
    let Some(turn) = span
        .turns
        .iter()
        .rev()
        .find(|turn| turn.is_assistant && !turn.assistant.trim().is_empty())
    else {
        return Vec::new();
    };
    if turn.is_final_answer() {
        return Vec::new();
    }
    let plans: Vec<String> = sentences(&turn.assistant)
        .into_iter()
        .filter(|sentence| strength(sentence.text) >= 1)
        .map(|sentence| compact_spaces(sentence.text))
        .collect();
    let skip = plans.len().saturating_sub(MAX_CURRENT_WORK);
    plans.into_iter().skip(skip).collect()
}

/// A TODO found in prose, with where it was found.
struct TextTodo {
    text: String,
    index: usize,
    /// Order within the message.
    rank: usize,
    score: i64,
}

fn text_todos(span: &Span<'_>, recent_messages: usize) -> Vec<TextTodo> {
    let recent: Vec<_> = span
        .turns
        .iter()
        .filter(|turn| turn.is_assistant && !turn.assistant.trim().is_empty())
        .rev()
        .take(recent_messages)
        .collect();
    let mut out = Vec::new();
    for turn in recent.into_iter().rev() {
        let recency = span.recency(turn.index);
        let mut heading_open = false;
        for line in prose_lines(&turn.assistant) {
            let bare = strip_list_marker(line);
            if line.is_empty() {
                heading_open = false;
                continue;
            }
            let is_bullet = bare.len() < line.len();
            if let Some(item) = unchecked_box(line) {
                out.push(todo(item, turn.index, BOX_SCORE + recency));
                continue;
            }
            if checked_box(line).is_some() {
                continue;
            }
            if heading_open && is_bullet {
                out.push(todo(bare, turn.index, HEADED_SCORE + recency));
                continue;
            }
            let folded = fold_case(bare);
            if line.starts_with('#') {
                heading_open = any_phrase(&folded, TODO_CUES);
                continue;
            }
            heading_open = false;
            if let Some(rest) = ["todo:", "todo：", "待办：", "待办:"]
                .iter()
                .find_map(|marker| folded.starts_with(marker).then_some(marker.len()))
                .and_then(|len| bare.get(len..))
            {
                out.push(todo(rest.trim(), turn.index, MARKER_SCORE + recency));
                continue;
            }
            if (bare.ends_with(':') || bare.ends_with('：')) && any_phrase(&folded, TODO_CUES) {
                heading_open = true;
                continue;
            }
            for sentence in sentences(bare) {
                let folded = fold_case(sentence.text);
                let words = sentence.text.split_whitespace().count();
                let long_enough = words >= 3 || sentence.text.chars().any(is_cjk);
                if long_enough
                    && any_phrase(&folded, TODO_CUES)
                    && !sentence.text.ends_with(['?', '？'])
                {
                    out.push(todo(sentence.text, turn.index, CUE_SCORE + recency));
                }
            }
        }
    }
    out.retain(|item| item.text.chars().count() >= 4);
    for (rank, item) in out.iter_mut().enumerate() {
        item.rank = rank;
    }
    out
}

fn todo(text: &str, index: usize, score: i64) -> TextTodo {
    TextTodo {
        text: compact_spaces(text),
        index,
        rank: 0,
        score,
    }
}

/// Sentences of assistant prose that report something done, and checked boxes, with positions.
fn completions(span: &Span<'_>) -> Vec<(Vec<String>, usize)> {
    let mut out = Vec::new();
    for turn in span.turns.iter().filter(|turn| turn.is_assistant) {
        for line in prose_lines(&turn.assistant) {
            if let Some(item) = checked_box(line) {
                out.push((content_words(item), turn.index));
                continue;
            }
            for sentence in sentences(line) {
                let folded = fold_case(sentence.text);
                let reports_done = DONE_CUES.iter().any(|cue| has_phrase(&folded, cue));
                if reports_done && !any_phrase(&folded, TODO_CUES) {
                    out.push((content_words(sentence.text), turn.index));
                }
            }
        }
    }
    out
}

/// True when one of `closers` after position `after` covers `item`.
fn closed(item: &str, after: Option<usize>, closers: &[(Vec<String>, usize)]) -> bool {
    let words = content_words(item);
    if words.len() < MIN_WORDS_TO_MATCH {
        return false;
    }
    closers.iter().any(|(other, at)| {
        after.is_none_or(|after| *at > after) && word_overlap(&words, other) >= DONE_OVERLAP
    })
}

/// The Open TODOs candidates of the span, plus the previous summary's open items still open.
pub(super) fn todo_candidates(
    span: &Span<'_>,
    previous: &[String],
    recent_messages: usize,
    labels: &Labels,
) -> Vec<Candidate> {
    let lists = read_lists(span);
    let mut closers = completions(span);
    closers.extend(lists.done.iter().cloned());
    let mut out = Vec::new();

    for (position, item) in lists.open.iter().enumerate() {
        let status = match item.status {
            Status::InProgress => labels.in_progress,
            Status::Pending | Status::Done => labels.pending,
        };
        out.push(Candidate {
            body: Body::Text(format!("{status} {}", item.text)),
            score: match item.status {
                Status::InProgress => LIST_SCORE + IN_PROGRESS_BONUS,
                Status::Pending | Status::Done => LIST_SCORE,
            },
            order: (1, u64::try_from(position).unwrap_or(u64::MAX)),
        });
    }
    if !lists
        .open
        .iter()
        .any(|item| item.status == Status::InProgress)
    {
        for (position, text) in current_work(span).into_iter().enumerate() {
            out.push(Candidate {
                body: Body::Text(format!("{} {text}", labels.in_progress)),
                score: CURRENT_WORK_SCORE,
                // After the list's items.
                order: (
                    1,
                    (u64::MAX - 2).saturating_add(u64::try_from(position).unwrap_or(0)),
                ),
            });
        }
    }
    let open_list_words: Vec<(Vec<String>, usize)> = lists
        .open
        .iter()
        .map(|item| (content_words(&item.text), 0))
        .collect();

    for item in text_todos(span, recent_messages) {
        // A prose TODO the todo list already holds is the list's.
        if closed(&item.text, Some(item.index), &closers)
            || closed(&item.text, None, &open_list_words)
        {
            continue;
        }
        out.push(Candidate {
            body: Body::Text(item.text),
            score: item.score,
            order: (2, u64::try_from(item.rank).unwrap_or(u64::MAX)),
        });
    }

    for (position, item) in previous.iter().enumerate() {
        if closed(item, None, &closers) {
            continue;
        }
        out.push(Candidate {
            body: Body::Text(item.clone()),
            score: 120 - i64::try_from(position.min(100)).unwrap_or(100),
            order: (0, u64::try_from(position).unwrap_or(u64::MAX)),
        });
    }
    out
}
