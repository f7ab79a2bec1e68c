//! Hook jobs: the compaction a `pre-compact` or `session-end` hook asks for, run by a detached
//! `skald` so that Claude Code does not wait for it.
//!
//! A job is a small JSON file in `<home>/hooks/jobs/`, named `<session>.<event>.<stamp>.json`
//! and written durably (temporary file, fsync, rename, fsync of the directory) before the
//! worker starts: if the worker dies, the job and the transcript it points at are still there.
//! It records the transcript's length when the hook ran, and the worker reads only that much:
//! Claude Code keeps appending to the file after the hook returns.
//!
//! Workers of one session take turns (`<session>.lock`, created exclusively), so a PreCompact
//! and a SessionEnd close together do not import the same transcript at once. A finished job's
//! file is removed; a failed one is renamed `….json.failed` beside a `….error` that says why.
//! `session-start` after a compaction waits (at most [`SESSION_START_WAIT`]) for the session's
//! pending jobs, so the summary it answers with is the one the compaction just wrote; a job
//! older than that wait is taken for a dead worker's and not waited for.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use skald_core::ids::SessionId;

use crate::home::Home;

/// The longest `session-start` waits for the session's pending jobs.
pub const SESSION_START_WAIT: Duration = Duration::from_secs(30);

/// How often a waiting `session-start` looks again.
const POLL: Duration = Duration::from_millis(20);

/// One compaction a hook handed over.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    /// The hook event, as `skald hook` names it (`pre-compact`, `session-end`).
    pub event: String,
    /// The tenant the session is stored in.
    pub tenant: String,
    /// Claude Code's session id.
    pub session: String,
    /// The transcript Claude Code named.
    pub transcript_path: String,
    /// Its length in bytes when the hook ran: what the job compacts.
    pub transcript_bytes: u64,
}

impl Job {
    /// The transcript as it was when the hook ran: its first `transcript_bytes`, ending on the
    /// last whole line.
    pub fn read_transcript(&self) -> Result<String> {
        let mut bytes = fs::read(&self.transcript_path)
            .with_context(|| format!("cannot read the transcript {}", self.transcript_path))?;
        let length = usize::try_from(self.transcript_bytes).unwrap_or(usize::MAX);
        if bytes.len() > length {
            bytes.truncate(length);
            let whole_lines = bytes
                .iter()
                .rposition(|byte| *byte == b'\n')
                .map_or(0, |newline| newline + 1);
            bytes.truncate(whole_lines);
        }
        String::from_utf8(bytes)
            .with_context(|| format!("the transcript {} is not UTF-8", self.transcript_path))
    }
}

fn jobs_dir(home: &Home) -> PathBuf {
    home.path.join("hooks").join("jobs")
}

/// Writes `job` durably and starts a detached `skald` to run it. An error means no worker
/// was started and no job is left behind: the caller runs the compaction itself.
pub fn start(home: &Home, job: &Job, config: Option<&Path>) -> Result<()> {
    let dir = jobs_dir(home);
    fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    let name = format!(
        "{}.{}.{stamp}-{}.json",
        job.session,
        job.event,
        std::process::id()
    );
    let path = dir.join(&name);
    let temporary = dir.join(format!("{name}.tmp"));
    let write = || -> Result<()> {
        let mut file = File::create(&temporary)?;
        file.write_all(&serde_json::to_vec(job)?)?;
        file.sync_all()?;
        fs::rename(&temporary, &path)?;
        File::open(&dir)?.sync_all()?;
        Ok(())
    };
    write().with_context(|| format!("cannot write the job {}", path.display()))?;

    let mut worker = std::process::Command::new(
        std::env::current_exe().context("cannot find the skald executable")?,
    );
    worker.arg("--home").arg(&home.path);
    if let Some(config) = config {
        worker.arg("--config").arg(config);
    }
    worker
        .args(["hook", &job.event, "--tenant", &job.tenant, "--run-job"])
        .arg(&path)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // Its own process group: Claude Code ending the hook's group must not end the worker.
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut worker, 0);
    if let Err(error) = worker.spawn() {
        let _ = fs::remove_file(&path);
        return Err(error).context("cannot start the job's worker");
    }
    Ok(())
}

/// Runs the job at `path` with `work`, one job of a session at a time: removes the job when
/// it succeeds, keeps it as `….json.failed` with a `….error` when it fails.
pub fn run_job(path: &Path, work: impl FnOnce(&Job) -> Result<()>) -> Result<()> {
    let text = fs::read(path).with_context(|| format!("cannot read the job {}", path.display()))?;
    let job: Job = serde_json::from_slice(&text)
        .with_context(|| format!("the job {} is not a job", path.display()))?;
    let session = SessionId::parse(&job.session)
        .with_context(|| format!("the job's session {:?}", job.session))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let _turn = SessionTurn::take(&dir.join(format!("{session}.lock")))?;
    let outcome = work(&job);
    match &outcome {
        Ok(()) => {
            fs::remove_file(path)
                .with_context(|| format!("cannot remove the finished job {}", path.display()))?;
        }
        Err(error) => {
            let failed = path.with_extension("json.failed");
            let _ = fs::write(path.with_extension("error"), format!("{error:#}\n"));
            let _ = fs::rename(path, failed);
        }
    }
    outcome
}

/// A session's turn to run its jobs: a lock file created exclusively, removed when the turn
/// ends. A lock older than [`STALE_LOCK`] is a dead worker's and is taken over.
struct SessionTurn {
    path: PathBuf,
}

/// How old a session's lock must be to be taken for a dead worker's.
const STALE_LOCK: Duration = Duration::from_secs(600);

