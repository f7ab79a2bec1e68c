//! `skald hook <event>`: Claude Code's hooks, answered by skald's engine on the local store —
//! the hook's JSON on stdin, the answer on stdout — for a Claude Code that does not go through
//! skald's proxy (a subscription login, a company gateway already in place).
//!
//! - `post-tool-use`: a tool output over the offload threshold is stored first, then replaced
//!   for the model by skald's placeholder and digest (`hookSpecificOutput.updatedToolOutput`);
//!   the model gets the original back with the MCP tool `fetch_original_data` (`skald mcp`).
//!   An output under the threshold, or one whose shape skald does not know, is left alone
//!   (no answer): a hook never loses or garbles what the tool returned. Every call (but
//!   skald's own) goes into the agent's tool memory (`Engine::record_host_tool_calls`): its
//!   count, success, error and argument pattern.
//! - `user-prompt-submit`: the memories recalled for the prompt and the user's four prompts
//!   before it, read from the transcript (`Engine::recall_for_prompt_after`, the proxy's
//!   per-turn recall over the last five user messages) as `additionalContext`.
//! - `pre-compact`: the transcript at `transcript_path` compacted by skald's summarizer into
//!   skald's copy of the session, its span archived for memory extraction
//!   (`Engine::compact_transcript`). Its answer is empty: Claude Code 2.1.332 appends a
//!   PreCompact hook's stdout to its own summarizer's instructions, and skald's summary is not
//!   an instruction.
//! - `session-start` with source `compact`: that summary (`Engine::compaction_summary`) as
//!   `additionalContext`, within Claude Code's 10,000-character cut of a hook's output; with
//!   `startup`, `resume` or `clear`, what memory holds for the session
//!   (`Engine::memory_at_session_start`: the profile, the tool memories, the memory listing).
//! - `session-end`: the transcript compacted and archived the same way, then what that left
//!   unarchived (`Engine::end_session`), so its memories are extracted when the session ends
//!   however short it was.
//!
//! A hook must be fast: it opens the one database, makes one engine call, and exits; no
//! embedder is built. The two events that compact (`pre-compact`, `session-end`) would make
//! Claude Code wait for an import and a summary (tens of milliseconds on a short transcript, and
//! seconds with a summary model), so they hand the work to a job (`hook_jobs`): the hook checks
//! its input, writes the job durably, starts a detached `skald` to run it and answers at once;
//! `session-start` after a compaction waits for the session's jobs before it reads the summary.

use std::io::Read;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use serde_json::{Value, json};

use skald_core::ids::{SessionId, Tenant};
use skald_core::memory::usage::ToolCallReport;
use skald_engine::SessionEndReason;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::home::Home;
use crate::hook_jobs;
use crate::local::{self, Models, StoreKind, StoreLocation, tenant_arg};

/// The Claude Code hook events skald answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HookEvent {
    /// After a tool ran: a large output is offloaded behind a placeholder.
    PostToolUse,
    /// A prompt was submitted: recalled memories are added to the context.
    UserPromptSubmit,
    /// Claude Code is about to compact: skald compacts the transcript with its summarizer.
    PreCompact,
    /// A session (re)started: after a compaction, skald's summary is added to the context.
    SessionStart,
    /// The session ended: its transcript is archived for memory extraction.
    SessionEnd,
}

impl HookEvent {
    /// The event's name on the command line (`skald hook <name>`).
    fn cli_name(self) -> String {
        self.to_possible_value()
            .map_or_else(String::new, |value| value.get_name().to_owned())
    }

    /// The event's name in Claude Code's hook input (`hook_event_name`).
    fn claude_name(self) -> &'static str {
        match self {
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::PreCompact => "PreCompact",
            HookEvent::SessionStart => "SessionStart",
            HookEvent::SessionEnd => "SessionEnd",
        }
    }
}

/// The most `additionalContext` Claude Code keeps whole (2.1.332 cuts a hook's output past
/// 10,000 characters, keeping its head and tail).
pub const MAX_CONTEXT_CHARS: usize = 10_000;

