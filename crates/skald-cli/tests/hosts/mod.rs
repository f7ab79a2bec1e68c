//! Helpers of the real-host tests: installing the pinned CLIs (`hosts/package-lock.json`) with
//! npm, running child processes under a deadline, `skald serve` in a temporary `SKALD_HOME`, and
//! running Claude Code (print mode, default tools) and `codex exec` against a base URL.
//!
//! Install: the first run does `npm ci` of the repo's `hosts/` lockfile into
//! `$CARGO_TARGET_TMPDIR/hosts-npm/<hash of the lockfile>` and reuses it afterwards. With
//! `SKALD_HOSTS_VERSION=latest` it installs `@latest` of both CLIs into
//! `$CARGO_TARGET_TMPDIR/hosts-npm/latest` instead (refreshed on every run), to see drift before
//! the pins are moved. No node or npm on `PATH` is a test failure, never a skip.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

pub mod chat_upstream;
pub mod openclaw;
pub mod upstream;

use std::collections::hash_map::DefaultHasher;
use std::fs;
use std::hash::{Hash, Hasher};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A CLI run's deadline.
pub const HOST_TIMEOUT: Duration = Duration::from_secs(240);

/// The repo root (two levels above this crate).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// What a finished (or killed) child left.
#[derive(Debug)]
pub struct Finished {
    pub status: Option<ExitStatus>,
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    pub fn success(&self) -> bool {
        !self.timed_out && self.status.is_some_and(|s| s.success())
    }

    /// The last `n` characters of stdout and stderr, for failure messages.
    pub fn tail(&self, n: usize) -> String {
        format!(
            "status {:?}{}\n--- stdout (tail) ---\n{}\n--- stderr (tail) ---\n{}",
            self.status,
            if self.timed_out {
                " (killed: timed out)"
            } else {
                ""
            },
            tail(&self.stdout, n),
            tail(&self.stderr, n)
        )
    }
}

