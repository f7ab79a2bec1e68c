//! The data directory: where skald keeps its databases.
//!
//! Resolution order: `--home DIR`, then `$SKALD_HOME`, then the platform's data directory
//! (`~/.local/share/skald` on Linux, `~/Library/Application Support/skald` on macOS,
//! `%APPDATA%\skald` on Windows). Every command resolves it the same way.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// Where the data directory came from, for `skald home` and error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HomeSource {
    Flag,
    Environment,
    Platform,
}

impl HomeSource {
    pub fn name(self) -> &'static str {
        match self {
            HomeSource::Flag => "--home",
            HomeSource::Environment => "SKALD_HOME",
            HomeSource::Platform => "platform data directory",
        }
    }
}

/// The resolved data directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Home {
    pub path: PathBuf,
    pub source: HomeSource,
}

impl Home {
    /// Resolves the directory from the flag, the `SKALD_HOME` value, or the platform default.
    /// Creates nothing.
    pub fn resolve(flag: Option<&Path>, env: Option<&OsStr>) -> Result<Home> {
        let chosen = match (flag, env) {
            (Some(path), _) => Some((path.to_path_buf(), HomeSource::Flag)),
            (None, Some(value)) => Some((PathBuf::from(value), HomeSource::Environment)),
            (None, None) => None,
        };
        if let Some((path, source)) = chosen {
            if path.as_os_str().is_empty() {
                bail!(
                    "{} is empty: the data directory needs a path",
                    source.name()
                );
            }
            return Ok(Home { path, source });
        }
        let base = dirs::data_dir().context(
            "no platform data directory is known for this user; give --home DIR or set SKALD_HOME",
        )?;
        Ok(Home {
            path: base.join("skald"),
            source: HomeSource::Platform,
        })
    }

    /// Creates the directory if needed and returns it; for commands that store data.
    pub fn ensure(&self) -> Result<&Path> {
        std::fs::create_dir_all(&self.path).with_context(|| {
            format!(
                "cannot create the data directory {} (from {})",
                self.path.display(),
                self.source.name()
            )
        })?;
        Ok(&self.path)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn flag_wins_and_records_its_source() {
        let env = OsStr::new("/tmp/y");
        let home = Home::resolve(Some(Path::new("/tmp/x")), Some(env)).unwrap();
        assert_eq!(home.path, PathBuf::from("/tmp/x"));
        assert_eq!(home.source, HomeSource::Flag);
        let from_env = Home::resolve(None, Some(env)).unwrap();
        assert_eq!(from_env.path, PathBuf::from("/tmp/y"));
        assert_eq!(from_env.source, HomeSource::Environment);
        assert_eq!(
            Home::resolve(None, None).unwrap().source,
            HomeSource::Platform
        );
    }

    #[test]
    fn empty_path_is_rejected() {
        let error = Home::resolve(None, Some(OsStr::new(""))).unwrap_err();
        assert!(error.to_string().contains("SKALD_HOME"));
    }

    #[test]
    fn ensure_creates_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::resolve(Some(&dir.path().join("a/b")), None).unwrap();
        assert!(home.ensure().unwrap().is_dir());
    }
}
