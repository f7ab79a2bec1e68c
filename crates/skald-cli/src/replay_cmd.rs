//! `skald replay`: how much each policy would save on real transcripts, and what the model could
//! still see — measured, not assumed, by making every recorded call again through the engine's
//! own turn loop (see `skald_engine::replay`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use skald_core::codec;
use skald_core::message::Message;
use skald_core::pipeline::policy::{PRESET_NAMES, Policy};
use skald_engine::replay::{
    Billed, HostFit, PolicyFigures, PrefixBreaks, ProviderCache, ReplaySettings, billed, host_fit,
    replay,
};

use crate::config::Config;
use crate::files;
use crate::inspect::{EncodingChoice, conversation_model, parse_encoding_choice};
use crate::output::{self, Mode};

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// Transcript files or directories (any format `skald inspect` reads).
    #[arg(required = true, value_name = "FILE")]
    pub paths: Vec<PathBuf>,
    /// Policies to compare, comma-separated: presets (none, openclaw, openclaw-seed, sccs,
    /// skald) or paths to policy TOML files (`preset = "skald"` plus overrides). `openclaw` is
    /// OpenClaw 2026.9, `openclaw-seed` OpenClaw as seed 003 describes it. `skald` carries the
    /// overrides of the configuration's [policy] table.
    #[arg(
        long,
        default_value = "none,openclaw,sccs,skald",
        value_delimiter = ','
    )]
    pub policy: Vec<String>,
    /// Write an SVG chart of context tokens per call, one line per policy.
    #[arg(long, value_name = "FILE.svg")]
    pub chart: Option<PathBuf>,
    /// The model's context window in tokens.
    #[arg(long, default_value_t = 200_000)]
    pub window: u64,
    /// Dollars per million input tokens (cache writes cost 1.25×, cache reads 0.1×).
    #[arg(long, default_value_t = 3.0)]
    pub price: f64,
    /// BPE for counting: auto, o200k_base or cl100k_base.
    #[arg(long, default_value = "auto", value_parser = parse_encoding_choice)]
    pub encoding: EncodingChoice,
    /// Replay without memory (recall, the memory tools, the upload), which is on by default as
    /// in `skald serve`. `none` never has it.
    #[arg(long)]
    pub no_memory: bool,
    /// Replay without skald's threshold compaction, which is on by default as in `skald serve`.
    /// `none` never has it (the host compacts on its own, as the transcript shows).
    #[arg(long)]
    pub no_compaction: bool,
}

#[derive(Debug, Serialize)]
struct TranscriptRow {
    file: String,
    format: &'static str,
    policies: BTreeMap<String, PolicyFigures>,
    /// Each policy's cost on this transcript as a share of the first policy's (normally `none`).
    cost_vs_first: BTreeMap<String, f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    billed: Option<Billed>,
    /// The host as the recorded usage shows it: the prefix, scale and cache the `host` figures
    /// of every policy are billed with.
    #[serde(skip_serializing_if = "Option::is_none")]
    host: Option<HostFit>,
    /// Each policy's cost billed as the host was (`host`) as a share of what was billed.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    cost_vs_billed: BTreeMap<String, f64>,
}

#[derive(Debug, Serialize)]
struct ReplayReport {
    /// Figures summed over all transcripts, by policy.
    policies: BTreeMap<String, PolicyFigures>,
    /// Each policy's cost as a share of the first policy's (normally `none`).
    cost_vs_first: BTreeMap<String, f64>,
    /// What the transcripts' providers billed (Claude Code and mini-swe-agent record usage),
    /// beside the `none` replay, to show the cost model is faithful.
    #[serde(skip_serializing_if = "Option::is_none")]
    billed: Option<Billed>,
    /// Each policy's cost billed as the hosts were, as a share of what was billed, over the
    /// transcripts that recorded usage: `none`'s checks the cost model (it should be near 1),
    /// the others' are what a user of each policy would have paid.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    cost_vs_billed: BTreeMap<String, f64>,
    transcripts: Vec<TranscriptRow>,
    settings: SettingsEcho,
}