pub fn tail(text: &str, n: usize) -> &str {
    let mut start = text.len().saturating_sub(n);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// Runs `command` to the end or until `timeout` (then kills it); output goes through files in
/// `dir`, so a chatty child never blocks on a full pipe.
pub fn run(mut command: Command, dir: &Path, name: &str, timeout: Duration) -> Finished {
    let out_path = dir.join(format!("{name}.stdout"));
    let err_path = dir.join(format!("{name}.stderr"));
    command
        .stdin(Stdio::null())
        .stdout(fs::File::create(&out_path).unwrap())
        .stderr(fs::File::create(&err_path).unwrap());
    let mut child = command
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start {name} ({command:?}): {error}"));
    let (status, timed_out) = wait_until(&mut child, timeout);
    Finished {
        status,
        timed_out,
        stdout: fs::read_to_string(&out_path).unwrap_or_default(),
        stderr: fs::read_to_string(&err_path).unwrap_or_default(),
    }
}

fn wait_until(child: &mut Child, timeout: Duration) -> (Option<ExitStatus>, bool) {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return (Some(status), false);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            return (child.wait().ok(), true);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

// ---------------------------------------------------------------------------------------------
// npm
// ---------------------------------------------------------------------------------------------

/// Where the CLIs are installed: `node_modules/.bin/{claude,codex}` under it.
pub fn hosts_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    static LOCK: Mutex<()> = Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    DIR.get_or_init(install).clone()
}

fn tool_version(tool: &str) -> Result<String, String> {
    match Command::new(tool).arg("--version").output() {
        Ok(out) if out.status.success() => {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
        }
        Ok(out) => Err(format!(
            "`{tool} --version` failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )),
        Err(error) => Err(format!("`{tool}` not found on PATH: {error}")),
    }
}

fn install() -> PathBuf {
    let node = tool_version("node");
    let npm = tool_version("npm");
    if let (Err(error), _) | (_, Err(error)) = (&node, &npm) {
        panic!(
            "the real-host tests need Node.js (>= 20) and npm to install the pinned Claude Code \
             and Codex CLIs (hosts/package-lock.json): {error}. Install them (e.g. `apt-get \
             install nodejs npm`); these tests never skip."
        );
    }
    let source = repo_root().join("hosts");
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("hosts-npm");
    let latest = std::env::var("SKALD_HOSTS_VERSION").is_ok_and(|v| v == "latest");
    let (dir, args): (PathBuf, Vec<&str>) = if latest {
        let dir = base.join("latest");
        fs::create_dir_all(&dir).unwrap();
        fs::write(
            dir.join("package.json"),
            r#"{"name": "skald-hosts-latest", "private": true}"#,
        )
        .unwrap();
        (
            dir,
            vec![
                "install",
                "--no-audit",
                "--no-fund",
                "--save-exact",
                "@anthropic-ai/claude-code@latest",
                "@openai/codex@latest",
            ],
        )
    } else {
        let lock = fs::read(source.join("package-lock.json"))
            .expect("hosts/package-lock.json (the pinned CLIs) is missing");
        let mut hasher = DefaultHasher::new();
        lock.hash(&mut hasher);
        let dir = base.join(format!("{:016x}", hasher.finish()));
        if dir.join(".installed").exists() {
            return dir;
        }
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        for file in ["package.json", "package-lock.json"] {
            fs::copy(source.join(file), dir.join(file)).unwrap();
        }
        (dir, vec!["ci", "--no-audit", "--no-fund"])
    };
    let mut command = Command::new("npm");
    command.args(&args).current_dir(&dir);
    let finished = run(command, &dir, "npm", Duration::from_secs(600));
    assert!(
        finished.success(),
        "`npm {}` in {} failed (node {:?}, npm {:?}):\n{}",
        args.join(" "),
        dir.display(),
        node,
        npm,
        finished.tail(4000)
    );
    fs::write(dir.join(".installed"), "").unwrap();
    dir
}

pub fn bin(name: &str) -> PathBuf {
    let path = hosts_dir().join("node_modules/.bin").join(name);
    assert!(
        path.exists(),
        "{} is missing after the install",
        path.display()
    );
    path
}

// ---------------------------------------------------------------------------------------------
// skald serve
// ---------------------------------------------------------------------------------------------

/// A free loopback port (bound, then released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `skald serve` on a temporary home, in front of `upstream_url`; killed on drop.
pub struct Skald {
    pub home: tempfile::TempDir,
    pub url: String,
    pub key: String,
    child: Child,
}

impl Skald {
    pub fn start(upstream_url: &str) -> Self {
        let home = tempfile::tempdir().unwrap();
        fs::write(
            home.path().join("skald.toml"),
            format!(
                "[proxy.anthropic]\nbase_url = \"{upstream_url}\"\n\n\
                 [proxy.openai]\nbase_url = \"{upstream_url}/v1\"\n"
            ),
        )
        .unwrap();
        let created = Command::new(env!("CARGO_BIN_EXE_skald"))
            .args(["keys", "create", "--tenant", "t"])
            .env("SKALD_HOME", home.path())
            .output()
            .unwrap();
        assert!(
            created.status.success(),
            "skald keys create: {}",
            String::from_utf8_lossy(&created.stderr)
        );
        let created: Value = serde_json::from_slice(&created.stdout).unwrap();
        let key = created["secret"].as_str().unwrap().to_owned();
        let port = free_port();
        let child = Command::new(env!("CARGO_BIN_EXE_skald"))
            .args(["serve", "--addr", &format!("127.0.0.1:{port}")])
            .env("SKALD_HOME", home.path())
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(fs::File::create(home.path().join("serve.stdout")).unwrap())
            .stderr(fs::File::create(home.path().join("serve.stderr")).unwrap())
            .spawn()
            .unwrap();
        let mut skald = Self {
            home,
            url: format!("http://127.0.0.1:{port}"),
            key,
            child,
        };
        skald.wait_healthy(port);
        skald
    }

    fn wait_healthy(&mut self, port: u16) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("skald serve exited ({status}):\n{}", self.log());
            }
            if healthz(port) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "skald serve did not answer /healthz in 60 s:\n{}",
            self.log()
        );
    }

    /// skald's own log (stderr, `RUST_LOG=info`).
    /// The sessions skald holds for the key's tenant (`skald sessions --json`).
    pub fn sessions(&self) -> Vec<Value> {
        let output = Command::new(env!("CARGO_BIN_EXE_skald"))
            .args(["sessions", "--tenant", "t", "--json"])
            .env("SKALD_HOME", self.home.path())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "skald sessions failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).unwrap()
    }

    pub fn log(&self) -> String {
        fs::read_to_string(self.home.path().join("serve.stderr")).unwrap_or_default()
    }
}

