//! Tool and skill memories in the store: tool statistics merged from finished turns and read
//! back for the system prompt, skill usage counts, and the skill memory appended to a read of
//! `skills/<name>/SKILL.md`.
//!
//! Layout (see `skald_core::memory::usage`): `viking://agent/{agent}/tools/{tool}` holds a
//! tool's [`ToolStats`] as JSON (L0: `bash: 42 calls, 95% ok, avg 1.2 s`); under
//! `viking://agent/{agent}/skills/{skill}/`, `stats.json` holds its [`SkillUsage`] and entries
//! under `examples/`, `tips/` and `issues/` are its examples, tips and known issues (any other
//! entry is a tip).

use std::collections::HashMap;

use serde::Serialize;
use skald_core::ids::Tenant;
use skald_core::memory::recall::format_date;
use skald_core::memory::skill_use::SkillUse;
use skald_core::memory::tools::slug;
use skald_core::memory::uri::{MemoryUri, UriError};
use skald_core::memory::usage::{
    SKILL_MEMORY_MARKER, SkillMemory, SkillUsage, ToolCallReport, ToolStats, merge_reports,
    render_skill_memory, skill_read,
};
use skald_core::message::{Block, Message, ToolCall};
use skald_store::memories::{DirEntryKind, MemoryError, MemoryStore, NewMemory, TreeNode};

use super::MemoryIdentity;

pub use skald_core::memory::usage::SKILL_STATS_FILE;

/// Items shown per section of a skill memory (the newest).
const MAX_SKILL_ITEMS: usize = 5;

/// `viking://agent/{agent}/tools/{tool}`.
pub fn tool_uri(agent: &str, tool: &str) -> Result<MemoryUri, UriError> {
    MemoryUri::parse_entry(&format!("viking://agent/{agent}/tools/{tool}"))
}

/// `viking://agent/{agent}/skills/{skill}`.
pub fn skill_directory(agent: &str, skill: &str) -> Result<MemoryUri, UriError> {
    let uri = MemoryUri::parse(&format!("viking://agent/{agent}/skills/{skill}"))?;
    if uri.depth() != 4 {
        return Err(UriError::InvalidSegment {
            segment: skill.chars().take(120).collect(),
            reason: "a skill name is one segment, with no '/'",
        });
    }
    Ok(uri)
}

/// Characters of a failed tool's output kept as its error in the statistics.
const TOOL_ERROR_CHARS: usize = 200;

/// The reports of the tool calls whose results are in `messages[new_from..]` (what a turn or a
/// client's request brought), each named by its result's tool name or else by its call in
/// `messages`, with the argument pattern of that call; a failed one keeps the start of its
/// output as the error. Results whose call is unknown are not reported.
pub fn tool_reports_in(messages: &[Message], new_from: usize) -> Vec<ToolCallReport> {
    let calls: HashMap<&str, &ToolCall> = messages
        .iter()
        .flat_map(Message::tool_calls)
        .map(|call| (call.id.as_str(), call))
        .collect();
    messages
        .iter()
        .skip(new_from)
        .flat_map(Message::tool_results)
        .filter_map(|result| {
            let call = calls.get(result.call_id.as_str());
            let tool = result
                .tool_name
                .clone()
                .or_else(|| call.map(|call| call.name.clone()))?;
            let failed = result.failed();
            let error = failed.then(|| {
                skald_core::message::join_text(&result.content)
                    .chars()
                    .take(TOOL_ERROR_CHARS)
                    .collect()
            });
            let report = ToolCallReport::new(tool, !failed, None, error);
            // The call's arguments make the advice: which argument patterns work.
            Some(match call {
                Some(call) => report.with_arguments(&call.arguments),
                None => report,
            })
        })
        .collect()
}

/// What a turn's tool reports wrote to the tool statistics.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct ToolMemoryUpdate {
    /// The statistics now stored, one per tool of the reports.
    pub updated: Vec<ToolStats>,
    /// Tools whose name cannot be a URI segment, with why (their reports are not kept).
    pub skipped: Vec<(String, String)>,
}

