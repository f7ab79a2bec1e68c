//! Policies: named, complete settings for every pipeline stage, loaded from TOML.
//!
//! Five presets ship in the binary (`none`, `openclaw`, `openclaw-seed`, `sccs`, `skald`; see
//! `policies/*.toml`): `openclaw` is OpenClaw 2026.9 as installed, `openclaw-seed` OpenClaw as
//! seed 003 describes it (the constants `openclaw` had before).
//! A user's `skald.toml` names one and overrides any setting:
//!
//! ```
//! use skald_core::pipeline::policy::Policy;
//!
//! let policy = Policy::from_toml(r#"
//!     preset = "skald"
//!     [offload]
//!     compress_threshold = 4000
//! "#).unwrap();
//! assert_eq!(policy.name, "skald");
//! assert_eq!(policy.offload.compress_threshold, 4000);
//! assert!(Policy::preset("nope").is_err());
//! ```

use serde::{Deserialize, Serialize};

use super::offload::{OffloadSettings, OffloadSettingsError};
use super::prune::{PruneSettings, PruneSettingsError};
pub use super::schedule::CachePrices;
use super::truncate::{TruncateSettings, TruncateSettingsError};
use super::turn_limit::{TurnLimitSettings, TurnLimitSettingsError};

/// The presets, in the order reports list them.
pub const PRESET_NAMES: &[&str] = &["none", "openclaw", "openclaw-seed", "sccs", "skald"];

fn preset_text(name: &str) -> Option<&'static str> {
    match name {
        "none" => Some(include_str!("../../policies/none.toml")),
        "openclaw" => Some(include_str!("../../policies/openclaw.toml")),
        "openclaw-seed" => Some(include_str!("../../policies/openclaw-seed.toml")),
        "sccs" => Some(include_str!("../../policies/sccs.toml")),
        "skald" => Some(include_str!("../../policies/skald.toml")),
        _ => None,
    }
}

/// When the offload stage may take a result out of the context.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "kebab-case", deny_unknown_fields)]
pub enum OffloadSchedule {
    /// Every eligible result, from the first request that carries it (SCCS).
    #[default]
    Immediate,
    /// Results stay visible until they are older than the last `keep_recent_assistants`
    /// assistant turns, then leave for good. The cache miss a result's leaving causes covers only
    /// the messages after it, which are few when it leaves young. Results over
    /// `immediate_over_chars` never enter.
    CacheAware {
        /// How many of the latest assistant turns keep their results visible.
        #[serde(default = "default_keep_recent")]
        keep_recent_assistants: usize,
        /// Results longer than this many characters are offloaded at once, however young.
        #[serde(default = "default_immediate")]
        immediate_over_chars: usize,
    },
    /// Like `cache-aware`, but a result (or a long tool-call argument) already in the prompt
    /// cache leaves only when the tokens it removes, over the calls the run is expected to
    /// make, outweigh the cache write its rewrite causes (every cached token after it, at the
    /// policy's `prices`); pending offloads leave together, from the earliest, when the batch
    /// pays ([`crate::pipeline::schedule`]). Offloads in the new tail of a request, or after
    /// the cache expired (`cache_ttl_ms`), cost no rewrite and leave as soon as the model has
    /// seen them. The fetch tool and its instruction arrive with the first offload, which pays
    /// for them too. Decisions are sticky.
    CostAware {
        /// How many of the latest assistant turns keep their results visible.
        #[serde(default = "default_keep_recent")]
        keep_recent_assistants: usize,
        /// Results longer than this many characters are not kept visible for the latest turns:
        /// keeping one for a single call costs more than the model fetching a slice of it.
        #[serde(default = "default_immediate")]
        immediate_over_chars: usize,
        /// Calls a run is expected to make after the current one, per call made so far: 1 is
        /// the median under a scale-free prior on run length, 0.25 the length reached 4 times
        /// in 5 (see [`crate::pipeline::schedule`]).
        #[serde(default = "default_remaining_ratio")]
        remaining_calls_ratio: f64,
        /// The same ratio for the session's first offload, which brings the fetch tool and
        /// rewrites everything cached; `None` uses `remaining_calls_ratio`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        first_offload_calls_ratio: Option<f64>,
        /// Calls still to come a first offload is weighed over at the least, however young the
        /// run: the ratio alone expects less than a call more at call 3, when the prefix is
        /// small and the first offload cheapest.
        #[serde(default)]
        first_offload_min_calls: f64,
        /// Send the fetch tool and its instruction from the session's first call (like the
        /// other schedules), so that no offload ever rewrites the whole prefix for them; every
        /// call then pays for their tokens at the cache-read price.
        #[serde(default)]
        fetch_tool_from_start: bool,
        /// How much more than its cost a rewrite must be expected to gain, as a share of that
        /// cost: the gain comes from estimates (chars/4 tokens, a digest's planned length) that
        /// err, and a rewrite whose gain is inside their error is as likely to lose as to win.
        #[serde(default = "default_estimate_margin")]
        estimate_margin: f64,
    },
}