#[derive(Debug, Args)]
pub struct HookArgs {
    /// The event (as Claude Code's `hooks.json` names the command's job).
    #[arg(value_enum)]
    pub event: HookEvent,
    /// The tenant whose refs the hook writes (default: [memory] tenant in skald.toml, else
    /// `default`; the MCP server `skald mcp` must use the same).
    #[arg(long)]
    pub tenant: Option<String>,
    /// Run the job file a `pre-compact` or `session-end` hook wrote (the detached worker).
    #[arg(long, value_name = "FILE", hide = true)]
    pub run_job: Option<std::path::PathBuf>,
}

pub fn run(
    args: &HookArgs,
    config: &Config,
    config_path: Option<&std::path::Path>,
    home: &Home,
) -> Result<ExitCode> {
    if let Some(job) = &args.run_job {
        hook_jobs::run_job(job, |job| {
            let tenant = tenant_arg(Some(&job.tenant))?;
            let session = SessionId::parse(&job.session)
                .with_context(|| format!("the job's session {:?}", job.session))?;
            let transcript = job.read_transcript()?;
            compact_now(
                &session,
                &job.transcript_path,
                &transcript,
                &tenant,
                (config, home),
                job.event == HookEvent::SessionEnd.cli_name(),
            )
        })?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .context("cannot read the hook's JSON from stdin")?;
    let hook: Value = serde_json::from_str(&input)
        .with_context(|| format!("the hook input on stdin is not JSON: {:.200}", input.trim()))?;
    if let Some(name) = hook["hook_event_name"].as_str()
        && name != args.event.claude_name()
    {
        bail!(
            "`skald hook {}` got a {name} event: name the matching event in hooks.json",
            args.event.cli_name()
        );
    }
    let tenant = tenant_arg(Some(
        args.tenant.as_deref().unwrap_or(&config.memory.tenant),
    ))?;
    let answer = match args.event {
        HookEvent::PostToolUse => post_tool_use(&hook, &tenant, config, home)?,
        HookEvent::UserPromptSubmit => user_prompt_submit(&hook, &tenant, config, home)?,
        HookEvent::PreCompact | HookEvent::SessionEnd => {
            compact_transcript(args.event, &hook, &tenant, (config, config_path), home)?
        }
        HookEvent::SessionStart => session_start(&hook, &tenant, config, home)?,
    };
    if let Some(answer) = answer {
        println!("{answer}");
    }
    Ok(ExitCode::SUCCESS)
}

/// A tool output skald knows how to replace, in its own shape.
enum ToolOutput<'a> {
    /// A plain string.
    Text(&'a str),
    /// Bash's `{stdout, stderr, interrupted, …}` object.
    Shell(&'a serde_json::Map<String, Value>),
}

impl<'a> ToolOutput<'a> {
    /// The output's shape, if skald knows it.
    fn of(response: &'a Value) -> Option<ToolOutput<'a>> {
        match response {
            Value::String(text) => Some(ToolOutput::Text(text)),
            Value::Object(fields) if fields.get("stdout").is_some_and(Value::is_string) => {
                Some(ToolOutput::Shell(fields))
            }
            Value::Object(_)
            | Value::Null
            | Value::Bool(_)
            | Value::Number(_)
            | Value::Array(_) => None,
        }
    }

    /// What the model would read.
    fn text(&self) -> String {
        match self {
            ToolOutput::Text(text) => (*text).to_owned(),
            ToolOutput::Shell(fields) => {
                let field = |name: &str| fields.get(name).and_then(Value::as_str).unwrap_or("");
                match field("stderr") {
                    "" => field("stdout").to_owned(),
                    stderr => format!("{}\n{stderr}", field("stdout")),
                }
            }
        }
    }

    /// The same shape with `placeholder` standing for the whole output (stderr included, as
    /// it went into the stored original).
    fn replaced_by(&self, placeholder: String) -> Value {
        match self {
            ToolOutput::Text(_) => Value::String(placeholder),
            ToolOutput::Shell(fields) => {
                let mut replaced = (*fields).clone();
                replaced.insert("stdout".to_owned(), Value::String(placeholder));
                replaced.insert("stderr".to_owned(), Value::String(String::new()));
                Value::Object(replaced)
            }
        }
    }
}

fn post_tool_use(
    hook: &Value,
    tenant: &Tenant,
    config: &Config,
    home: &Home,
) -> Result<Option<Value>> {
    // skald's own tools (over MCP) are never offloaded: the model asked for that original.
    let tool = hook["tool_name"].as_str().unwrap_or_default();
    if tool.ends_with("fetch_original_data") {
        return Ok(None);
    }
    let engine = hook_engine(config, home, StoreKind::Refs, true, Models::default())?;
    // The call goes into the agent's tool memory (issue 28, gap 7); a failure to write it is
    // said and leaves the output as it is handled below.
    if !tool.is_empty() && !tool.starts_with("mcp__plugin_skald_") {
        let report = tool_report(tool, &hook["tool_input"], &hook["tool_response"]);
        if let Err(error) = engine.record_host_tool_calls(tenant, &[report]) {
            eprintln!("skald: the {tool} call was not added to the tool memory: {error}");
        }
    }
    let Some(output) = ToolOutput::of(&hook["tool_response"]) else {
        return Ok(None);
    };
    let Some(offloaded) = engine
        .offload_output(tenant, &output.text())
        .context("cannot store the tool output")?
    else {
        return Ok(None);
    };
    Ok(Some(json!({
        "hookSpecificOutput": {
            "hookEventName": "PostToolUse",
            "updatedToolOutput": output.replaced_by(offloaded.placeholder),
        }
    })))
}

/// What a `PostToolUse` says of a call: its tool, its argument pattern, and whether it failed —
/// a response that says so (`is_error`, `error`, or a shell interrupted) is a failure, with
/// the start of its text as the error.
fn tool_report(tool: &str, input: &Value, response: &Value) -> ToolCallReport {
    let failure = match response {
        Value::Object(fields) => {
            let flagged = fields.get("is_error").and_then(Value::as_bool) == Some(true)
                || fields.get("interrupted").and_then(Value::as_bool) == Some(true);
            let error = fields.get("error").and_then(Value::as_str);
            match (flagged, error) {
                (_, Some(error)) => Some(error.to_owned()),
                (true, None) => Some(
                    ToolOutput::of(response)
                        .map(|output| output.text())
                        .unwrap_or_else(|| response.to_string()),
                ),
                (false, None) => None,
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Array(_) => {
            None
        }
    };
    let error = failure.map(|text| text.chars().take(200).collect());
    ToolCallReport::new(tool, error.is_none(), None, error).with_arguments(input)
}

/// A string field of the hook input, required.
fn field<'a>(hook: &'a Value, name: &str) -> Result<&'a str> {
    hook[name].as_str().with_context(|| {
        format!("the hook input has no string `{name}` (Claude Code sends one with this event)")
    })
}

/// The hook's session, as skald stores it: Claude Code's own session id.
fn session_of(hook: &Value) -> Result<SessionId> {
    let id = field(hook, "session_id")?;
    SessionId::parse(id).with_context(|| format!("the hook's session_id {id:?}"))
}

/// `additionalContext` for `event`, the answer every context-adding hook gives.
fn additional_context(event: HookEvent, context: String) -> Value {
    json!({
        "hookSpecificOutput": {
            "hookEventName": event.claude_name(),
            "additionalContext": context,
        }
    })
}

fn user_prompt_submit(
    hook: &Value,
    tenant: &Tenant,
    config: &Config,
    home: &Home,
) -> Result<Option<Value>> {
    let prompt = field(hook, "prompt")?;
    let earlier = earlier_prompts(hook, prompt);
    let engine = hook_engine(config, home, StoreKind::Memories, true, Models::default())?;
    let recall = current_thread()?
        .block_on(engine.recall_for_prompt_after(tenant, &earlier, prompt))
        .context("cannot recall memories for the prompt")?;
    Ok(recall.map(|recall| {
        let context: String = recall.context.chars().take(MAX_CONTEXT_CHARS).collect();
        additional_context(HookEvent::UserPromptSubmit, context)
    }))
}

/// Hands the compaction of the hook's transcript to a detached job (run inline when no job can
/// be started: the work is never dropped).
fn compact_transcript(
    event: HookEvent,
    hook: &Value,
    tenant: &Tenant,
    (config, config_path): (&Config, Option<&std::path::Path>),
    home: &Home,
) -> Result<Option<Value>> {
    let session = session_of(hook)?;
    let path = field(hook, "transcript_path")?;
    if path.is_empty() {
        // Claude Code sends an empty path when it keeps no transcript: nothing to compact.
        return Ok(None);
    }
    // The transcript as it is now: Claude Code appends to it after the hook returns.
    let length = std::fs::metadata(path)
        .with_context(|| format!("cannot read the transcript {path}"))?
        .len();
    let job = hook_jobs::Job {
        event: event.cli_name(),
        tenant: tenant.to_string(),
        session: session.to_string(),
        transcript_path: path.to_owned(),
        transcript_bytes: length,
    };
    match hook_jobs::start(home, &job, config_path) {
        Ok(()) => Ok(None),
        Err(error) => {
            eprintln!("skald: running the compaction in the hook: {error:#}");
            let transcript = job.read_transcript()?;
            compact_now(
                &session,
                path,
                &transcript,
                tenant,
                (config, home),
                event == HookEvent::SessionEnd,
            )?;
            Ok(None)
        }
    }
}

/// Imports and compacts a transcript with skald's summarizer, its span archived for memory
/// extraction (`Engine::compact_transcript`); at the session's end, what the compaction left
/// unarchived too (`Engine::end_session`: a session too short for its summary to be smaller
/// than it is not compacted, and would otherwise leave no memory).
fn compact_now(
    session: &SessionId,
    path: &str,
    transcript: &str,
    tenant: &Tenant,
    (config, home): (&Config, &Home),
    ends_session: bool,
) -> Result<()> {
    let models = Models {
        summarizer: true,
        embedder: false,
    };
    let engine = hook_engine(config, home, StoreKind::Sessions, true, models)?;
    let cancel = CancellationToken::new();
    let runtime = current_thread()?;
    runtime
        .block_on(engine.compact_transcript(tenant, session, transcript, &cancel))
        .map_err(local::store_error)
        .with_context(|| format!("cannot compact the transcript {path}"))?;
    if ends_session {
        runtime
            .block_on(engine.end_session(tenant, session, SessionEndReason::Ended))
            .map_err(local::store_error)
            .with_context(|| format!("cannot archive the end of the session {session}"))?;
    }
    Ok(())
}

/// The user's earlier prompts of the session, oldest first, read from the hook's transcript
/// (Claude Code's JSONL): recall searches with the last five user messages, as the proxy's does.
/// Tool results, compaction summaries and Claude Code's own meta lines are not prompts; a
/// transcript that cannot be read gives none (recall then uses the prompt alone).
fn earlier_prompts(hook: &Value, prompt: &str) -> Vec<String> {
    let Some(path) = hook["transcript_path"]
        .as_str()
        .filter(|path| !path.is_empty())
    else {
        return Vec::new();
    };
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let Ok(read) = skald_core::codec::claude_code::decode(&text) else {
        return Vec::new();
    };
    let flagged = |message: &skald_core::message::Message, key: &str| {
        message.extra.get(key).and_then(Value::as_bool) == Some(true)
    };
    let mut prompts: Vec<String> = read
        .conversation
        .messages
        .iter()
        .filter(|message| message.role == skald_core::message::Role::User)
        .filter(|message| !flagged(message, "isMeta") && !flagged(message, "isCompactSummary"))
        .map(skald_core::message::Message::plain_text)
        .filter(|text| !text.trim().is_empty() && !text.trim_start().starts_with('<'))
        .collect();
    // The prompt being submitted may already be the transcript's last line.
    if prompts
        .last()
        .is_some_and(|last| last.trim() == prompt.trim())
    {
        prompts.pop();
    }
    let keep = prompts.len().saturating_sub(EARLIER_PROMPTS);
    prompts.split_off(keep)
}

/// Earlier prompts read for recall: with the one being submitted, seed 002's five.
const EARLIER_PROMPTS: usize = 4;

/// What Claude Code reads first after compacting: where the summary comes from.
const SUMMARY_HEADER: &str = "skald's summary of the conversation before this compaction \
(placeholders [REF_ID: …] name originals that fetch_original_data gives back):\n\n";

/// What Claude Code reads first when a session starts: where the memory comes from.
const MEMORY_HEADER: &str = "skald's long-term memory for this session (search_memories and \
memory_read reach the rest):\n\n";

fn session_start(
    hook: &Value,
    tenant: &Tenant,
    config: &Config,
    home: &Home,
) -> Result<Option<Value>> {
    if hook["source"].as_str() != Some("compact") {
        // startup, resume, clear: the session starts with what memory holds.
        let engine = hook_engine(config, home, StoreKind::Memories, true, Models::default())?;
        let memory = engine
            .memory_at_session_start(tenant)
            .map_err(local::store_error)?;
        return Ok(memory.map(|memory| {
            let room = MAX_CONTEXT_CHARS - MEMORY_HEADER.chars().count();
            let memory: String = memory.chars().take(room).collect();
            additional_context(HookEvent::SessionStart, format!("{MEMORY_HEADER}{memory}"))
        }));
    }
    let session = session_of(hook)?;
    // The summary is the one the PreCompact hook's job is writing.
    hook_jobs::wait_for_session(home, &session, hook_jobs::SESSION_START_WAIT);
    let engine = hook_engine(config, home, StoreKind::Sessions, false, Models::default())?;
    let room = MAX_CONTEXT_CHARS - SUMMARY_HEADER.chars().count();
    let summary = engine
        .compaction_summary(tenant, &session, room)
        .map_err(local::store_error)?;
    Ok(summary.map(|summary| {
        additional_context(
            HookEvent::SessionStart,
            format!("{SUMMARY_HEADER}{summary}"),
        )
    }))
}

/// A runtime on this thread: a hook makes one engine call, and a pool of workers would only
/// cost their start.
fn current_thread() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// The local engine one hook call needs: the configuration's policy and stores (`[database]` or
/// the data directory), opened from the store it uses first, with memory and models as asked.
fn hook_engine(
    config: &Config,
    home: &Home,
    first: StoreKind,
    memory: bool,
    models: Models,
) -> Result<skald_engine::Engine> {
    let engine_config = local::engine_config(config, None, memory, models)?;
    local::local_engine(
        home,
        &StoreLocation::of(config),
        first,
        &config.refs,
        engine_config,
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_post_tool_use_is_a_tool_report_with_its_pattern_and_failure() {
        let ok = tool_report(
            "Bash",
            &json!({"command": "cargo test -q"}),
            &json!({"stdout": "ok", "stderr": "", "interrupted": false}),
        );
        assert!(ok.success && ok.error.is_none());
        assert_eq!(ok.pattern.as_deref(), Some("cargo test"));
        let interrupted = tool_report(
            "Bash",
            &json!({"command": "sleep 900"}),
            &json!({"stdout": "", "stderr": "killed", "interrupted": true}),
        );
        assert!(!interrupted.success);
        assert_eq!(interrupted.error.as_deref(), Some("\nkilled"));
        let failed = tool_report(
            "WebFetch",
            &json!({"url": "https://x", "prompt": "p"}),
            &json!({"error": "HTTP 404"}),
        );
        assert_eq!(
            (
                failed.success,
                failed.error.as_deref(),
                failed.pattern.as_deref()
            ),
            (false, Some("HTTP 404"), Some("prompt, url"))
        );
        assert!(tool_report("Read", &json!({"file_path": "a"}), &json!("text")).success);
    }

    #[test]
    fn a_bash_output_is_replaced_in_its_own_shape_with_stderr_in_the_original() {
        let response = json!({"stdout": "1\n2", "stderr": "warning: x", "interrupted": false, "isImage": false});
        let output = ToolOutput::of(&response).unwrap();
        assert_eq!(output.text(), "1\n2\nwarning: x");
        let replaced = output.replaced_by("[REF_ID: abc]".to_owned());
        assert_eq!(
            replaced,
            json!({"stdout": "[REF_ID: abc]", "stderr": "", "interrupted": false, "isImage": false})
        );
    }

    #[test]
    fn a_string_output_is_replaced_by_a_string_and_unknown_shapes_are_left_alone() {
        let response = json!("plain output");
        let output = ToolOutput::of(&response).unwrap();
        assert_eq!(output.text(), "plain output");
        assert_eq!(output.replaced_by("p".to_owned()), json!("p"));
        for unknown in [
            json!({"type": "text", "file": {"content": "x"}}),
            json!([1, 2]),
            Value::Null,
        ] {
            assert!(ToolOutput::of(&unknown).is_none(), "{unknown}");
        }
    }
}
