//! `skald hook <event>`: Claude Code's hooks, answered by skald's engine on the local store —
//! the hook's JSON on stdin, the answer on stdout — for a Claude Code that does not go through
//! skald's proxy (a subscription login, a company gateway already in place).
//!
//! - `post-tool-use`: a tool output over the offload threshold is stored first, then replaced
//!   for the model by skald's placeholder and digest (`hookSpecificOutput.updatedToolOutput`);
//!   the model gets the original back with the MCP tool `fetch_original_data` (`skald mcp`).
//!   An output under the threshold, or one whose shape skald does not know, is left alone
//!   (no answer): a hook never loses or garbles what the tool returned.
//!
//! A hook must be fast: it opens the one database, makes one engine call, and exits; no model
//! and no embedder is built.

use std::io::Read;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use serde_json::{Value, json};

use crate::config::Config;
use crate::home::Home;
use crate::local::{self, Models, StoreKind, tenant_arg};

/// The Claude Code hook events skald answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HookEvent {
    /// After a tool ran: a large output is offloaded behind a placeholder.
    PostToolUse,
}

#[derive(Debug, Args)]
pub struct HookArgs {
    /// The event (as Claude Code's `hooks.json` names the command's job).
    #[arg(value_enum)]
    pub event: HookEvent,
    /// The tenant whose refs the hook writes (default: [memory] tenant in skald.toml, else
    /// `default`; the MCP server `skald mcp` must use the same).
    #[arg(long)]
    pub tenant: Option<String>,
}

pub fn run(args: &HookArgs, config: &Config, home: &Home) -> Result<ExitCode> {
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .context("cannot read the hook's JSON from stdin")?;
    let hook: Value = serde_json::from_str(&input)
        .with_context(|| format!("the hook input on stdin is not JSON: {:.200}", input.trim()))?;
    let answer = match args.event {
        HookEvent::PostToolUse => post_tool_use(&hook, args, config, home)?,
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
    args: &HookArgs,
    config: &Config,
    home: &Home,
) -> Result<Option<Value>> {
    if hook["hook_event_name"]
        .as_str()
        .is_some_and(|name| name != "PostToolUse")
    {
        bail!(
            "`skald hook post-tool-use` got a {} event: name the matching event in hooks.json",
            hook["hook_event_name"]
        );
    }
    // skald's own tools (over MCP) are never offloaded: the model asked for that original.
    let tool = hook["tool_name"].as_str().unwrap_or_default();
    if tool.ends_with("fetch_original_data") {
        return Ok(None);
    }
    let Some(output) = ToolOutput::of(&hook["tool_response"]) else {
        return Ok(None);
    };
    let tenant = tenant_arg(Some(
        args.tenant.as_deref().unwrap_or(&config.memory.tenant),
    ))?;
    let engine_config = local::engine_config(config, None, false, Models::default())?;
    let engine = local::local_engine(home, StoreKind::Refs, engine_config)?;
    let Some(offloaded) = engine
        .offload_output(&tenant, &output.text())
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

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
