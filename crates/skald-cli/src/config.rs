//! `skald.toml`: the user's configuration, read from `--config FILE` or the data directory.
//!
//! Today it holds the policy: a `[policy]` table names a preset (default `skald`) and overrides
//! any of its settings. That policy is what `skald` means wherever a command takes policy names.
//!
//! ```toml
//! [policy]
//! preset = "skald"
//! [policy.offload]
//! compress_threshold = 4000
//! ```

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use skald_core::pipeline::policy::Policy;

use crate::home::Home;

/// The configuration file's name in the data directory.
pub const CONFIG_FILE: &str = "skald.toml";

/// What the configuration file says, and where it was read from.
#[derive(Debug, Clone, Default)]
pub struct Config {
    pub path: Option<PathBuf>,
    /// The default policy with the file's overrides applied (`None` when the file has none).
    pub policy: Option<Policy>,
}

impl Config {
    /// Reads `explicit` (which must exist) or `<home>/skald.toml` (which may not).
    pub fn load(explicit: Option<&Path>, home: &Home) -> Result<Config> {
        let path = match explicit {
            Some(path) => path.to_path_buf(),
            None => {
                let path = home.path.join(CONFIG_FILE);
                if !path.exists() {
                    return Ok(Config::default());
                }
                path
            }
        };
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read the configuration {}", path.display()))?;
        let table: toml::Table = text
            .parse()
            .with_context(|| format!("{} is not valid TOML", path.display()))?;
        let policy = match table.get("policy") {
            None => None,
            Some(toml::Value::Table(policy)) => {
                let text = toml::to_string(policy)?;
                Some(
                    Policy::from_toml(&text)
                        .with_context(|| format!("[policy] in {}", path.display()))?,
                )
            }
            Some(_) => anyhow::bail!("[policy] in {} must be a table", path.display()),
        };
        Ok(Config {
            path: Some(path),
            policy,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn home(dir: &Path) -> Home {
        Home::resolve(Some(dir), None).unwrap()
    }

    #[test]
    fn a_missing_file_in_the_data_directory_is_no_configuration() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::load(None, &home(dir.path())).unwrap();
        assert!(config.path.is_none() && config.policy.is_none());
        assert!(Config::load(Some(&dir.path().join("nope.toml")), &home(dir.path())).is_err());
    }

    #[test]
    fn the_policy_table_overrides_the_default_preset() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(CONFIG_FILE),
            "[policy]\n[policy.offload]\ncompress_threshold = 4000\n",
        )
        .unwrap();
        let config = Config::load(None, &home(dir.path())).unwrap();
        let policy = config.policy.unwrap();
        assert_eq!(policy.name, "skald");
        assert_eq!(policy.offload.compress_threshold, 4000);
    }

    #[test]
    fn bad_settings_name_the_file_and_the_setting() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(CONFIG_FILE),
            "[policy]\n[policy.offload]\ncompress_threshold = 5\n",
        )
        .unwrap();
        let error = format!("{:#}", Config::load(None, &home(dir.path())).unwrap_err());
        assert!(
            error.contains("skald.toml") && error.contains("at least 2000"),
            "{error}"
        );
    }
}
