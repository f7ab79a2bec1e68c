//! `skald inspect`: what each transcript holds — format, counts, tool-result sizes, tokens and
//! what repair would change.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use serde::Serialize;
use skald_core::codec::{self, Decoded};
use skald_core::message::Message;
use skald_core::repair::{RepairReport, RepairSettings, repair};
use skald_core::stats::{ConversationStats, Distribution};
use skald_core::tokens::{Encoding, TokenCounter, estimate_messages_tokens};

use crate::files;
use crate::output::{self, Mode};

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// Transcript files or directories (searched recursively for .jsonl, .json, .traj).
    #[arg(required = true, value_name = "FILE")]
    pub paths: Vec<PathBuf>,
    /// BPE used for exact counts: auto (from the transcript's model), o200k_base or cl100k_base.
    #[arg(long, default_value = "auto", value_parser = parse_encoding_choice)]
    pub encoding: EncodingChoice,
}

/// Which BPE to count with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncodingChoice {
    Auto,
    Fixed(Encoding),
}

pub fn parse_encoding_choice(raw: &str) -> Result<EncodingChoice, String> {
    match raw {
        "auto" => Ok(EncodingChoice::Auto),
        "o200k_base" | "o200k" => Ok(EncodingChoice::Fixed(Encoding::O200kBase)),
        "cl100k_base" | "cl100k" => Ok(EncodingChoice::Fixed(Encoding::Cl100kBase)),
        other => Err(format!(
            "unknown encoding {other:?}: expected auto, o200k_base or cl100k_base"
        )),
    }
}

impl EncodingChoice {
    /// The encoding for a transcript whose model is `model` (if known).
    pub fn resolve(self, model: Option<&str>) -> Encoding {
        match self {
            EncodingChoice::Fixed(encoding) => encoding,
            EncodingChoice::Auto => model.map_or(Encoding::O200kBase, Encoding::for_model),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct TokenFigures {
    pub estimate: u64,
    pub bpe: u64,
    pub encoding: &'static str,
}

#[derive(Debug, Serialize)]
pub struct ResultChars {
    pub count: usize,
    pub median: usize,
    pub p90: usize,
    pub max: usize,
}

impl From<Distribution> for ResultChars {
    fn from(d: Distribution) -> ResultChars {
        ResultChars {
            count: d.count,
            median: d.median,
            p90: d.p90,
            max: d.max,
        }
    }
}

/// One file's report: the keys `skald inspect --json` promises.
#[derive(Debug, Serialize)]
pub struct FileReport {
    pub file: String,
    pub format: &'static str,
    pub messages: BTreeMap<String, usize>,
    pub tool_calls: BTreeMap<String, usize>,
    pub tool_result_chars: ResultChars,
    pub tokens: TokenFigures,
    pub repair: RepairReport,
    /// Lines the decoder could not read, with the reason.
    pub issues: Vec<String>,
    /// Lines the format defines but that carry nothing for the model.
    pub ignored_lines: usize,
}

/// A file that could not be read at all.
#[derive(Debug, Serialize)]
pub struct FileFailure {
    pub file: String,
    pub error: String,
}

#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Entry {
    Report(Box<FileReport>),
    Failure(FileFailure),
}

/// The model this conversation talks to, for choosing an encoding.
pub fn conversation_model(decoded: &Decoded) -> Option<&str> {
    decoded.conversation.model.as_deref().or_else(|| {
        decoded
            .conversation
            .messages
            .iter()
            .find_map(|m| m.meta.model.as_deref())
    })
}

pub fn report(file: String, decoded: Decoded, encoding: EncodingChoice) -> FileReport {
    let encoding = encoding.resolve(conversation_model(&decoded));
    let stats = ConversationStats::of(&decoded.conversation.messages);
    let visible: Vec<Message> = decoded
        .conversation
        .messages
        .into_iter()
        .filter(Message::is_model_visible)
        .collect();
    let mut counter = TokenCounter::new(encoding);
    let tokens = TokenFigures {
        estimate: estimate_messages_tokens(&visible),
        bpe: counter.count_messages(&visible),
        encoding: encoding.name(),
    };
    let (_, repair) = repair(visible, &RepairSettings::default());
    FileReport {
        file,
        format: decoded.format.name(),
        messages: stats.messages_by_role,
        tool_calls: stats.tool_calls_by_name,
        tool_result_chars: stats.tool_result_chars.into(),
        tokens,
        repair,
        issues: decoded.issues.iter().map(ToString::to_string).collect(),
        ignored_lines: decoded.ignored_lines,
    }
}

pub fn run(args: &InspectArgs, mode: Mode) -> Result<ExitCode> {
    let paths = files::expand(&args.paths)?;
    let mut entries = Vec::with_capacity(paths.len());
    for path in &paths {
        let file = path.display().to_string();
        let decoded = files::read_text(path)
            .and_then(|text| codec::decode(&text).map_err(anyhow::Error::from));
        entries.push(match decoded {
            Ok(decoded) => Entry::Report(Box::new(report(file, decoded, args.encoding))),
            Err(error) => {
                eprintln!("skald: {file}: {error:#}");
                Entry::Failure(FileFailure {
                    file,
                    error: format!("{error:#}"),
                })
            }
        });
    }
    output::emit(mode, &entries, render)?;
    let failed = entries.iter().any(|e| matches!(e, Entry::Failure(_)));
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn join_counts(counts: &BTreeMap<String, usize>) -> String {
    let mut parts: Vec<(&String, &usize)> = counts.iter().collect();
    parts.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    parts
        .iter()
        .map(|(name, count)| format!("{name} {count}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn render(entries: &Vec<Entry>) -> comfy_table::Table {
    let mut table = output::table(&[
        "file",
        "format",
        "messages",
        "tool calls",
        "tool result chars\ncount/median/p90/max",
        "tokens\nestimate / bpe",
        "repair",
    ]);
    for entry in entries {
        match entry {
            Entry::Report(r) => {
                let c = &r.tool_result_chars;
                table.add_row(vec![
                    r.file.clone(),
                    r.format.to_owned(),
                    join_counts(&r.messages),
                    join_counts(&r.tool_calls),
                    format!("{}/{}/{}/{}", c.count, c.median, c.p90, c.max),
                    format!(
                        "{} / {}\n({})",
                        r.tokens.estimate, r.tokens.bpe, r.tokens.encoding
                    ),
                    r.repair.summary(),
                ]);
            }
            Entry::Failure(f) => {
                table.add_row(vec![f.file.clone(), format!("error: {}", f.error)]);
            }
        }
    }
    table
}
