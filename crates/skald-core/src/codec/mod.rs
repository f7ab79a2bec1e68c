//! Transcript and wire codecs: pure decode/encode between the formats agents speak and the neutral
//! [`crate::message`] model.
//!
//! Read and write: [`openai`] (Chat Completions), [`responses`] (OpenAI Responses), [`anthropic`]
//! (Messages), [`openclaw`] (pi/OpenClaw session JSONL v3). Read only (import): [`claude_code`],
//! [`mini_swe`], [`swe_agent`]. [`detect`] tells the format from the content; [`decode`] detects
//! and decodes any of them (but Responses, which [`detect`] does not know yet) to a [`Decoded`]
//! conversation. Each codec has its own error type; JSONL readers report every bad line as a
//! [`LineIssue`] and go on.

pub mod anthropic;
pub mod claude_code;
pub mod mini_swe;
pub mod openai;
pub mod openclaw;
pub mod responses;
pub mod swe_agent;

mod detect;
mod json;
mod wire;

pub use detect::{DetectError, detect};
pub use wire::{WireError, WireResponse};

use crate::message::Conversation;

/// Every format skald reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Format {
    /// OpenAI Chat Completions request (`messages`, `tools`).
    OpenAiRequest,
    /// OpenAI Chat Completions response (`choices`).
    OpenAiResponse,
    /// Anthropic Messages request (`system`, `messages`, `tools`).
    AnthropicRequest,
    /// Anthropic Messages response (`type: "message"`).
    AnthropicResponse,
    /// pi / OpenClaw session JSONL, versions 1 to 4.
    OpenClawSession,
    /// Claude Code session JSONL.
    ClaudeCode,
    /// mini-swe-agent `.traj.json`.
    MiniSweAgent,
    /// SWE-agent `.traj` (with or without function calling).
    SweAgent,
}

impl Format {
    /// The stable name used in CLI output.
    pub fn name(self) -> &'static str {
        match self {
            Format::OpenAiRequest => "openai-request",
            Format::OpenAiResponse => "openai-response",
            Format::AnthropicRequest => "anthropic-request",
            Format::AnthropicResponse => "anthropic-response",
            Format::OpenClawSession => "openclaw-session",
            Format::ClaudeCode => "claude-code",
            Format::MiniSweAgent => "mini-swe-agent",
            Format::SweAgent => "swe-agent",
        }
    }
}

/// A problem with one line (1-based) of a JSONL input that the reader skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineIssue {
    /// The 1-based line number in the input.
    pub line: usize,
    /// What was wrong with the line and what the reader did about it.
    pub message: String,
}

impl std::fmt::Display for LineIssue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// A transcript decoded from any format: the model-visible conversation plus what was skipped.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    /// The format the input was recognised as.
    pub format: Format,
    /// What the input says, in the neutral model.
    pub conversation: Conversation,
    /// Lines that could not be read, each with the reason.
    pub issues: Vec<LineIssue>,
    /// Lines the format defines but that carry nothing for the model (Claude Code progress and
    /// file-history lines, OpenClaw label entries…).
    pub ignored_lines: usize,
}

/// Why [`decode`] could not read an input at all.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The input is empty, not JSON, or matches no supported format.
    #[error(transparent)]
    Detect(#[from] DetectError),
    /// The input looked like a Chat Completions request or response but did not decode.
    #[error("OpenAI Chat Completions: {0}")]
    OpenAi(WireError),
    /// The input looked like an Anthropic Messages request or response but did not decode.
    #[error("Anthropic Messages: {0}")]
    Anthropic(WireError),
    /// The input looked like an OpenClaw session file but did not decode.
    #[error("OpenClaw session: {0}")]
    OpenClaw(#[from] openclaw::OpenClawError),
    /// The input looked like a Claude Code session but did not decode.
    #[error("Claude Code session: {0}")]
    ClaudeCode(#[from] claude_code::ClaudeCodeError),
    /// The input looked like a mini-swe-agent trajectory but did not decode.
    #[error("mini-swe-agent trajectory: {0}")]
    MiniSwe(#[from] mini_swe::MiniSweError),
    /// The input looked like a SWE-agent trajectory but did not decode.
    #[error("SWE-agent trajectory: {0}")]
    SweAgent(#[from] swe_agent::SweAgentError),
}

/// Detects the format of `input` and decodes it.
///
/// For an OpenClaw session the conversation is the model context rebuilt from the current leaf;
/// for a response it is the one message the response carries.
pub fn decode(input: &str) -> Result<Decoded, DecodeError> {
    let format = detect(input)?;
    decode_as(format, input)
}

/// Decodes `input` as the given format.
pub fn decode_as(format: Format, input: &str) -> Result<Decoded, DecodeError> {
    let plain = |conversation: Conversation| Decoded {
        format,
        conversation,
        issues: Vec::new(),
        ignored_lines: 0,
    };
    Ok(match format {
        Format::OpenAiRequest => {
            plain(openai::decode_request_str(input).map_err(DecodeError::OpenAi)?)
        }
        Format::OpenAiResponse => plain(Conversation {
            messages: vec![
                openai::decode_response_str(input)
                    .map_err(DecodeError::OpenAi)?
                    .message,
            ],
            ..Conversation::default()
        }),
        Format::AnthropicRequest => {
            plain(anthropic::decode_request_str(input).map_err(DecodeError::Anthropic)?)
        }
        Format::AnthropicResponse => plain(Conversation {
            messages: vec![
                anthropic::decode_response_str(input)
                    .map_err(DecodeError::Anthropic)?
                    .message,
            ],
            ..Conversation::default()
        }),
        Format::OpenClawSession => {
            let read = openclaw::decode_session(input)?;
            let ignored_lines = read.ignored_lines;
            Decoded {
                format,
                conversation: Conversation {
                    messages: read.session.build_context(None),
                    ..Conversation::default()
                },
                issues: read.issues,
                ignored_lines,
            }
        }
        Format::ClaudeCode => {
            let read = claude_code::decode(input)?;
            Decoded {
                format,
                conversation: read.conversation,
                issues: read.issues,
                ignored_lines: read.ignored_lines,
            }
        }
        Format::MiniSweAgent => plain(mini_swe::decode(input)?),
        Format::SweAgent => plain(swe_agent::decode(input)?),
    })
}
