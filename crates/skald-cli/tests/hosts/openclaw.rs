//! The real OpenClaw in tests: Node 24 installed with `npm ci` from `hosts/node24` (the npm
//! package `node`; OpenClaw refuses Node 20), then the skald plugin package
//! (`integrations/openclaw`) installed with `npm ci` from its lockfile under that Node — which
//! pins `openclaw` 2026.9.6 beside the plugin's build tools —, the plugin built from the
//! working tree's sources, and `openclaw agent --local` turns run headless against
//! `skald serve` and a scripted provider, with the plugin's trace of every lifecycle call.
//!
//! Install: `$CARGO_TARGET_TMPDIR/openclaw-npm/<hash of both lockfiles>`, reused while the
//! lockfiles are unchanged. No node or npm on `PATH` is a failure, never a skip.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::collections::hash_map::DefaultHasher;
use std::fs;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Finished, free_port, repo_root, run};

/// A turn's deadline (a turn takes 10–30 s; the first one of a state directory more).
pub const TURN_TIMEOUT: Duration = Duration::from_secs(240);

/// Where Node 24 and the built plugin are.
#[derive(Debug, Clone)]
pub struct Installed {
    /// `…/node_modules/node/bin`: put first on `PATH`.
    pub node_bin: PathBuf,
    /// Where the plugin is built: its `node_modules` (`.bin/openclaw`, `.bin/tsc`), `dist/`.
    pub plugin: PathBuf,
    /// The package as a user installs it (`package.json`, the manifest, `dist/`), without
    /// `node_modules`: OpenClaw refuses to link a plugin directory that holds an OpenClaw
    /// package of its own ("conflicting child rows").
    pub package: PathBuf,
}

/// Node 24 and the plugin, installed once per lockfiles and built once per test process.
pub fn installed() -> Installed {
    static DIR: OnceLock<Installed> = OnceLock::new();
    static LOCK: Mutex<()> = Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    DIR.get_or_init(install_and_build).clone()
}

fn npm_ci(dir: &Path, path_prefix: Option<&Path>, what: &str) {
    let mut npm = Command::new("npm");
    npm.args(["ci", "--no-audit", "--no-fund"]).current_dir(dir);
    if let Some(prefix) = path_prefix {
        npm.env(
            "PATH",
            format!(
                "{}:{}",
                prefix.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        );
    }
    let finished = run(npm, dir, "npm-ci", Duration::from_secs(900));
    assert!(
        finished.success(),
        "`npm ci` of {what} failed (the OpenClaw tests need node and npm on PATH; they never \
         skip):\n{}",
        finished.tail(4000)
    );
}

fn install_and_build() -> Installed {
    let root = repo_root();
    let node_source = root.join("hosts/node24");
    let source = root.join("integrations/openclaw");
    let mut hasher = DefaultHasher::new();
    fs::read(node_source.join("package-lock.json"))
        .expect("hosts/node24/package-lock.json is missing")
        .hash(&mut hasher);
    fs::read(source.join("package-lock.json"))
        .expect("integrations/openclaw/package-lock.json is missing")
        .hash(&mut hasher);
    let base = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("openclaw-npm")
        .join(format!("{:016x}", hasher.finish()));
    let node_dir = base.join("node24");
    let dir = base.join("plugin");
    let node_bin = node_dir.join("node_modules/node/bin");
    if !base.join(".installed").exists() {
        let _ = fs::remove_dir_all(&base);
        fs::create_dir_all(&node_dir).unwrap();
        fs::create_dir_all(&dir).unwrap();
        for file in ["package.json", "package-lock.json"] {
            fs::copy(node_source.join(file), node_dir.join(file)).unwrap();
            fs::copy(source.join(file), dir.join(file)).unwrap();
        }
        npm_ci(&node_dir, None, "hosts/node24 (Node 24)");
        assert!(
            node_bin.join("node").exists(),
            "npm ci of hosts/node24 did not install {}",
            node_bin.join("node").display()
        );
        // Under Node 24: OpenClaw's install scripts refuse older ones.
        npm_ci(&dir, Some(&node_bin), "integrations/openclaw");
        fs::write(base.join(".installed"), "").unwrap();
    }
    // The plugin as the working tree has it: sources, manifest and configs copied over the
    // install, then built with its own TypeScript.
    for built in ["src", "test", "dist", "build-test"] {
        let _ = fs::remove_dir_all(dir.join(built));
    }
    copy_tree(&source.join("src"), &dir.join("src"));
    copy_tree(&source.join("test"), &dir.join("test"));
    for file in [
        "package.json",
        "openclaw.plugin.json",
        "tsconfig.json",
        "tsconfig.test.json",
        "README.md",
    ] {
        if source.join(file).exists() {
            fs::copy(source.join(file), dir.join(file)).unwrap();
        }
    }
    let installed = Installed {
        node_bin,
        plugin: dir,
        package: base.join("package"),
    };
    let finished = run(
        installed.command("npm", &["run", "build"]),
        &installed.plugin,
        "build",
        Duration::from_secs(300),
    );
    assert!(
        finished.success(),
        "building the OpenClaw plugin failed:\n{}",
        finished.tail(4000)
    );
    let _ = fs::remove_dir_all(&installed.package);
    copy_tree(
        &installed.plugin.join("dist"),
        &installed.package.join("dist"),
    );
    for file in ["package.json", "openclaw.plugin.json", "README.md"] {
        if installed.plugin.join(file).exists() {
            fs::copy(installed.plugin.join(file), installed.package.join(file)).unwrap();
        }
    }
    installed
}

impl Installed {
    /// `program args` in the plugin's directory with Node 24 first on `PATH`.
    pub fn command(&self, program: &str, args: &[&str]) -> Command {
        let path = format!(
            "{}:{}",
            self.node_bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut command = Command::new(program);
        command
            .args(args)
            .current_dir(&self.plugin)
            .env("PATH", path);
        command
    }
}

fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), target).unwrap();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// skald serve, restartable on the same port and home
// ---------------------------------------------------------------------------------------------