#[derive(Debug, Serialize)]
struct SettingsEcho {
    window_tokens: u64,
    price_per_million: f64,
    cache_ttl_ms: i64,
    fetch_penalty_max_tokens: u64,
    /// Memory on for every policy but `none`.
    memory: bool,
    /// skald's threshold compaction on for every policy but `none`.
    compaction: bool,
    /// The configuration file whose [policy] table shaped `skald`, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    config: Option<String>,
}

pub(crate) fn load_policy(spec: &str, config: &Config) -> Result<Policy> {
    if spec == "skald" {
        if let Some(policy) = &config.policy {
            return Ok(policy.clone());
        }
    }
    if PRESET_NAMES.contains(&spec) {
        return Ok(Policy::preset(spec)?);
    }
    let text = std::fs::read_to_string(spec).with_context(|| {
        format!(
            "policy {spec:?} is neither a preset (none, openclaw, openclaw-seed, sccs, skald) nor \
             a readable TOML file"
        )
    })?;
    Policy::from_toml(&text).with_context(|| format!("policy file {spec}"))
}

pub fn run(args: &ReplayArgs, config: &Config, mode: Mode) -> Result<ExitCode> {
    let policies: Vec<Policy> = args
        .policy
        .iter()
        .map(|p| load_policy(p, config))
        .collect::<Result<_>>()?;
    if policies.is_empty() {
        bail!("--policy names no policy");
    }
    // Figures are keyed by the policy's name: two policies of one name would report as one.
    for (index, policy) in policies.iter().enumerate() {
        if let Some(earlier) = policies
            .iter()
            .take(index)
            .position(|p| p.name == policy.name)
        {
            bail!(
                "--policy {:?} and {:?} are both named {:?}: give each policy file its own \
                 `name = \"…\"`",
                args.policy.get(earlier).map_or("", String::as_str),
                args.policy.get(index).map_or("", String::as_str),
                policy.name
            );
        }
    }
    if !(args.price.is_finite() && args.price >= 0.0) {
        bail!("--price must be a non-negative number of dollars per million tokens");
    }
    if args.window < 1_000 {
        bail!(
            "--window is {} tokens: a context window is at least 1000 tokens",
            args.window
        );
    }
    let paths = files::expand(&args.paths)?;
    let base = ReplaySettings {
        context_window_tokens: args.window,
        pricing: skald_engine::Pricing {
            input_per_million: args.price,
            ..skald_engine::Pricing::default()
        },
        memory: !args.no_memory,
        compaction: !args.no_compaction,
        ..ReplaySettings::default()
    };
    let runtime = crate::compact_cmd::runtime()?;
    let progress = ProgressBar::new((paths.len() * policies.len()) as u64).with_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut totals: BTreeMap<String, PolicyFigures> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut billed_total: Option<Billed> = None;
    let mut rows = Vec::new();
    for path in &paths {
        let file = path.display().to_string();
        let text = files::read_text(path)?;
        let decoded = codec::decode(&text).with_context(|| file.clone())?;
        let encoding = args.encoding.resolve(conversation_model(&decoded));
        let messages: Vec<Message> = decoded.conversation.messages;
        let mut settings = ReplaySettings {
            encoding,
            provider_cache: provider_cache(decoded.format, &messages),
            ..base.clone()
        };
        settings.host = host_fit(&messages, &settings);
        let mut row = TranscriptRow {
            file: file.clone(),
            format: decoded.format.name(),
            policies: BTreeMap::new(),
            cost_vs_first: BTreeMap::new(),
            billed: billed(&messages, &settings.pricing),
            host: settings.host.clone(),
            cost_vs_billed: BTreeMap::new(),
        };
        if let Some(b) = row.billed {
            billed_total.get_or_insert_with(Billed::default).absorb(b);
        }
        for policy in &policies {
            progress.set_message(format!("{} · {}", policy.name, file));
            // Each policy gets its own engine: refs and memories of one must not make another
            // look better.
            let figures = runtime
                .block_on(replay(&messages, policy, &settings))
                .with_context(|| format!("replaying {file} under {}", policy.name))?;
            if !order.contains(&policy.name) {
                order.push(policy.name.clone());
            }
            totals
                .entry(policy.name.clone())
                .or_default()
                .absorb(figures.clone());
            row.policies.insert(policy.name.clone(), figures);
            progress.inc(1);
        }
        row.cost_vs_first = shares(&order, &row.policies);
        row.cost_vs_billed = shares_of_bill(&order, &row.policies, row.billed);
        rows.push(row);
    }
    progress.finish_and_clear();
    let cost_vs_first = shares(&order, &totals);
    // The bill of the transcripts that have host figures: every transcript with recorded usage.
    let cost_vs_billed = shares_of_bill(&order, &totals, billed_total);
    if let Some(chart) = &args.chart {
        let series: Vec<(String, Vec<u64>)> = order
            .iter()
            .filter_map(|name| Some((name.clone(), totals.get(name)?.context_per_call.clone())))
            .collect();
        let title = if paths.len() == 1 {
            format!("context tokens per call — {}", paths[0].display())
        } else {
            format!(
                "context tokens per call — {} transcripts, calls in order",
                paths.len()
            )
        };
        std::fs::write(
            chart,
            skald_engine::chart::line_chart(&title, "context tokens", &series),
        )
        .with_context(|| format!("cannot write the chart to {}", chart.display()))?;
    }
    let report = ReplayReport {
        policies: totals,
        cost_vs_first,
        billed: billed_total,
        cost_vs_billed,
        transcripts: rows,
        settings: SettingsEcho {
            window_tokens: base.context_window_tokens,
            price_per_million: base.pricing.input_per_million,
            cache_ttl_ms: base.cache_ttl_ms,
            fetch_penalty_max_tokens: base.fetch_penalty_max_tokens,
            memory: base.memory,
            compaction: base.compaction,
            config: config.path.as_ref().map(|p| p.display().to_string()),
        },
    };
    output::emit(mode, &report, |r| render(r, &order))?;
    Ok(ExitCode::SUCCESS)
}