/// Merges the tool call reports of a finished turn into the agent's tool memories: each tool's
/// entry gets a new version with the updated statistics (or is created). Reports of one tool
/// are merged in one write.
pub fn record_tool_reports(
    store: &dyn MemoryStore,
    tenant: &Tenant,
    agent: &str,
    reports: &[ToolCallReport],
) -> Result<ToolMemoryUpdate, MemoryError> {
    let mut by_tool: Vec<(String, Vec<ToolCallReport>)> = Vec::new();
    for report in reports {
        match by_tool.iter_mut().find(|(tool, _)| *tool == report.tool) {
            Some((_, list)) => list.push(report.clone()),
            None => by_tool.push((report.tool.clone(), vec![report.clone()])),
        }
    }
    let mut update = ToolMemoryUpdate::default();
    for (tool, reports) in by_tool {
        let uri = match tool_uri(agent, &tool) {
            Ok(uri) => uri,
            Err(error) => {
                update.skipped.push((tool, error.to_string()));
                continue;
            }
        };
        let existing = match live_entry(store, tenant, &uri)? {
            Some(memory) => Some(ToolStats::from_json(&memory.l2).map_err(|error| {
                MemoryError::Corrupt(format!(
                    "the tool memory at {uri} is not tool statistics: {error}"
                ))
            })?),
            None => None,
        };
        let exists = existing.is_some();
        let base = existing.unwrap_or_else(|| ToolStats::new(tool.clone()));
        let merged = merge_reports(vec![base], &reports);
        let Some(stats) = merged.into_iter().next() else {
            continue;
        };
        let memory = NewMemory::new(uri, stats.to_json()).with_l0(stats.abstract_line());
        put(store, tenant, memory, exists)?;
        update.updated.push(stats);
    }
    Ok(update)
}

/// Adds a turn's skill uses ([`skald_core::memory::skill_use::skill_uses_in`]) to `agent`'s
/// skill memories: each skill's `stats.json` counts the use (and the success), and a use that
/// went wrong writes what went wrong under its `issues/` (the same error again merges into the
/// entry already there). Returns the skills written.
pub fn record_skill_uses(
    store: &dyn MemoryStore,
    tenant: &Tenant,
    agent: &str,
    uses: &[SkillUse],
) -> Result<Vec<String>, MemoryError> {
    let mut written = Vec::new();
    for skill_use in uses {
        let Ok(dir) = skill_directory(agent, &skill_use.skill) else {
            continue;
        };
        let stats_uri = dir.join(SKILL_STATS_FILE)?;
        let existing = match live_entry(store, tenant, &stats_uri)? {
            Some(memory) => Some(serde_json::from_str::<SkillUsage>(&memory.l2).map_err(
                |error| {
                    MemoryError::Corrupt(format!("{stats_uri} is not skill usage counts: {error}"))
                },
            )?),
            None => None,
        };
        let exists = existing.is_some();
        let mut usage = existing.unwrap_or_default();
        usage.uses = usage.uses.saturating_add(1);
        if skill_use.success {
            usage.successes = usage.successes.saturating_add(1);
        }
        let text = serde_json::to_string(&usage).unwrap_or_default();
        let abstract_line = format!(
            "{}: used {} times, {}% went well",
            skill_use.skill,
            usage.uses,
            usage.success_percent()
        );
        let memory = NewMemory::new(stats_uri, text).with_l0(abstract_line);
        put(store, tenant, memory, exists)?;
        if let Some(error) = &skill_use.error {
            let name = format!("{}.md", slug(error).chars().take(60).collect::<String>());
            if let Ok(issue_uri) = dir.join("issues").and_then(|issues| issues.join(&name)) {
                let content = format!("Using the {} skill went wrong: {error}", skill_use.skill);
                store.add(tenant, NewMemory::new(issue_uri, content))?;
            }
        }
        written.push(skill_use.skill.clone());
    }
    Ok(written)
}