/// `skald serve` on a home and a port that survive a restart.
pub struct SkaldServer {
    pub home: tempfile::TempDir,
    pub port: u16,
    pub key: String,
    child: Option<Child>,
    starts: usize,
}

impl SkaldServer {
    pub fn start() -> Self {
        Self::start_with_config("")
    }

    /// `skald serve` with `skald_toml` as the `skald.toml` of its home.
    pub fn start_with_config(skald_toml: &str) -> Self {
        let home = tempfile::tempdir().unwrap();
        if !skald_toml.is_empty() {
            fs::write(home.path().join("skald.toml"), skald_toml).unwrap();
        }
        let created = Command::new(env!("CARGO_BIN_EXE_skald"))
            .args(["keys", "create", "--tenant", "oc"])
            .env("SKALD_HOME", home.path())
            .output()
            .unwrap();
        assert!(
            created.status.success(),
            "skald keys create: {}",
            String::from_utf8_lossy(&created.stderr)
        );
        let created: Value = serde_json::from_slice(&created.stdout).unwrap();
        let mut server = Self {
            home,
            port: free_port(),
            key: created["secret"].as_str().unwrap().to_owned(),
            child: None,
            starts: 0,
        };
        server.spawn();
        server
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn spawn(&mut self) {
        self.starts += 1;
        let log = self
            .home
            .path()
            .join(format!("serve-{}.stderr", self.starts));
        let child = Command::new(env!("CARGO_BIN_EXE_skald"))
            .args(["serve", "--addr", &format!("127.0.0.1:{}", self.port)])
            .env("SKALD_HOME", self.home.path())
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(log).unwrap())
            .spawn()
            .unwrap();
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("skald serve exited ({status}):\n{}", self.log());
            }
            if self.get("/healthz").is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("skald serve did not answer in 60 s:\n{}", self.log());
    }

    /// Stops skald with SIGTERM (as a service manager does) and starts it again.
    pub fn restart(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(30);
            while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        self.spawn();
    }

    /// Every start's log.
    pub fn log(&self) -> String {
        (1..=self.starts)
            .map(|n| {
                fs::read_to_string(self.home.path().join(format!("serve-{n}.stderr")))
                    .unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join("\n--- restart ---\n")
    }

    /// `GET path` with the key; the JSON answer, `None` when skald did not answer 200.
    pub fn get(&self, path: &str) -> Option<Value> {
        let response = ureq_get(&format!("{}{path}", self.url()), &self.key)?;
        serde_json::from_str(&response).ok()
    }

    /// `POST path` with the key; the status and JSON answer.
    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        http_post(&format!("{}{path}", self.url()), &self.key, body)
    }
}

impl Drop for SkaldServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn ureq_get(url: &str, key: &str) -> Option<String> {
    let (status, body) = http("GET", url, key, None);
    (status == 200).then_some(body)
}

