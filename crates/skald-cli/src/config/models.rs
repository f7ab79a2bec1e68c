//! `[models."name"]`: the context window of a model the known families do not cover, or cover
//! differently from the deployment a user runs (a fine-tune, a local model, a 1M-token beta):
//!
//! ```toml
//! [models."my-llama-finetune"]
//! window = 65536
//! [models."claude-sonnet-4-5"]
//! window = 1000000
//! ```
//!
//! A proxied call to a model uses its entry here, else its family's known window
//! (`skald_core::tokens::windows`), else the default window (`[llm] context_window_tokens`,
//! else 200,000). `skald serve --window N` gives every call N, whatever its model.

use std::collections::BTreeMap;

use anyhow::Result;

/// The smallest window a model entry may give, as for `--window`.
const MIN_WINDOW_TOKENS: u64 = 1_000;

/// One `[models."name"]` table as written.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelTable {
    window: u64,
}

/// The windows `table`'s `[models]` names (`shown` names the file), by exact model name,
/// checked: an error names the model, the key and what is accepted.
pub(super) fn model_windows(table: &toml::Table, shown: &str) -> Result<BTreeMap<String, u64>> {
    let models = match table.get("models") {
        None => return Ok(BTreeMap::new()),
        Some(toml::Value::Table(models)) => models,
        Some(_) => anyhow::bail!(
            "[models] in {shown} must be a table of models: [models.\"name\"] window = N"
        ),
    };
    let mut windows = BTreeMap::new();
    for (name, entry) in models {
        if name.trim().is_empty() {
            anyhow::bail!("[models] in {shown} names an empty model");
        }
        if !entry.is_table() {
            anyhow::bail!(
                "[models.{name:?}] in {shown} must be a table: [models.{name:?}] window = N"
            );
        }
        let entry: ModelTable = entry
            .clone()
            .try_into()
            .map_err(|error| anyhow::anyhow!("[models.{name:?}] in {shown}: {error}"))?;
        if entry.window < MIN_WINDOW_TOKENS {
            anyhow::bail!(
                "[models.{name:?}] window in {shown} is {}: a context window is at least {} tokens",
                entry.window,
                MIN_WINDOW_TOKENS
            );
        }
        windows.insert(name.clone(), entry.window);
    }
    Ok(windows)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn windows(text: &str) -> Result<BTreeMap<String, u64>> {
        model_windows(&text.parse::<toml::Table>().unwrap(), "skald.toml")
    }

    #[test]
    fn each_model_table_gives_its_window() {
        assert!(windows("").unwrap().is_empty());
        let set = windows(
            "[models.\"my-llama\"]\nwindow = 65536\n[models.\"claude-sonnet-4-5\"]\nwindow = 1000000\n",
        )
        .unwrap();
        assert_eq!(set["my-llama"], 65_536);
        assert_eq!(set["claude-sonnet-4-5"], 1_000_000);
    }

    #[test]
    fn bad_entries_are_refused_naming_the_model_and_the_key() {
        for (text, words) in [
            (
                "[models.\"tiny\"]\nwindow = 10\n",
                "[models.\"tiny\"] window in skald.toml is 10: a context window is at least 1000",
            ),
            (
                "[models.\"m\"]\nwindow_tokens = 5000\n",
                "unknown field `window_tokens`",
            ),
            ("[models.\"m\"]\n", "missing field `window`"),
            (
                "[models.\"m\"]\nwindow = \"128k\"\n",
                "[models.\"m\"] in skald.toml",
            ),
            (
                "[models]\nm = 5\n",
                "[models.\"m\"] in skald.toml must be a table",
            ),
            (
                "models = 5\n",
                "[models] in skald.toml must be a table of models",
            ),
        ] {
            let error = format!("{:#}", windows(text).unwrap_err());
            assert!(error.contains(words), "{text}: {error}");
        }
    }
}