/// Each policy's cost as a share of the first's (rounded to 0.1 %), 1 when the first cost
/// nothing.
fn shares(order: &[String], figures: &BTreeMap<String, PolicyFigures>) -> BTreeMap<String, f64> {
    let first_cost = order
        .first()
        .and_then(|name| figures.get(name))
        .map_or(0.0, |f| f.cost_usd);
    order
        .iter()
        .filter_map(|name| {
            let cost = figures.get(name)?.cost_usd;
            let share = if first_cost > 0.0 {
                cost / first_cost
            } else {
                1.0
            };
            Some((name.clone(), (share * 1000.0).round() / 1000.0))
        })
        .collect()
}

/// A policy's cost billed as the host was, and its share of the bill.
fn as_billed(figures: &PolicyFigures, share: Option<&f64>) -> String {
    match (figures.host, share) {
        (Some(host), Some(share)) => format!("{:.3} ({:.1}%)", host.cost_usd, share * 100.0),
        (Some(host), None) => format!("{:.3}", host.cost_usd),
        (None, _) => String::new(),
    }
}

/// Each policy's cost billed as the host was, as a share of what was billed (rounded to 0.1 %);
/// empty without a bill.
fn shares_of_bill(
    order: &[String],
    figures: &BTreeMap<String, PolicyFigures>,
    billed: Option<Billed>,
) -> BTreeMap<String, f64> {
    let Some(billed) = billed.filter(|b| b.cost_usd > 0.0) else {
        return BTreeMap::new();
    };
    order
        .iter()
        .filter_map(|name| {
            let host = figures.get(name)?.host?;
            let share = host.cost_usd / billed.cost_usd;
            Some((name.clone(), (share * 1000.0).round() / 1000.0))
        })
        .collect()
}

