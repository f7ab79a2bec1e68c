//! The dashboard tests' harness: `skald serve` over a home holding an imported session and a
//! memory (keys for tenants `t` and `other`, or none), raw HTTP requests to it, a scripted
//! Anthropic upstream and a conversation proxied through it, the pinned `playwright-core` driver,
//! and what the tests read out of pages.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
pub const SESSION_ID: &str = "dash0001-1111-4222-8333-444455556666";
/// A line only the offloaded tool output holds.
pub const NEEDLE: &str = "ERROR rounding mismatch in invoice 4242";

pub fn skald(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skald"))
        .arg("--home")
        .arg(home)
        .args(args)
        .env_remove("SKALD_HOME")
        .output()
        .unwrap()
}

pub fn json_out(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

pub fn line(value: Value) -> String {
    format!("{value}\n")
}

pub fn message(id: &str, parent: Option<&str>, second: u32, message: Value) -> String {
    line(json!({
        "type": "message", "id": id, "parentId": parent,
        "timestamp": format!("2026-03-01T10:00:{second:02}.000Z"),
        "message": message,
    }))
}

/// An OpenClaw session: a compaction, a CI log of ~2,000 lines read by a tool, then more turns
/// (so the log is old enough for the policy to offload).
pub fn transcript() -> String {
    let mut log = String::new();
    for number in 1..=2_000 {
        if number == 1_500 {
            log.push_str(NEEDLE);
            log.push('\n');
        } else {
            log.push_str(&format!(
                "tests/test_invoice.py::test_total_{number:04} PASSED\n"
            ));
        }
    }
    let usage = json!({"input": 100, "output": 10, "cacheRead": 0, "cacheWrite": 0,
        "totalTokens": 110, "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}});
    let assistant = |content: Value, stop: &str| {
        json!({"role": "assistant", "content": content, "api": "anthropic-messages",
            "provider": "anthropic", "model": "claude-sonnet-4-5", "usage": usage,
            "stopReason": stop, "timestamp": 1_772_359_200_000_u64})
    };
    let user = |text: &str| json!({"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1_772_359_200_000_u64});
    let mut out = line(json!({"type": "session", "version": 3, "id": SESSION_ID,
        "timestamp": "2026-03-01T10:00:00.000Z", "cwd": "/home/dev/ledger"}));
    out += &message(
        "e0000001",
        None,
        1,
        user("Find out why the invoice totals are wrong."),
    );
    out += &message(
        "e0000002",
        Some("e0000001"),
        2,
        assistant(json!([{"type": "text", "text": "Looking."}]), "stop"),
    );
    out += &line(
        json!({"type": "compaction", "id": "e0000003", "parentId": "e0000002",
        "timestamp": "2026-03-01T10:00:03.000Z",
        "summary": "## Decisions\n- Investigate invoice rounding.", "firstKeptEntryId": "e0000002",
        "tokensBefore": 4200}),
    );
    out += &message(
        "e0000004",
        Some("e0000003"),
        4,
        user("Run the invoice tests."),
    );
    out += &message(
        "e0000005",
        Some("e0000004"),
        5,
        assistant(
            json!([
                {"type": "toolCall", "id": "toolu_01", "name": "bash", "arguments": {"command": "pytest tests/test_invoice.py"}}
            ]),
            "toolUse",
        ),
    );
    out += &message(
        "e0000006",
        Some("e0000005"),
        6,
        json!({"role": "toolResult", "toolCallId": "toolu_01",
        "toolName": "bash", "content": [{"type": "text", "text": log}], "isError": false,
        "timestamp": 1_772_359_200_000_u64}),
    );
    let mut parent = "e0000006".to_owned();
    for turn in 0..4 {
        let asked = format!("e00001{turn}0");
        let answered = format!("e00001{turn}1");
        out += &message(
            &asked,
            Some(&parent),
            10 + turn * 2,
            user(&format!("Next step {turn}?")),
        );
        out += &message(
            &answered,
            Some(&asked),
            11 + turn * 2,
            assistant(
                json!([{"type": "text", "text": format!("Step {turn} done.")}]),
                "stop",
            ),
        );
        parent = answered;
    }
    out
}

/// `skald serve` with keys for tenants `t` and `other`, the transcript imported into `t` and a
/// memory of `t`; killed on drop.
pub struct Server {
    /// Kept for the server's lifetime.
    _home: tempfile::TempDir,
    pub address: String,
    pub key: String,
    pub foreign_key: String,
    child: Child,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    pub fn start() -> Server {
        Server::start_with(true)
    }

    /// With `keys` false the server has none and runs open on loopback; the session and the
    /// memory are then the `default` tenant's.
    pub fn start_with(keys: bool) -> Server {
        Server::start_full(keys, None)
    }

    /// With `anthropic` the proxy's Anthropic upstream (`[proxy.anthropic] base_url`).
    pub fn start_full(keys: bool, anthropic: Option<&str>) -> Server {
        let toml = anthropic
            .map(|url| format!("[proxy.anthropic]\nbase_url = \"{url}\"\n"))
            .unwrap_or_default();
        Server::start_configured(keys, &toml, &[])
    }

    /// With `toml` as the data directory's `skald.toml` and `env` in the server's environment.
    pub fn start_configured(keys: bool, toml: &str, env: &[(&str, &str)]) -> Server {
        let tenant = if keys { "t" } else { "default" };
        let home = tempfile::tempdir().unwrap();
        if !toml.is_empty() {
            std::fs::write(home.path().join("skald.toml"), toml).unwrap();
        }
        let path = home.path().join("session.jsonl");
        std::fs::write(&path, transcript()).unwrap();
        let imported = json_out(&skald(
            home.path(),
            &[
                "import",
                path.to_str().unwrap(),
                "--tenant",
                tenant,
                "--json",
            ],
        ));
        assert_eq!(imported["session_id"], SESSION_ID, "{imported}");
        json_out(&skald(
            home.path(),
            &[
                "remember",
                "--tenant",
                tenant,
                "--content",
                "The user wants invoice totals rounded half-even",
                "--type",
                "preferences",
            ],
        ));
        let create = |tenant: &str| {
            json_out(&skald(home.path(), &["keys", "create", "--tenant", tenant]))["secret"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        let (key, foreign_key) = if keys {
            (create("t"), create("other"))
        } else {
            (String::new(), String::new())
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let address = format!("127.0.0.1:{port}");
        let child = Command::new(env!("CARGO_BIN_EXE_skald"))
            .arg("--home")
            .arg(home.path())
            .args(["serve", "--addr", &address])
            .env_remove("SKALD_HOME")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(home.path().join("serve.stderr")).unwrap())
            .spawn()
            .unwrap();
        let server = Server {
            _home: home,
            address,
            key,
            foreign_key,
            child,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while server.get("/healthz", &[]).0 != 200 {
            assert!(Instant::now() < deadline, "skald serve did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    /// One request; (status, headers, body).
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, String, String) {
        let Ok(mut stream) = TcpStream::connect(&self.address) else {
            return (0, String::new(), String::new());
        };
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let mut request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n",
            self.address
        );
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
        stream.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        let Some((head, body)) = answer.split_once("\r\n\r\n") else {
            return (0, answer, String::new());
        };
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or(0);
        (status, head.to_owned(), body.to_owned())
    }

    pub fn get(&self, path: &str, headers: &[(&str, &str)]) -> (u16, String, String) {
        self.request("GET", path, headers, "")
    }

    /// A page as tenant `t` (its key as a bearer token): (status, body).
    pub fn page(&self, path: &str) -> (u16, String) {
        let bearer = format!("Bearer {}", self.key);
        let (status, _, body) = self.get(path, &[("Authorization", &bearer)]);
        (status, body)
    }
}

/// The first `/ui/refs/<id>` link of a page.
pub fn first_ref_link(page: &str) -> String {
    let start = page
        .find("href=\"/ui/refs/")
        .expect("a placeholder linked to its original")
        + 6;
    let end = start + page[start..].find('"').unwrap();
    page[start..end].to_owned()
}

/// The value of the hidden `csrf` field of a page's forms.
pub fn csrf_of(page: &str) -> String {
    let start = page
        .find("name=\"csrf\" value=\"")
        .unwrap_or_else(|| panic!("no CSRF field: {page}"))
        + "name=\"csrf\" value=\"".len();
    page[start..start + page[start..].find('"').unwrap()].to_owned()
}

/// A scripted Anthropic Messages upstream: every `POST /v1/messages` gets one text answer with
/// usage that grows with the conversation (cache reads from the second call on). Runs until the
/// test process ends; answers one request per connection.
pub fn scripted_anthropic() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for (call, stream) in listener.incoming().enumerate() {
            let Ok(mut stream) = stream else { continue };
            let mut request = Vec::new();
            let mut buffer = [0u8; 8192];
            // The head, then as many body bytes as Content-Length says.
            let body_start = loop {
                let Ok(read) = stream.read(&mut buffer) else {
                    break None;
                };
                if read == 0 {
                    break None;
                }
                request.extend_from_slice(&buffer[..read]);
                if let Some(at) = request.windows(4).position(|w| w == b"\r\n\r\n") {
                    break Some(at + 4);
                }
            };
            let Some(body_start) = body_start else {
                continue;
            };
            let head = String::from_utf8_lossy(&request[..body_start]).to_lowercase();
            let length: usize = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .and_then(|value| value.trim().parse().ok())
                .unwrap_or(0);
            while request.len() < body_start + length {
                let Ok(read) = stream.read(&mut buffer) else {
                    break;
                };
                if read == 0 {
                    break;
                }
                request.extend_from_slice(&buffer[..read]);
            }
            let turn = call as u64 + 1;
            let answer = json!({
                "id": format!("msg_{turn}"), "type": "message", "role": "assistant",
                "model": "claude-scripted",
                "content": [{"type": "text", "text": format!("Proxied answer {turn}: the invoice totals are fixed.")}],
                "stop_reason": "end_turn", "stop_sequence": null,
                "usage": {"input_tokens": 40 + turn, "output_tokens": 12,
                    "cache_read_input_tokens": 500 * (turn - 1), "cache_creation_input_tokens": 30}
            })
            .to_string();
            respond(&mut stream, "application/json", &answer);
        }
    });
    format!("http://{address}")
}

/// Session id of the conversation [`proxied_conversation`] sends.
pub const PROXIED_SESSION: &str = "proxied-invoices";

/// Three calls of one conversation through the server's proxy (Anthropic Messages), as tenant
/// `t`; returns the proxied session's id as the server lists it.
pub fn proxied_conversation(server: &Server) -> String {
    let mut messages =
        vec![json!({"role": "user", "content": "Fix the invoice rounding, please."})];
    for turn in 1..=3 {
        let body = json!({"model": "claude-scripted", "max_tokens": 256, "messages": messages})
            .to_string();
        let (status, _, answer) = server.request(
            "POST",
            "/v1/messages",
            &[
                ("x-skald-key", &server.key),
                ("x-skald-session", PROXIED_SESSION),
                ("anthropic-version", "2023-06-01"),
                ("Content-Type", "application/json"),
            ],
            &body,
        );
        assert_eq!(status, 200, "proxied call {turn}: {answer}");
        let answer: Value = serde_json::from_str(&answer).unwrap();
        messages.push(json!({"role": "assistant", "content": answer["content"]}));
        messages.push(json!({"role": "user", "content": format!("Thanks; now step {turn}.")}));
    }
    let (_, _, listed) = server.get(
        "/v1/sessions",
        &[("Authorization", &format!("Bearer {}", server.key))],
    );
    let listed: Value = serde_json::from_str(&listed).unwrap();
    listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|session| session["sessionId"].as_str().unwrap().to_owned())
        .find(|id| id != SESSION_ID)
        .unwrap_or_else(|| panic!("no proxied session: {listed}"))
}

/// Answers a raw connection with a 200 of `content_type` and closes it.
pub fn respond(stream: &mut TcpStream, content_type: &str, body: &str) {
    let _ = stream.write_all(
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    );
}

/// Debian's `chromium` (or `$CHROMIUM`): the browser tests never skip without it.
pub fn chromium() -> String {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned());
    assert!(
        Path::new(&chromium).exists(),
        "the browser test needs Debian's chromium ({chromium}; `apt-get install chromium`); it \
         never skips"
    );
    chromium
}

/// Runs `script` of `hosts/browser` in node with `env` (and `CHROMIUM`), and reads the JSON
/// object it prints.
pub fn run_browser_script(script: &str, env: &[(&str, String)]) -> Value {
    let chromium = chromium();
    let output = Command::new("node")
        .arg(script)
        .current_dir(browser_driver())
        .envs(env.iter().map(|(name, value)| (*name, value.as_str())))
        .env("CHROMIUM", &chromium)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the browser run of {script} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// `playwright-core` installed with `npm ci` from `hosts/browser`, once per lockfile.
pub fn browser_driver() -> std::path::PathBuf {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../hosts/browser");
    let lock = std::fs::read(source.join("package-lock.json")).unwrap();
    let mut hasher = DefaultHasher::new();
    lock.hash(&mut hasher);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("browser-npm")
        .join(format!("{:016x}", hasher.finish()));
    if !dir.join(".installed").exists() {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for file in ["package.json", "package-lock.json"] {
            std::fs::copy(source.join(file), dir.join(file)).unwrap();
        }
        let installed = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&dir)
            .output()
            .expect("the browser test needs node and npm on PATH; it never skips");
        assert!(
            installed.status.success(),
            "npm ci of hosts/browser failed: {}",
            String::from_utf8_lossy(&installed.stderr)
        );
        std::fs::write(dir.join(".installed"), "").unwrap();
    }
    for script in ["dashboard.mjs", "attacks.mjs"] {
        std::fs::copy(source.join(script), dir.join(script)).unwrap();
    }
    dir
}
