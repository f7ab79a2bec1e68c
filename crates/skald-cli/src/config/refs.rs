//! `[refs]`: how long the originals behind `[REF_ID: …]` placeholders are kept and how many stay
//! cached in memory (seed 000's `sccsStorageTtlSeconds` and `sccsMaxEntries`):
//!
//! ```toml
//! [refs]
//! ttl_secs = 86400            # a ref lives this long after it was last stored (600 s to 365 days)
//! max_entries = 10000         # refs the in-memory cache holds (at least 1)
//! max_cache_bytes = 268435456 # payload bytes the cache holds (0: no cache)
//! ```
//!
//! Every store a skald opens with the file — `skald serve`'s, `skald mcp`'s, a hook's, a
//! command's — keeps its refs so.

use std::time::Duration;

use anyhow::Result;
use skald_engine::storage::{
    DEFAULT_CACHE_BYTES, DEFAULT_CACHE_ENTRIES, DEFAULT_TTL, MAX_TTL, MIN_TTL, RefSettings,
};

/// The `[refs]` table as written; a key left out keeps its default.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RefsTable {
    ttl_secs: Option<u64>,
    max_entries: Option<usize>,
    max_cache_bytes: Option<usize>,
}

/// The ref settings `table`'s `[refs]` says (`shown` names the file), checked: an error names
/// the key, its value and what is accepted.
pub(super) fn refs_settings(table: &toml::Table, shown: &str) -> Result<RefSettings> {
    let refs: RefsTable = match table.get("refs") {
        None => RefsTable::default(),
        Some(value @ toml::Value::Table(_)) => value
            .clone()
            .try_into()
            .map_err(|error| anyhow::anyhow!("[refs] in {shown}: {error}"))?,
        Some(_) => anyhow::bail!("[refs] in {shown} must be a table"),
    };
    let ttl = refs.ttl_secs.map_or(DEFAULT_TTL, Duration::from_secs);
    if ttl < MIN_TTL || ttl > MAX_TTL {
        anyhow::bail!(
            "[refs] ttl_secs in {shown} is {}: it must be from {} (10 minutes, so a model has time \
             to fetch what it was shown) to {} (365 days)",
            ttl.as_secs(),
            MIN_TTL.as_secs(),
            MAX_TTL.as_secs()
        );
    }
    let cache_entries = refs.max_entries.unwrap_or(DEFAULT_CACHE_ENTRIES);
    if cache_entries == 0 {
        anyhow::bail!(
            "[refs] max_entries in {shown} is 0: it must be at least 1 (to keep no ref in \
             memory, set max_cache_bytes = 0)"
        );
    }
    // The same rules as `RefSettings::validate`, which the stores apply when they open, told
    // in the file's keys.
    Ok(RefSettings {
        ttl,
        cache_entries,
        cache_bytes: refs.max_cache_bytes.unwrap_or(DEFAULT_CACHE_BYTES),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn settings(text: &str) -> Result<RefSettings> {
        refs_settings(&text.parse::<toml::Table>().unwrap(), "skald.toml")
    }

    #[test]
    fn no_refs_table_keeps_the_defaults() {
        assert_eq!(settings("").unwrap(), RefSettings::default());
    }

    #[test]
    fn each_key_sets_its_setting_and_the_others_keep_their_defaults() {
        let set = settings("[refs]\nttl_secs = 3600\n").unwrap();
        assert_eq!(set.ttl, Duration::from_secs(3600));
        assert_eq!(set.cache_entries, DEFAULT_CACHE_ENTRIES);
        assert_eq!(set.cache_bytes, DEFAULT_CACHE_BYTES);
        let set = settings("[refs]\nmax_entries = 1000\nmax_cache_bytes = 0\n").unwrap();
        assert_eq!(
            (set.ttl, set.cache_entries, set.cache_bytes),
            (DEFAULT_TTL, 1000, 0)
        );
    }

    #[test]
    fn bad_values_are_refused_naming_the_key_and_what_is_accepted() {
        for (text, words) in [
            (
                "[refs]\nttl_secs = 60\n",
                "[refs] ttl_secs in skald.toml is 60: it must be from 600",
            ),
            ("[refs]\nttl_secs = 40000000\n", "to 31536000 (365 days)"),
            (
                "[refs]\nmax_entries = 0\n",
                "[refs] max_entries in skald.toml is 0",
            ),
            ("[refs]\nmax_cache_bytes = -1\n", "max_cache_bytes"),
            ("[refs]\nttl = 600\n", "unknown field `ttl`"),
            ("[refs]\nttl_secs = \"1h\"\n", "ttl_secs"),
            ("refs = 5\n", "[refs] in skald.toml must be a table"),
        ] {
            let error = format!("{:#}", settings(text).unwrap_err());
            assert!(error.contains(words), "{text}: {error}");
        }
    }
}