/// The live entry at `uri`; `None` when there is none (never written, or forgotten).
fn live_entry(
    store: &dyn MemoryStore,
    tenant: &Tenant,
    uri: &MemoryUri,
) -> Result<Option<skald_store::memories::Memory>, MemoryError> {
    match store.get(tenant, uri) {
        Ok(memory) => Ok(Some(memory)),
        Err(MemoryError::NotFound { .. } | MemoryError::Forgotten { .. }) => Ok(None),
        Err(error) => Err(error),
    }
}

/// Writes `memory` as a new version of its entry when it `exists`, else as a new entry.
fn put(
    store: &dyn MemoryStore,
    tenant: &Tenant,
    memory: NewMemory,
    exists: bool,
) -> Result<(), MemoryError> {
    if exists {
        store.update(tenant, memory)?;
    } else {
        store.add(tenant, memory)?;
    }
    Ok(())
}

/// Every tool memory of `agent`, and the entries that could not be read as statistics.
pub fn load_tool_stats(
    store: &dyn MemoryStore,
    tenant: &Tenant,
    agent: &str,
) -> Result<(Vec<ToolStats>, Vec<String>), MemoryError> {
    let dir = MemoryUri::parse(&format!("viking://agent/{agent}/tools"))?;
    let mut stats = Vec::new();
    let mut problems = Vec::new();
    for entry in store.ls(tenant, &dir)? {
        match entry.kind {
            DirEntryKind::Entry { .. } => {
                let memory = store.get(tenant, &entry.uri)?;
                match ToolStats::from_json(&memory.l2) {
                    Ok(parsed) => stats.push(parsed),
                    Err(error) => problems.push(format!("{}: {error}", entry.uri)),
                }
            }
            DirEntryKind::Directory { .. } => {}
        }
    }
    Ok((stats, problems))
}

/// What is remembered about `skill` (empty when nothing is).
pub fn load_skill_memory(
    store: &dyn MemoryStore,
    tenant: &Tenant,
    agent: &str,
    skill: &str,
) -> Result<SkillMemory, MemoryError> {
    let dir = skill_directory(agent, skill)?;
    let tree = store.tree(tenant, &dir, 8)?;
    let mut entries: Vec<&TreeNode> = Vec::new();
    collect_entries(&tree, &mut entries);
    let mut memory = SkillMemory::default();
    let mut examples = Vec::new();
    let mut tips = Vec::new();
    let mut issues = Vec::new();
    for node in entries {
        let uri = &node.entry.uri;
        let relative: Vec<&str> = uri.segments().skip(dir.depth()).collect();
        let full = store.get(tenant, uri)?;
        match relative.as_slice() {
            [name] if *name == SKILL_STATS_FILE => {
                memory.usage = serde_json::from_str::<SkillUsage>(&full.l2).ok();
            }
            ["examples", ..] => examples.push((
                full.created_at_ms,
                format!("{} ({})", full.l0.trim(), format_date(full.created_at_ms)),
            )),
            ["issues", ..] => issues.push((full.created_at_ms, full.l0.clone())),
            _ => tips.push((full.created_at_ms, full.l0.clone())),
        }
    }
    for (items, out) in [
        (examples, &mut memory.examples),
        (tips, &mut memory.tips),
        (issues, &mut memory.known_issues),
    ] {
        let mut items = items;
        items.sort_by_key(|item| std::cmp::Reverse(item.0));
        out.extend(
            items
                .into_iter()
                .take(MAX_SKILL_ITEMS)
                .map(|(_, text)| text),
        );
    }
    Ok(memory)
}

fn collect_entries<'a>(node: &'a TreeNode, out: &mut Vec<&'a TreeNode>) {
    match node.entry.kind {
        DirEntryKind::Entry { .. } => out.push(node),
        DirEntryKind::Directory { .. } => {
            for child in &node.children {
                collect_entries(child, out);
            }
        }
    }
}