impl SessionTurn {
    fn take(path: &Path) -> Result<SessionTurn> {
        loop {
            match OpenOptions::new().write(true).create_new(true).open(path) {
                Ok(_) => {
                    return Ok(SessionTurn {
                        path: path.to_path_buf(),
                    });
                }
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                    let stale = fs::metadata(path)
                        .and_then(|metadata| metadata.modified())
                        .ok()
                        .and_then(|modified| modified.elapsed().ok())
                        .is_some_and(|age| age > STALE_LOCK);
                    if stale {
                        let _ = fs::remove_file(path);
                    } else {
                        std::thread::sleep(POLL);
                    }
                }
                Err(error) => {
                    return Err(error).with_context(|| {
                        format!("cannot take the session's job lock {}", path.display())
                    });
                }
            }
        }
    }
}

impl Drop for SessionTurn {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// Waits until `session` has no pending job younger than `longest`, or `longest` has passed.
pub fn wait_for_session(home: &Home, session: &SessionId, longest: Duration) {
    let dir = jobs_dir(home);
    let prefix = format!("{session}.");
    let started = SystemTime::now();
    let pending = || {
        let Ok(entries) = fs::read_dir(&dir) else {
            return false;
        };
        entries.flatten().any(|entry| {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let young = entry
                .metadata()
                .and_then(|metadata| metadata.modified())
                .ok()
                .and_then(|modified| modified.elapsed().ok())
                .is_some_and(|age| age < longest);
            name.starts_with(&prefix) && name.ends_with(".json") && young
        })
    };
    while pending() && started.elapsed().is_ok_and(|waited| waited < longest) {
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn job(dir: &Path, transcript: &str, bytes: u64) -> Job {
        let path = dir.join("t.jsonl");
        fs::write(&path, transcript).unwrap();
        Job {
            event: "pre-compact".into(),
            tenant: "default".into(),
            session: "s-1".into(),
            transcript_path: path.display().to_string(),
            transcript_bytes: bytes,
        }
    }

    #[test]
    fn a_job_reads_the_transcript_as_it_was_when_the_hook_ran() {
        let dir = tempfile::tempdir().unwrap();
        let job = job(dir.path(), "{\"a\":1}\n{\"b\":2}\n{\"c\"", 16);
        assert_eq!(job.read_transcript().unwrap(), "{\"a\":1}\n{\"b\":2}\n");
        let cut = Job {
            transcript_bytes: 12,
            ..job
        };
        assert_eq!(cut.read_transcript().unwrap(), "{\"a\":1}\n");
    }

    #[test]
    fn a_finished_job_is_removed_and_a_failed_one_kept_with_its_error() {
        let dir = tempfile::tempdir().unwrap();
        let job = job(dir.path(), "{}\n", 3);
        let done = dir.path().join("s-1.pre-compact.1.json");
        fs::write(&done, serde_json::to_vec(&job).unwrap()).unwrap();
        run_job(&done, |_| Ok(())).unwrap();
        assert!(!done.exists());

        let failing = dir.path().join("s-1.pre-compact.2.json");
        fs::write(&failing, serde_json::to_vec(&job).unwrap()).unwrap();
        assert!(run_job(&failing, |_| anyhow::bail!("no summary")).is_err());
        assert!(!failing.exists());
        assert!(dir.path().join("s-1.pre-compact.2.json.failed").exists());
        let error = fs::read_to_string(dir.path().join("s-1.pre-compact.2.error")).unwrap();
        assert!(error.contains("no summary"), "{error}");
    }

    #[test]
    fn jobs_of_one_session_take_turns_and_a_stale_lock_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join("s-1.lock");
        let first = SessionTurn::take(&lock).unwrap();
        let waiter = {
            let lock = lock.clone();
            std::thread::spawn(move || {
                let started = std::time::Instant::now();
                let _second = SessionTurn::take(&lock).unwrap();
                started.elapsed()
            })
        };
        std::thread::sleep(Duration::from_millis(150));
        drop(first);
        assert!(waiter.join().unwrap() >= Duration::from_millis(150));
        assert!(!lock.exists(), "a turn's lock goes with it");

        let stale = File::create(&lock).unwrap();
        stale
            .set_modified(SystemTime::now() - STALE_LOCK - Duration::from_secs(1))
            .unwrap();
        drop(stale);
        let taken = std::time::Instant::now();
        drop(SessionTurn::take(&lock).unwrap());
        assert!(taken.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn session_start_waits_for_the_sessions_pending_job_only() {
        let home_dir = tempfile::tempdir().unwrap();
        let home = Home {
            path: home_dir.path().to_path_buf(),
            source: crate::home::HomeSource::Flag,
        };
        let dir = jobs_dir(&home);
        fs::create_dir_all(&dir).unwrap();
        let other = SessionId::parse("other").unwrap();
        let session = SessionId::parse("s-1").unwrap();
        let pending = dir.join("s-1.pre-compact.1.json");
        fs::write(&pending, "{}").unwrap();
        // Another session's job is not waited for.
        let started = std::time::Instant::now();
        wait_for_session(&home, &other, Duration::from_secs(5));
        assert!(started.elapsed() < Duration::from_secs(1));
        // This session's is, until it is gone.
        let remover = {
            let pending = pending.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(200));
                fs::remove_file(pending).unwrap();
            })
        };
        let started = std::time::Instant::now();
        wait_for_session(&home, &session, Duration::from_secs(5));
        remover.join().unwrap();
        assert!(started.elapsed() >= Duration::from_millis(200));
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