/// How the transcript's provider caches prompts: Anthropic's for Claude Code and Anthropic
/// requests; an OpenClaw session says its provider per answer; the others cache automatically.
fn provider_cache(format: codec::Format, messages: &[Message]) -> ProviderCache {
    match format {
        codec::Format::ClaudeCode
        | codec::Format::AnthropicRequest
        | codec::Format::AnthropicResponse => ProviderCache::Anthropic,
        codec::Format::OpenClawSession => ProviderCache::of_answers(messages),
        codec::Format::OpenAiRequest
        | codec::Format::OpenAiResponse
        | codec::Format::MiniSweAgent
        | codec::Format::SweAgent => ProviderCache::Automatic,
    }
}

/// A policy's prefix breaks: the total, then by cause.
fn prefix_breaks(breaks: &PrefixBreaks) -> String {
    format!(
        "{} ({} / {} / {} / {} / {} / {} / {})",
        breaks.total,
        breaks.offload,
        breaks.prune,
        breaks.truncation,
        breaks.recall,
        breaks.compaction,
        breaks.upload,
        breaks.other
    )
}

fn render(report: &ReplayReport, order: &[String]) -> comfy_table::Table {
    let mut table = output::table(&[
        "policy",
        "input tokens",
        "peak context",
        "cache read / write",
        "cost $",
        "cost vs first",
        "retention\nvisible / recoverable",
        "hidden rounds\n(fetch tokens)",
        "offloads / trims /\nclears / truncations",
        "recalls (tokens) /\ncompactions",
        "prepare ms",
        "as billed $\n(vs bill)",
        "prefix breaks\n(offload / prune /\ntruncation / recall /\ncompaction / upload / other)",
    ]);
    for name in order {
        let Some(f) = report.policies.get(name) else {
            continue;
        };
        table.add_row(vec![
            name.clone(),
            f.input_tokens.to_string(),
            f.peak_context_tokens.to_string(),
            format!("{} / {}", f.cache_read_tokens, f.cache_write_tokens),
            format!("{:.3}", f.cost_usd),
            format!(
                "{:.1}%",
                report.cost_vs_first.get(name).copied().unwrap_or(1.0) * 100.0
            ),
            format!(
                "{:.3} / {:.3}",
                f.retention.visible, f.retention.recoverable
            ),
            format!("{} ({})", f.hidden_rounds, f.fetch_penalty_tokens),
            format!(
                "{} / {} / {} / {}",
                f.offloads, f.trims, f.clears, f.truncations
            ),
            format!("{} ({}) / {}", f.recalls, f.recall_tokens, f.compactions),
            format!("{:.3}", f.assemble_ms),
            as_billed(f, report.cost_vs_billed.get(name)),
            prefix_breaks(&f.prefix_breaks),
        ]);
    }
    // Per transcript (when there are several): each policy's cost and its share of the first's,
    // so a policy that costs more than the baseline on some transcript shows.
    if report.transcripts.len() > 1 {
        for row in &report.transcripts {
            let name = std::path::Path::new(&row.file)
                .file_name()
                .map_or(row.file.clone(), |n| n.to_string_lossy().into_owned());
            for policy in order.iter().skip(1) {
                let Some(f) = row.policies.get(policy) else {
                    continue;
                };
                table.add_row(vec![
                    format!("{name} · {policy}"),
                    f.input_tokens.to_string(),
                    f.peak_context_tokens.to_string(),
                    format!("{} / {}", f.cache_read_tokens, f.cache_write_tokens),
                    format!("{:.3}", f.cost_usd),
                    format!(
                        "{:.1}%",
                        row.cost_vs_first.get(policy).copied().unwrap_or(1.0) * 100.0
                    ),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                    as_billed(f, row.cost_vs_billed.get(policy)),
                    prefix_breaks(&f.prefix_breaks),
                ]);
            }
        }
    }
    if let Some(b) = &report.billed {
        table.add_row(vec![
            "billed (recorded)".to_owned(),
            b.input_tokens.to_string(),
            String::new(),
            format!("{} / {}", b.cache_read_tokens, b.cache_write_tokens),
            format!("{:.3}", b.cost_usd),
        ]);
    }
    table
}