/// A tool result that got a skill memory appended (or could not).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SkillAugmentation {
    /// The id of the tool call that read the `SKILL.md`; its result is the one appended to.
    pub call_id: String,
    /// The skill's name, as read from the `skills/<name>/SKILL.md` path.
    pub skill: String,
    /// Characters appended (0 when nothing is remembered).
    pub appended_chars: usize,
    /// Why the skill memory could not be read.
    pub error: Option<String>,
}

/// Appends the skill memory to every successful result of a `SKILL.md` read in `messages`
/// (seed 002, Component 4), matched through the paired tool call. The original text stays a
/// byte-exact prefix of the result; a result that already carries a skill memory is left alone.
/// The view is rebuilt from the stored session on every request, so `decided` holds, by tool
/// call id, the appendix chosen the first time a read was seen ("" when nothing was remembered
/// then), and a read found there gets exactly that again: the request's bytes do not change
/// when the skill's memories do. New reads are decided and added to `decided`; a read whose
/// skill memory could not be loaded is not, and is tried again.
pub fn augment_skill_reads_with(
    store: &dyn MemoryStore,
    tenant: &Tenant,
    identity: &MemoryIdentity,
    messages: &mut [Message],
    decided: &mut HashMap<String, String>,
) -> Vec<SkillAugmentation> {
    // Read first, write only to the results that get an appendix: the messages share their
    // blocks with the ones the engine holds until written, and a long session has many results
    // and few skill reads.
    let calls: HashMap<&str, &ToolCall> = messages
        .iter()
        .flat_map(Message::tool_calls)
        .map(|call| (call.id.as_str(), call))
        .collect();
    let mut reads = Vec::new();
    for (message_index, message) in messages.iter().enumerate() {
        for (block_index, block) in message.content.iter().enumerate() {
            let Block::ToolResult(result) = block else {
                continue;
            };
            let Some(skill) = calls
                .get(result.call_id.as_str())
                .copied()
                .and_then(skill_read)
            else {
                continue;
            };
            let text = skald_core::message::join_text(&result.content);
            if result.failed() || text.contains(SKILL_MEMORY_MARKER) {
                continue;
            }
            reads.push((message_index, block_index, result.call_id.clone(), skill));
        }
    }
    let mut out = Vec::new();
    for (message_index, block_index, call_id, skill) in reads {
        let mut augmentation = SkillAugmentation {
            call_id: call_id.clone(),
            skill: skill.clone(),
            appended_chars: 0,
            error: None,
        };
        let appendix = match decided.get(&call_id) {
            Some(appendix) => Some(appendix.clone()),
            None => match load_skill_memory(store, tenant, identity.agent(), &skill) {
                Ok(memory) => {
                    let appendix = render_skill_memory(&skill, &memory).unwrap_or_default();
                    decided.insert(call_id, appendix.clone());
                    Some(appendix)
                }
                Err(error) => {
                    augmentation.error = Some(error.to_string());
                    None
                }
            },
        };
        if let Some(appendix) = appendix.filter(|appendix| !appendix.is_empty()) {
            let result = messages
                .get_mut(message_index)
                .and_then(|message| message.content.get_mut(block_index))
                .and_then(Block::as_tool_result_mut);
            if let Some(result) = result {
                augmentation.appended_chars = appendix.chars().count();
                append_text(&mut result.content, &appendix);
            }
        }
        out.push(augmentation);
    }
    out
}

/// Appends to the last text block (so a result spelled as one string stays one string), or adds
/// a text block when there is none.
fn append_text(content: &mut Vec<Block>, appendix: &str) {
    let last_text = content.iter_mut().rev().find_map(Block::as_text_mut);
    match last_text {
        Some(text) => text.text.push_str(appendix),
        None => content.push(Block::text(appendix.trim_start())),
    }
}