impl Drop for Skald {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn healthz(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream
        .write_all(
            format!("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .is_err()
    {
        return false;
    }
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.starts_with("HTTP/1.1 200")
}

// ---------------------------------------------------------------------------------------------
// The hosts
// ---------------------------------------------------------------------------------------------

/// A host's run: its output and the directories it wrote (transcripts).
pub struct HostRun {
    pub finished: Finished,
    /// `HOME` (Claude Code's `~/.claude`) or `CODEX_HOME` (rollouts).
    pub state_dir: tempfile::TempDir,
    pub workdir: tempfile::TempDir,
}

impl HostRun {
    /// Every file the host wrote in its state directory, concatenated (its transcripts).
    pub fn transcripts(&self) -> String {
        let mut text = String::new();
        let mut stack = vec![self.state_dir.path().to_path_buf()];
        let mut seen = 0;
        while let Some(dir) = stack.pop() {
            for entry in fs::read_dir(&dir).into_iter().flatten().flatten() {
                seen += 1;
                if seen > 10_000 {
                    return text;
                }
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else if path
                    .extension()
                    .is_some_and(|e| e == "jsonl" || e == "json")
                {
                    text.push_str(&fs::read_to_string(&path).unwrap_or_default());
                }
            }
        }
        text
    }
}

/// The work directory every host runs in, with the small file the script reads.
pub fn workdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("notes.txt"),
        "scripted notes: line one\nline two\n",
    )
    .unwrap();
    dir
}

pub const PROMPT: &str = "Follow the scripted steps, then answer.";

/// Claude Code in print mode with its default tools (`Bash` and `Read` allowed), against
/// `base_url`; `skald_key` is sent in `x-skald-key` via `ANTHROPIC_CUSTOM_HEADERS`.
pub fn claude_code(base_url: &str, skald_key: Option<&str>, workdir: tempfile::TempDir) -> HostRun {
    let state_dir = tempfile::tempdir().unwrap();
    let finished = claude_code_in(base_url, skald_key, &workdir, &state_dir, &["-p", PROMPT]);
    HostRun {
        finished,
        state_dir,
        workdir,
    }
}

/// One Claude Code print-mode run with `args` (the prompt, `--resume ID`…) in an existing
/// state directory, so a later run can resume an earlier one's conversation.
pub fn claude_code_in(
    base_url: &str,
    skald_key: Option<&str>,
    workdir: &tempfile::TempDir,
    state_dir: &tempfile::TempDir,
    args: &[&str],
) -> Finished {
    let command = claude_code_command(base_url, skald_key, workdir, state_dir, args);
    run(command, state_dir.path(), "claude", HOST_TIMEOUT)
}

/// The command [`claude_code_in`] runs, for a test that adds to its environment.
pub fn claude_code_command(
    base_url: &str,
    skald_key: Option<&str>,
    workdir: &tempfile::TempDir,
    state_dir: &tempfile::TempDir,
    args: &[&str],
) -> Command {
    let mut command = Command::new(bin("claude"));
    command
        .args(args)
        .args([
            "--allowedTools",
            "Bash Read",
            "--output-format",
            "stream-json",
            "--verbose",
        ])
        .current_dir(workdir.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", state_dir.path())
        .env("ANTHROPIC_BASE_URL", base_url)
        .env("ANTHROPIC_API_KEY", "sk-ant-provider-dummy")
        .env("DISABLE_TELEMETRY", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1");
    if let Some(key) = skald_key {
        command.env("ANTHROPIC_CUSTOM_HEADERS", format!("x-skald-key: {key}"));
    }
    command
}

/// `codex exec` with a custom Responses provider at `base_url` (ending in `/v1`); `skald_key`
/// goes in the provider's `http_headers`.
pub fn codex(base_url: &str, skald_key: Option<&str>, workdir: tempfile::TempDir) -> HostRun {
    codex_with(base_url, skald_key, workdir, "")
}

/// [`codex`] with more lines for its provider's table (e.g. `supports_websockets = true`).
pub fn codex_with(
    base_url: &str,
    skald_key: Option<&str>,
    workdir: tempfile::TempDir,
    provider_lines: &str,
) -> HostRun {
    let state_dir = tempfile::tempdir().unwrap();
    let command = codex_command(
        base_url,
        skald_key,
        workdir.path(),
        state_dir.path(),
        provider_lines,
        &[PROMPT],
    );
    let finished = run(command, state_dir.path(), "codex", HOST_TIMEOUT);
    HostRun {
        finished,
        state_dir,
        workdir,
    }
}

/// The pinned Codex's `exec` with `args` after its own flags, its state (config.toml naming
/// the scripted provider at `base_url`) in `state_dir`, run in `workdir`.
pub fn codex_command(
    base_url: &str,
    skald_key: Option<&str>,
    workdir: &Path,
    state_dir: &Path,
    provider_lines: &str,
    args: &[&str],
) -> Command {
    let headers = skald_key
        .map(|key| format!("http_headers = {{ \"x-skald-key\" = \"{key}\" }}\n"))
        .unwrap_or_default();
    fs::write(
        state_dir.join("config.toml"),
        format!(
            "model = \"mock-model\"\nmodel_provider = \"scripted\"\n\n\
             [model_providers.scripted]\nname = \"scripted\"\nbase_url = \"{base_url}\"\n\
             env_key = \"OPENAI_API_KEY\"\nwire_api = \"responses\"\n\
             request_max_retries = 1\nstream_max_retries = 1\n{headers}{provider_lines}"
        ),
    )
    .unwrap();
    let mut command = Command::new(bin("codex"));
    command
        .args([
            "exec",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "--json",
        ])
        .args(args)
        .current_dir(workdir)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", state_dir)
        .env("CODEX_HOME", state_dir)
        .env("OPENAI_API_KEY", "sk-openai-provider-dummy");
    command
}

/// The JSON lines of a host's stdout.
pub fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}