impl OffloadSchedule {
    /// Whether the fetch tool and the REF_ID instruction are in every request from a
    /// session's first call (so the first offload does not rewrite the prefix), or arrive
    /// with the first offload, which then pays for them (`cost-aware`).
    pub fn fetch_tool_from_start(&self) -> bool {
        match self {
            OffloadSchedule::Immediate | OffloadSchedule::CacheAware { .. } => true,
            OffloadSchedule::CostAware {
                fetch_tool_from_start,
                ..
            } => *fetch_tool_from_start,
        }
    }
}

fn default_keep_recent() -> usize {
    1
}
fn default_remaining_ratio() -> f64 {
    0.25
}
fn default_estimate_margin() -> f64 {
    0.1
}
fn default_immediate() -> usize {
    6_000
}

/// Settings of the whole pipeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Policy {
    /// The preset the policy started from (`none`, `openclaw`, `openclaw-seed`, `sccs`,
    /// `skald`), or `custom`.
    pub name: String,
    /// Run transcript repair first.
    pub repair: bool,
    /// Prompt-cache lifetime the policy plans around, in milliseconds.
    pub cache_ttl_ms: u64,
    /// The provider's prompt-cache prices the `cost-aware` schedule weighs rewrites with
    /// (Anthropic's by default).
    pub prices: CachePrices,
    /// The turn-limit stage.
    pub turn_limit: TurnLimitSettings,
    /// The offload stage.
    pub offload: OffloadSettings,
    /// When offloadable results actually leave the context.
    pub schedule: OffloadSchedule,
    /// The prune stage.
    pub prune: PruneSettings,
    /// The truncate stage.
    pub truncate: TruncateSettings,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            name: "custom".to_owned(),
            repair: true,
            cache_ttl_ms: 300_000,
            prices: CachePrices::default(),
            turn_limit: TurnLimitSettings::default(),
            offload: OffloadSettings::default(),
            schedule: OffloadSchedule::default(),
            prune: PruneSettings::default(),
            truncate: TruncateSettings::default(),
        }
    }
}

/// Why a policy could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The name is not one of the presets.
    #[error("unknown policy {0:?}: expected one of none, openclaw, openclaw-seed, sccs, skald")]
    UnknownPreset(String),
    /// The TOML did not parse into a policy.
    #[error("policy TOML: {0}")]
    Toml(String),
    /// A stage's settings failed validation.
    #[error("policy {name}: {reason}")]
    Invalid {
        /// The policy's name.
        name: String,
        /// Which setting is wrong and why.
        reason: String,
    },
}

impl From<OffloadSettingsError> for PolicyError {
    fn from(e: OffloadSettingsError) -> PolicyError {
        PolicyError::Invalid {
            name: String::new(),
            reason: e.to_string(),
        }
    }
}

impl Policy {
    /// A shipped preset by name.
    pub fn preset(name: &str) -> Result<Policy, PolicyError> {
        let text = preset_text(name).ok_or_else(|| PolicyError::UnknownPreset(name.to_owned()))?;
        Policy::parse_complete(text)
    }