fn http_post(url: &str, key: &str, body: &Value) -> (u16, Value) {
    let (status, text) = http("POST", url, key, Some(body.to_string()));
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// A minimal HTTP/1.1 client (one request, `connection: close`).
fn http(method: &str, url: &str, key: &str, body: Option<String>) -> (u16, String) {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let Ok(mut stream) = std::net::TcpStream::connect(host) else {
        return (0, String::new());
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let body = body.unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nhost: {host}\r\nx-skald-key: {key}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    if stream.write_all(request.as_bytes()).is_err() {
        return (0, String::new());
    }
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let (head, mut text) = answer
        .split_once("\r\n\r\n")
        .map(|(head, text)| (head.to_owned(), text.to_owned()))
        .unwrap_or_default();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        text = dechunk(&text);
    }
    (status, text)
}

fn dechunk(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 || after.len() < size {
            break;
        }
        out.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    out
}

// ---------------------------------------------------------------------------------------------
// OpenClaw
// ---------------------------------------------------------------------------------------------

/// One OpenClaw installation's state (config, agents, SQLite transcripts) with the plugin
/// installed, talking to `skald_url` and to the scripted provider at `provider_url`.
pub struct OpenClaw {
    pub installed: Installed,
    pub state: tempfile::TempDir,
    pub home: tempfile::TempDir,
    pub workspace: tempfile::TempDir,
    pub trace: PathBuf,
    skald_key: Option<String>,
}

impl OpenClaw {
    /// A fresh state with the scripted provider; `engine` is `skald` (the plugin installed and
    /// selected) or `legacy` (OpenClaw's own).
    pub fn new(provider_url: &str, skald_url: &str, skald_key: Option<&str>, engine: &str) -> Self {
        let installed = installed();
        let state = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let workspace = tempfile::tempdir().unwrap();
        let trace = state.path().join("skald-trace.jsonl");
        let config = json!({
            "models": {"mode": "replace", "providers": {"mock": {
                "baseUrl": provider_url, "apiKey": "sk-mock", "api": "openai-completions",
                "models": [{"id": "mock-1", "name": "Mock 1", "reasoning": false, "input": ["text"],
                            "contextWindow": 128000, "maxTokens": 4096}]}}},
            "agents": {"defaults": {"model": {"primary": "mock/mock-1"},
                                    "workspace": workspace.path()}},
        });
        fs::write(
            state.path().join("openclaw.json"),
            serde_json::to_string_pretty(&config).unwrap(),
        )
        .unwrap();
        let openclaw = Self {
            installed,
            state,
            home,
            workspace,
            trace,
            skald_key: skald_key.map(str::to_owned),
        };
        if engine == "skald" {
            let installed = openclaw.cli(
                &[
                    "plugins",
                    "install",
                    "-l",
                    openclaw.installed.package.to_str().unwrap(),
                    "--force",
                    "--accept-capabilities",
                ],
                "install",
                Duration::from_secs(180),
            );
            assert!(
                installed.success(),
                "openclaw plugins install failed:\n{}",
                installed.tail(4000)
            );
            openclaw.edit_config(|config| {
                config["plugins"]["entries"]["skald"]["config"] = json!({"url": skald_url});
                assert_eq!(
                    config["plugins"]["slots"]["contextEngine"], "skald",
                    "plugins install did not select the engine: {config}"
                );
            });
        }
        openclaw
    }

    pub fn edit_config(&self, edit: impl FnOnce(&mut Value)) {
        let path = self.state.path().join("openclaw.json");
        let mut config: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        edit(&mut config);
        fs::write(&path, serde_json::to_string_pretty(&config).unwrap()).unwrap();
    }

    /// `openclaw args…` in this state.
    pub fn cli(&self, args: &[&str], name: &str, timeout: Duration) -> Finished {
        let openclaw = self.installed.plugin.join("node_modules/.bin/openclaw");
        let mut command = self.installed.command(openclaw.to_str().unwrap(), args);
        self.host_env(&mut command);
        run(command, self.state.path(), name, timeout)
    }

    /// `openclaw gateway run` on this state, token-authenticated on a free loopback port, ready
    /// (`/readyz`) before it is returned; stopped on drop. While it runs, `agent --local` is
    /// refused: turns go through the gateway then.
    pub fn gateway(&self) -> Gateway {
        let port = free_port();
        self.edit_config(|config| {
            config["gateway"] = json!({"port": port, "mode": "local", "bind": "loopback",
                                       "auth": {"mode": "token", "token": "skald-test-token"}});
        });
        let openclaw = self.installed.plugin.join("node_modules/.bin/openclaw");
        let mut command = self
            .installed
            .command(openclaw.to_str().unwrap(), &["gateway", "run"]);
        self.host_env(&mut command);
        let log = self.state.path().join("gateway.log");
        let child = command
            .stdin(Stdio::null())
            .stdout(fs::File::create(&log).unwrap())
            .stderr(Stdio::from(
                fs::File::create(self.state.path().join("gateway.err")).unwrap(),
            ))
            .spawn()
            .unwrap();
        let mut gateway = Gateway { child, port, log };
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(status) = gateway.child.try_wait().unwrap() {
                panic!("openclaw gateway exited ({status}):\n{}", gateway.log());
            }
            let (status, body) = http("GET", &format!("http://127.0.0.1:{port}/readyz"), "", None);
            if status == 200 && body.contains("\"ready\":true") {
                return gateway;
            }
            assert!(
                Instant::now() < deadline,
                "openclaw gateway not ready in 120 s:\n{}",
                gateway.log()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    fn host_env(&self, command: &mut Command) {
        command
            .current_dir(self.workspace.path())
            .env("OPENCLAW_STATE_DIR", self.state.path())
            .env(
                "OPENCLAW_CONFIG_PATH",
                self.state.path().join("openclaw.json"),
            )
            .env("HOME", self.home.path())
            .env("OPENCLAW_NO_ONBOARD", "1")
            .env("NO_COLOR", "1")
            .env("SKALD_OPENCLAW_TRACE", &self.trace);
        match &self.skald_key {
            Some(key) => command.env("SKALD_API_KEY", key),
            None => command.env_remove("SKALD_API_KEY"),
        };
    }

    /// One agent turn in session `session` (`openclaw agent --local … --json`).
    pub fn turn(&self, session: &str, message: &str) -> Turn {
        let started = Instant::now();
        let trace_before = self.trace_records().len();
        let finished = self.cli(
            &[
                "agent",
                "--local",
                "--agent",
                "main",
                "--session-id",
                session,
                "--message",
                message,
                "--json",
            ],
            &format!("turn-{}", session),
            TURN_TIMEOUT,
        );
        let elapsed = started.elapsed();
        let output = serde_json::from_str(&finished.stdout).unwrap_or(Value::Null);
        let trace = self.trace_records()[trace_before..].to_vec();
        Turn {
            finished,
            output,
            trace,
            elapsed,
        }
    }

    /// Every lifecycle call the plugin's engine got, in order (`SKALD_OPENCLAW_TRACE`).
    pub fn trace_records(&self) -> Vec<Value> {
        fs::read_to_string(&self.trace)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }
}

/// A running `openclaw gateway run`.
pub struct Gateway {
    child: Child,
    pub port: u16,
    log: PathBuf,
}

impl Gateway {
    pub fn log(&self) -> String {
        let mut text = fs::read_to_string(&self.log).unwrap_or_default();
        text.push_str(&fs::read_to_string(self.log.with_extension("err")).unwrap_or_default());
        super::tail(&text, 6000).to_owned()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What one `openclaw agent` turn left.
pub struct Turn {
    pub finished: Finished,
    /// The `--json` output (`payloads`, `meta`).
    pub output: Value,
    /// The engine's lifecycle calls during the turn.
    pub trace: Vec<Value>,
    pub elapsed: Duration,
}

impl Turn {
    /// The reply's text.
    pub fn reply(&self) -> String {
        self.output["payloads"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|payload| payload["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The lifecycle methods called, in order.
    pub fn methods(&self) -> Vec<String> {
        self.trace
            .iter()
            .map(|record| record["method"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// The calls of `method`.
    pub fn calls(&self, method: &str) -> Vec<&Value> {
        self.trace
            .iter()
            .filter(|record| record["method"] == method)
            .collect()
    }

    /// Panics unless the turn completed with skald as its engine throughout: exit 0, a reply,
    /// skald's `assemble` and `commitTurn` called, and nothing in OpenClaw's log about a
    /// fallback to `legacy` or a quarantine.
    pub fn assert_completed_with_skald(&self, what: &str) {
        assert!(
            self.finished.success(),
            "{what}: openclaw agent failed:\n{}",
            self.finished.tail(6000)
        );
        assert!(
            self.reply().contains(super::chat_upstream::FINAL_TEXT),
            "{what}: no final answer in the reply {:?}:\n{}",
            self.reply(),
            self.finished.tail(3000)
        );
        let log = format!("{}\n{}", self.finished.stdout, self.finished.stderr);
        for downgrade in [
            "quarantining",
            "falling back to default engine",
            "fencing is not declared",
            "advancement is not declared",
            "available for discovery only",
        ] {
            assert!(
                !log.contains(downgrade),
                "{what}: OpenClaw left the skald engine ({downgrade:?}):\n{}",
                self.finished.tail(6000)
            );
        }
        let methods = self.methods();
        assert!(
            methods.iter().any(|m| m == "assemble") && methods.iter().any(|m| m == "commitTurn"),
            "{what}: the skald engine was not called for assemble and commitTurn: {methods:?}\n{}",
            self.finished.tail(3000)
        );
        for record in &self.trace {
            assert!(
                record.get("error").is_none(),
                "{what}: the engine threw in {}: {}",
                record["method"],
                record["error"]
            );
        }
        assert!(
            !self.finished.stderr.contains("skald: assemble of"),
            "{what}: an assemble fell back to the host's messages:\n{}",
            self.finished.stderr
        );
    }
}