    /// A policy from TOML: `preset = "<name>"` (default `skald`) plus any overrides.
    pub fn from_toml(text: &str) -> Result<Policy, PolicyError> {
        let overrides: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| PolicyError::Toml(e.to_string()))?;
        let preset_name = match overrides.get("preset") {
            None => "skald".to_owned(),
            Some(toml::Value::String(name)) => name.clone(),
            Some(other) => {
                return Err(PolicyError::Toml(format!(
                    "preset must be a string, found {}",
                    other.type_str()
                )));
            }
        };
        let base_text =
            preset_text(&preset_name).ok_or(PolicyError::UnknownPreset(preset_name.clone()))?;
        let mut merged: toml::Table = base_text
            .parse()
            .map_err(|e: toml::de::Error| PolicyError::Toml(e.to_string()))?;
        let mut overrides = overrides;
        overrides.remove("preset");
        // A schedule of another mode has other settings: the preset's do not carry over.
        let mode_of = |table: &toml::Table| {
            table
                .get("schedule")
                .and_then(|schedule| schedule.get("mode"))
                .cloned()
        };
        if mode_of(&overrides).is_some_and(|mode| Some(mode) != mode_of(&merged)) {
            merged.remove("schedule");
        }
        merge(&mut merged, overrides);
        Policy::parse_complete(
            &toml::to_string(&merged).map_err(|e| PolicyError::Toml(e.to_string()))?,
        )
    }

    fn parse_complete(text: &str) -> Result<Policy, PolicyError> {
        let policy: Policy =
            toml::from_str(text).map_err(|e: toml::de::Error| PolicyError::Toml(e.to_string()))?;
        policy.validate()?;
        Ok(policy)
    }

    /// Rejects settings no stage accepts.
    pub fn validate(&self) -> Result<(), PolicyError> {
        let invalid = |reason: String| PolicyError::Invalid {
            name: self.name.clone(),
            reason,
        };
        if self.offload.enabled {
            self.offload
                .validate()
                .map_err(|e| invalid(e.to_string()))?;
        }
        self.prices
            .validate()
            .map_err(|e| invalid(format!("prices: {e}")))?;
        if let OffloadSchedule::CostAware {
            remaining_calls_ratio,
            first_offload_calls_ratio,
            first_offload_min_calls,
            estimate_margin,
            ..
        } = &self.schedule
        {
            let ratios = [
                ("remaining_calls_ratio", Some(*remaining_calls_ratio)),
                ("first_offload_calls_ratio", *first_offload_calls_ratio),
                ("first_offload_min_calls", Some(*first_offload_min_calls)),
                ("estimate_margin", Some(*estimate_margin)),
            ];
            for (key, ratio) in ratios {
                if let Some(ratio) = ratio.filter(|r| !(r.is_finite() && *r >= 0.0)) {
                    return Err(invalid(format!(
                        "schedule.{key} is {ratio}: it must be a non-negative number"
                    )));
                }
            }
        }
        self.prune
            .validate()
            .map_err(|e: PruneSettingsError| invalid(format!("prune: {e}")))?;
        self.truncate
            .validate()
            .map_err(|e: TruncateSettingsError| invalid(format!("truncate: {e}")))?;
        self.turn_limit
            .validate()
            .map_err(|e: TurnLimitSettingsError| invalid(format!("turn_limit: {e}")))?;
        Ok(())
    }
}

/// Deep-merges `overrides` into `base`: tables merge key by key, anything else replaces.
fn merge(base: &mut toml::Table, overrides: toml::Table) {
    for (key, value) in overrides {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(existing)), toml::Value::Table(incoming)) => {
                merge(existing, incoming);
            }
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::pipeline::prune::PruneMode;
    use crate::pipeline::turn_limit::{BatchRule, TurnBatch};

    #[test]
    fn every_preset_loads_and_validates() {
        for name in PRESET_NAMES {
            let policy = Policy::preset(name).unwrap();
            assert_eq!(policy.name, *name);
        }
        assert!(!Policy::preset("none").unwrap().offload.enabled);
        assert_eq!(
            Policy::preset("openclaw").unwrap().prune.mode,
            PruneMode::CacheTtl
        );
        let sccs = Policy::preset("sccs").unwrap();
        assert_eq!(sccs.offload.compress_threshold, 3000);
        assert_eq!(sccs.schedule, OffloadSchedule::Immediate);
        let skald = Policy::preset("skald").unwrap();
        assert!(matches!(skald.schedule, OffloadSchedule::CostAware { .. }));
        assert!(!skald.schedule.fetch_tool_from_start());
        assert_eq!(skald.prices, CachePrices::ANTHROPIC);
    }

    #[test]
    fn openclaw_seed_preset_keeps_seed_constants() {
        use crate::pipeline::prune::PruneSettings;
        use crate::pipeline::truncate::TruncateSettings;
        use crate::pipeline::turn_limit::TurnLimitSettings;
        let seed = Policy::preset("openclaw-seed").unwrap();
        assert_eq!(seed.name, "openclaw-seed");
        // Seed 003's constants are the stages' defaults.
        assert_eq!(seed.prune, PruneSettings::default());
        assert_eq!(seed.truncate, TruncateSettings::default());
        assert_eq!(seed.turn_limit, TurnLimitSettings::default());
        assert_eq!(seed.truncate.hard_max_chars, 400_000);
        assert!(!seed.prune.sticky && !seed.prune.trim_images);
        assert!(seed.truncate.keep_originals && !seed.truncate.aggregate.enabled);
        assert!(!seed.offload.enabled);

        // OpenClaw 2026.9 differs exactly where the installed package does.
        let current = Policy::preset("openclaw").unwrap();
        assert_eq!(
            current.prune,
            PruneSettings {
                sticky: true,
                trim_images: true,
                ..PruneSettings::default()
            }
        );
        assert_eq!(current.truncate.hard_max_chars, 16_000);
        assert_eq!(current.truncate.window_caps.len(), 2);
        assert!(current.truncate.aggregate.enabled && !current.truncate.keep_originals);
        assert_eq!(current.turn_limit.limit, None);
        assert_eq!(current.turn_limit.batch, TurnBatch::Rule(BatchRule::Half));
        assert_eq!(current.cache_ttl_ms, seed.cache_ttl_ms);
    }

    #[test]
    fn overrides_merge_into_the_named_preset() {
        let policy = Policy::from_toml(
            "preset = \"openclaw\"\n[prune]\nkeep_last_assistants = 5\n[prune.soft_trim]\nhead_chars = 900\n",
        )
        .unwrap();
        assert_eq!(policy.name, "openclaw");
        assert_eq!(policy.prune.keep_last_assistants, 5);
        assert_eq!(policy.prune.soft_trim.head_chars, 900);
        assert_eq!(
            policy.prune.soft_trim.tail_chars, 1_500,
            "untouched defaults stay"
        );
    }

    #[test]
    fn bad_policies_say_what_is_wrong() {
        let unknown = Policy::from_toml("preset = \"fast\"")
            .unwrap_err()
            .to_string();
        assert!(unknown.contains("unknown policy \"fast\""), "{unknown}");
        let low = Policy::from_toml("[offload]\ncompress_threshold = 100")
            .unwrap_err()
            .to_string();
        assert!(low.contains("at least 2000"), "{low}");
        let typo = Policy::from_toml("[offload]\ncompres_threshold = 4000")
            .unwrap_err()
            .to_string();
        assert!(typo.contains("compres_threshold"), "{typo}");
        let mode = Policy::from_toml("[schedule]\nmode = \"later\"")
            .unwrap_err()
            .to_string();
        assert!(mode.contains("later"), "{mode}");
        let prices = Policy::from_toml("[prices]\ncache_write = 0.1\ncache_read = 0.5")
            .unwrap_err()
            .to_string();
        assert!(prices.contains("prices"), "{prices}");
    }

    #[test]
    fn openai_prices_and_the_predictor_are_settings() {
        let policy = Policy::from_toml(
            "[prices]\ncache_write = 1.0\ncache_read = 0.25\n[schedule]\nmode = \"cost-aware\"\nremaining_calls_ratio = 0.5\n",
        )
        .unwrap();
        assert_eq!(policy.prices, CachePrices::OPENAI);
        assert!(matches!(
            policy.schedule,
            OffloadSchedule::CostAware {
                remaining_calls_ratio,
                keep_recent_assistants: 1,
                immediate_over_chars: 3_000,
                first_offload_calls_ratio: Some(first),
                fetch_tool_from_start: false,
                ..
            } if remaining_calls_ratio == 0.5 && first == 0.25
        ));
    }
}
