//! The dashboard at `/ui` of `skald serve`, over HTTP as a browser asks for it: a server with a
//! key, a session imported from a transcript written here (a compaction, then a large tool
//! output the policy offloads) and a memory; the sessions list and its search, a session's
//! context with its placeholder linked to the original, the original sliced with `lines` and
//! `grep`, memory browsed and searched, the login cookie, a foreign tenant's key seeing none of
//! it, and bad input answered with a clear 4xx. Then the same in headless Chromium (Debian's
//! `chromium`, driven by the pinned `playwright-core` of `hosts/browser`), which writes
//! screenshots of the main pages under the target directory (`dashboard-screenshots/`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const SESSION_ID: &str = "dash0001-1111-4222-8333-444455556666";
/// A line only the offloaded tool output holds.
const NEEDLE: &str = "ERROR rounding mismatch in invoice 4242";

fn skald(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skald"))
        .arg("--home")
        .arg(home)
        .args(args)
        .env_remove("SKALD_HOME")
        .output()
        .unwrap()
}

fn json_out(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

fn line(value: Value) -> String {
    format!("{value}\n")
}

fn message(id: &str, parent: Option<&str>, second: u32, message: Value) -> String {
    line(json!({
        "type": "message", "id": id, "parentId": parent,
        "timestamp": format!("2026-03-01T10:00:{second:02}.000Z"),
        "message": message,
    }))
}

/// An OpenClaw session: a compaction, a CI log of ~2,000 lines read by a tool, then more turns
/// (so the log is old enough for the policy to offload).
fn transcript() -> String {
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
struct Server {
    /// Kept for the server's lifetime.
    _home: tempfile::TempDir,
    address: String,
    key: String,
    foreign_key: String,
    child: Child,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn start() -> Server {
        Server::start_with(true)
    }

    /// With `keys` false the server has none and runs open on loopback; the session and the
    /// memory are then the `default` tenant's.
    fn start_with(keys: bool) -> Server {
        Server::start_full(keys, None)
    }

    /// With `anthropic` the proxy's Anthropic upstream (`[proxy.anthropic] base_url`).
    fn start_full(keys: bool, anthropic: Option<&str>) -> Server {
        let tenant = if keys { "t" } else { "default" };
        let home = tempfile::tempdir().unwrap();
        if let Some(url) = anthropic {
            std::fs::write(
                home.path().join("skald.toml"),
                format!("[proxy.anthropic]\nbase_url = \"{url}\"\n"),
            )
            .unwrap();
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
    fn request(
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
        let mut request = format!("{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n");
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

    fn get(&self, path: &str, headers: &[(&str, &str)]) -> (u16, String, String) {
        self.request("GET", path, headers, "")
    }

    /// A page as tenant `t` (its key as a bearer token): (status, body).
    fn page(&self, path: &str) -> (u16, String) {
        let bearer = format!("Bearer {}", self.key);
        let (status, _, body) = self.get(path, &[("Authorization", &bearer)]);
        (status, body)
    }
}

/// The first `/ui/refs/<id>` link of a page.
fn first_ref_link(page: &str) -> String {
    let start = page
        .find("href=\"/ui/refs/")
        .expect("a placeholder linked to its original")
        + 6;
    let end = start + page[start..].find('"').unwrap();
    page[start..end].to_owned()
}

#[test]
fn dashboard_shows_sessions_context_originals_and_memory() {
    let server = Server::start();

    let (status, list) = server.page("/ui");
    assert_eq!(status, 200, "{list}");
    assert!(list.contains(SESSION_ID), "{list}");
    assert!(list.contains("openclaw"), "the source format: {list}");
    let (_, found) = server.page("/ui?q=DASH0001");
    assert!(
        found.contains(SESSION_ID),
        "search by id is case-insensitive: {found}"
    );
    let (_, missed) = server.page("/ui?q=nothing-like-this");
    assert!(
        !missed.contains(SESSION_ID) && missed.contains("No session matches"),
        "{missed}"
    );

    let (status, session) = server.page(&format!("/ui/sessions/{SESSION_ID}"));
    assert_eq!(status, 200, "{session}");
    assert!(
        session.contains("Investigate invoice rounding"),
        "the compaction: {session}"
    );
    assert!(
        session.contains("4200"),
        "tokens before the compaction: {session}"
    );
    assert!(
        session.contains("=== [1] "),
        "the readable rendering: {session}"
    );
    assert!(session.contains("Step 3 done."), "{session}");
    assert!(
        session.contains("id=\"calls\"") && session.contains("claude-sonnet-4-5"),
        "the timeline of model calls: {session}"
    );
    let totals = &session[session.find("id=\"call-totals\"").unwrap()..];
    let calls: u64 = totals[totals.find('>').unwrap() + 1..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(calls >= 3, "every answer is a call: {totals}");
    assert!(
        session.contains("Compaction (host)"),
        "the imported compaction in the timeline: {session}"
    );
    let (status, body) = server.page(&format!("/ui/sessions/{SESSION_ID}?calls=x"));
    assert_eq!(status, 400, "{body}");
    assert!(
        !session.contains("test_total_1000 PASSED"),
        "the log is offloaded, not in the context"
    );
    let link = first_ref_link(&session);

    let (status, original) = server.page(&link);
    assert_eq!(status, 200, "{original}");
    assert!(
        original.contains("test_total_0001 PASSED") && original.contains("cut at max_chars=20000"),
        "the original as the model would get it: {original}"
    );
    let (status, whole) = server.page(&format!("{link}?max_chars=200000"));
    assert_eq!(status, 200);
    assert!(
        whole.contains(NEEDLE) && whole.contains("test_total_2000 PASSED"),
        "the whole original"
    );
    let (status, grepped) = server.page(&format!("{link}?grep=rounding+mismatch&context=0&lines="));
    assert_eq!(status, 200, "{grepped}");
    assert!(
        grepped.contains(NEEDLE) && !grepped.contains("test_total_0001 "),
        "{grepped}"
    );
    let (_, sliced) = server.page(&format!("{link}?lines=2%3A3"));
    assert!(
        sliced.contains("test_total_0002") && !sliced.contains("test_total_0005"),
        "{sliced}"
    );

    let (status, memory) = server.page("/ui/memory");
    assert_eq!(status, 200, "{memory}");
    assert!(
        memory.contains("user/"),
        "the tree's top directories: {memory}"
    );
    let tree = &memory[memory.find("id=\"tree\"").expect("the tree")..];
    let tree = &tree[..tree.find("</div>").unwrap()];
    assert!(
        tree.contains("<details class=\"dir\" open") && tree.matches("<details").count() >= 4,
        "viking://, user/, default/, memories/…, each a <details>: {tree}"
    );
    assert!(
        tree.contains("rounded half-even") && tree.contains("level=l1"),
        "the entry at the tree's bottom with its levels: {tree}"
    );
    let (status, results) = server.page("/ui/memory?q=invoice+rounding");
    assert_eq!(status, 200, "{results}");
    assert!(results.contains("rounded half-even"), "{results}");
    let start = results.find("href=\"/ui/memory/read?uri=").unwrap() + 6;
    let read_link = &results[start..start + results[start..].find('"').unwrap()];
    let (status, read) = server.page(&read_link.replace("&amp;", "&"));
    assert_eq!(status, 200, "{read}");
    assert!(
        read.contains("rounded half-even") && read.contains("preferences"),
        "{read}"
    );
    let history = &read[read.find("id=\"versions\"").expect("the history of writes")..];
    assert_eq!(
        history[..history.find("</table>").unwrap()]
            .matches("<tr>")
            .count(),
        2,
        "a heading and the one version written: {history}"
    );
}

/// The value of the hidden `csrf` field of a page's forms.
fn csrf_of(page: &str) -> String {
    let start = page
        .find("name=\"csrf\" value=\"")
        .unwrap_or_else(|| panic!("no CSRF field: {page}"))
        + "name=\"csrf\" value=\"".len();
    page[start..start + page[start..].find('"').unwrap()].to_owned()
}

#[test]
fn dashboard_needs_a_key_and_keeps_only_a_login_token_in_the_cookie() {
    let server = Server::start();
    let (status, _, login) = server.get("/ui", &[]);
    assert_eq!(status, 401);
    assert!(
        login.contains("action=\"/ui/login\""),
        "the login form: {login}"
    );

    let form = [("Content-Type", "application/x-www-form-urlencoded")];
    let (status, _, refused) = server.request("POST", "/ui/login", &form, "key=sk-skald-wrong");
    assert_eq!(status, 401);
    assert!(refused.contains("unknown API key"), "{refused}");
    let (status, _, _) = server.request(
        "POST",
        "/ui/login",
        &[form[0], ("Origin", "https://elsewhere.example")],
        &format!("key={}", server.key),
    );
    assert_eq!(status, 403, "a login posted from another site");

    let (status, head, _) =
        server.request("POST", "/ui/login", &form, &format!("key={}", server.key));
    assert_eq!(status, 303, "{head}");
    let cookie = head
        .lines()
        .find_map(|line| line.strip_prefix("set-cookie: "))
        .unwrap_or_else(|| panic!("no cookie: {head}"));
    assert!(
        cookie.starts_with("skald_login=")
            && cookie.contains("HttpOnly")
            && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    assert!(!cookie.contains(&server.key), "the key stays on the server");
    let pair = cookie.split(';').next().unwrap();
    let (status, _, list) = server.get("/ui", &[("Cookie", pair)]);
    assert_eq!(status, 200, "{list}");
    assert!(list.contains(SESSION_ID));

    // A changing form needs the login's CSRF token and a same-site origin.
    let switches = format!("/ui/sessions/{SESSION_ID}/switches");
    let with_cookie = [form[0], ("Cookie", pair)];
    let (status, _, body) = server.request("POST", &switches, &with_cookie, "pause_offload=on");
    assert_eq!(status, 403, "no CSRF token: {body}");
    let (status, _, _) = server.request(
        "POST",
        &switches,
        &with_cookie,
        &format!("pause_offload=on&csrf={}", "0".repeat(64)),
    );
    assert_eq!(status, 403, "another login's token");
    let csrf = csrf_of(&list);
    let (status, _, _) = server.request(
        "POST",
        &switches,
        &[
            form[0],
            ("Cookie", pair),
            ("Origin", "https://elsewhere.example"),
        ],
        &format!("pause_offload=on&csrf={csrf}"),
    );
    assert_eq!(status, 403, "a form posted from another site");
    let (_, session) = server.page(&format!("/ui/sessions/{SESSION_ID}"));
    assert!(session.contains("Nothing is paused"), "{session}");
    let (status, _, _) = server.request(
        "POST",
        &switches,
        &[form[0], ("Cookie", pair), ("Origin", "http://x")],
        &format!("pause_offload=on&csrf={csrf}"),
    );
    assert_eq!(status, 303, "its own page's form");
    let (_, session) = server.page(&format!("/ui/sessions/{SESSION_ID}"));
    assert!(session.contains("Offload is paused"), "{session}");

    let (status, head, _) =
        server.request("POST", "/ui/logout", &with_cookie, &format!("csrf={csrf}"));
    assert_eq!(status, 303, "{head}");
    let (status, _, _) = server.get("/ui", &[("Cookie", pair)]);
    assert_eq!(status, 401, "a logged-out token is no login");
}

#[test]
fn pausing_a_session_is_honoured_by_its_next_assemble_and_compaction() {
    let server = Server::start();
    let bearer = format!("Bearer {}", server.key);
    let form = [
        ("Authorization", bearer.as_str()),
        ("Content-Type", "application/x-www-form-urlencoded"),
    ];
    let json = [
        ("Authorization", bearer.as_str()),
        ("Content-Type", "application/json"),
    ];
    let (_, before) = server.page(&format!("/ui/sessions/{SESSION_ID}"));
    assert!(
        !before.contains("test_total_1000 PASSED"),
        "offloaded before the pause"
    );

    let (status, _, body) = server.request(
        "POST",
        &format!("/ui/sessions/{SESSION_ID}/switches"),
        &form,
        "pause_offload=on&pause_compaction=on",
    );
    assert_eq!(status, 303, "{body}");
    let (_, paused) = server.page(&format!("/ui/sessions/{SESSION_ID}"));
    assert!(
        paused.contains("Compaction is paused") && paused.contains("Offload is paused"),
        "{paused}"
    );
    assert!(
        paused.contains("test_total_1000 PASSED")
            && paused.contains("offload skipped: paused for this session"),
        "the next assemble sends the log whole and says why: {paused}"
    );
    let (_, list) = server.page("/ui");
    assert!(list.contains("compaction, offload"), "{list}");

    let (status, _, assembled) = server.request(
        "POST",
        &format!("/v1/sessions/{SESSION_ID}/compact"),
        &json,
        r#"{"force": true}"#,
    );
    assert_eq!(status, 200, "{assembled}");
    assert!(
        assembled.contains("paused"),
        "the compaction is skipped as paused: {assembled}"
    );

    let (status, _, answered) = server.request(
        "PUT",
        &format!("/v1/sessions/{SESSION_ID}/switches"),
        &json,
        r#"{"pauseCompaction": false, "pauseOffload": false}"#,
    );
    assert_eq!(status, 200, "{answered}");
    let answered: Value = serde_json::from_str(&answered).unwrap();
    assert_eq!(
        answered,
        serde_json::json!({"pauseCompaction": false, "pauseOffload": false})
    );
    let (_, resumed) = server.page(&format!("/ui/sessions/{SESSION_ID}"));
    assert!(
        resumed.contains("Nothing is paused") && !resumed.contains("test_total_1000 PASSED"),
        "{resumed}"
    );

    let (status, _, bad) = server.request(
        "PUT",
        &format!("/v1/sessions/{SESSION_ID}/switches"),
        &json,
        r#"{"pauseCompaction": "yes"}"#,
    );
    assert_eq!(status, 400, "{bad}");
    let foreign = format!("Bearer {}", server.foreign_key);
    let (status, _, _) = server.request(
        "POST",
        &format!("/ui/sessions/{SESSION_ID}/switches"),
        &[
            ("Authorization", foreign.as_str()),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        "pause_offload=on",
    );
    assert_eq!(status, 404, "another tenant's session does not exist");
    let (_, still) = server.page(&format!("/ui/sessions/{SESSION_ID}"));
    assert!(still.contains("Nothing is paused"), "{still}");
}

#[test]
fn the_export_round_trips_the_session_and_the_originals_of_its_refs() {
    use skald_core::codec::openclaw::{decode_session, encode_entry};
    use skald_core::refs::RefPayload;

    let server = Server::start();
    let (_, page) = server.page(&format!("/ui/sessions/{SESSION_ID}"));
    assert!(page.contains("id=\"export\""), "the export link: {page}");
    let shown_ref = first_ref_link(&page)["/ui/refs/".len()..].to_owned();
    let bearer = format!("Bearer {}", server.key);
    let (status, head, file) = server.get(
        &format!("/ui/sessions/{SESSION_ID}/export"),
        &[("Authorization", &bearer)],
    );
    assert_eq!(status, 200, "{file}");
    assert!(
        head.to_lowercase()
            .contains("content-disposition: attachment"),
        "{head}"
    );
    let (_, _, api_file) = server.get(
        &format!("/v1/sessions/{SESSION_ID}/export"),
        &[("Authorization", &bearer)],
    );
    assert_eq!(
        api_file, file,
        "the API and the dashboard serve the same file"
    );

    let lines: Vec<Value> = file
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines[0]["type"], "skald.export");
    assert_eq!(lines[0]["sessionId"], SESSION_ID);
    let session_lines: Vec<String> = lines[1..]
        .iter()
        .filter(|line| line["type"] != "skald.ref")
        .map(Value::to_string)
        .collect();
    let read = decode_session(&session_lines.join("\n")).unwrap();
    let (_, _, stored) = server.get(
        &format!("/v1/sessions/{SESSION_ID}/entries"),
        &[("Authorization", &bearer)],
    );
    let stored: Value = serde_json::from_str(&stored).unwrap();
    let exported: Vec<Value> = read.session.entries().iter().map(encode_entry).collect();
    assert_eq!(
        Value::from(exported),
        stored["entries"],
        "every entry comes back as stored"
    );
    assert_eq!(lines[0]["leafId"], stored["leafId"]);

    let refs: Vec<&Value> = lines
        .iter()
        .filter(|line| line["type"] == "skald.ref")
        .collect();
    assert_eq!(lines[0]["refs"], refs.len());
    assert!(
        refs.iter().any(|line| line["id"] == shown_ref.as_str()),
        "the placeholder the page shows is in the file"
    );
    let mut holds_needle = false;
    for line in &refs {
        let payload =
            RefPayload::from_bytes(&serde_json::to_vec(&line["blocks"]).unwrap()).unwrap();
        assert_eq!(
            payload.id().as_str(),
            line["id"].as_str().unwrap(),
            "the original is byte for byte the one its id names"
        );
        holds_needle |= payload.text().contains(NEEDLE);
    }
    assert!(holds_needle, "the log's original is whole in the file");

    let foreign = format!("Bearer {}", server.foreign_key);
    let (status, _, _) = server.get(
        &format!("/ui/sessions/{SESSION_ID}/export"),
        &[("Authorization", &foreign)],
    );
    assert_eq!(status, 404, "another tenant cannot export it");
}

#[test]
fn the_savings_page_sums_the_live_sessions_and_draws_their_chart() {
    let server = Server::start();
    let (status, savings) = server.page("/ui/savings");
    assert_eq!(status, 200, "{savings}");
    assert!(
        savings.contains("id=\"days\"") && savings.contains("id=\"per-session\""),
        "{savings}"
    );
    assert!(savings.contains(SESSION_ID), "{savings}");
    assert!(
        savings.contains("<svg")
            && savings.contains("<polyline")
            && savings.contains("raw history"),
        "the replay chart of the session's calls: {savings}"
    );
    let totals = &savings[savings.find("id=\"savings-totals\"").unwrap()..];
    let calls: u64 = totals[totals.find('>').unwrap() + 1..]
        .trim_start()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(calls >= 3, "the imported answers' usage: {totals}");
    let (status, body) = server.page("/ui/savings?session=no-such-session");
    assert_eq!(status, 404, "{body}");
    let (status, body) = server.page("/ui/savings?colour=red");
    assert_eq!(status, 400, "{body}");

    let foreign = format!("Bearer {}", server.foreign_key);
    let (status, _, theirs) = server.get("/ui/savings", &[("Authorization", &foreign)]);
    assert_eq!(status, 200);
    assert!(
        !theirs.contains(SESSION_ID) && theirs.contains("No call with reported usage yet"),
        "{theirs}"
    );
}

#[test]
fn an_open_server_shows_the_dashboard_on_loopback_without_a_key() {
    let server = Server::start_with(false);
    let (status, _, list) = server.get("/ui", &[]);
    assert_eq!(status, 200, "{list}");
    assert!(list.contains(SESSION_ID), "{list}");
    assert!(
        list.contains("tenant default") && !list.contains("Log out"),
        "{list}"
    );
    let (status, _, session) = server.get(&format!("/ui/sessions/{SESSION_ID}"), &[]);
    assert_eq!(status, 200);
    let (status, _, original) = server.get(&first_ref_link(&session), &[]);
    assert_eq!(status, 200);
    assert!(original.contains("test_total_0001 PASSED"), "{original}");
}

#[test]
fn a_foreign_tenant_sees_nothing_and_bad_input_is_a_clear_4xx() {
    let server = Server::start();
    let (_, session) = server.page(&format!("/ui/sessions/{SESSION_ID}"));
    let link = first_ref_link(&session);

    let foreign = format!("Bearer {}", server.foreign_key);
    let as_foreign = |path: &str| server.get(path, &[("Authorization", &foreign)]);
    let (status, _, list) = as_foreign("/ui");
    assert_eq!(status, 200);
    assert!(
        !list.contains(SESSION_ID) && list.contains("No sessions yet"),
        "{list}"
    );
    assert_eq!(as_foreign(&format!("/ui/sessions/{SESSION_ID}")).0, 404);
    assert_eq!(as_foreign(&link).0, 404);
    let (_, _, memory) = as_foreign("/ui/memory");
    assert!(
        !memory.contains("half-even") && memory.contains("No memory was written yet"),
        "{memory}"
    );
    let (_, _, results) = as_foreign("/ui/memory?q=invoice+rounding");
    assert!(
        !results.contains("half-even") && results.contains("Nothing matches"),
        "{results}"
    );

    let (_, own) = server.page("/ui/memory?q=invoice+rounding");
    let start = own.find("/ui/memory/read?uri=").unwrap() + "/ui/memory/read?uri=".len();
    let encoded_uri = &own[start..start + own[start..].find('"').unwrap()];
    let (status, _, refused) = server.request(
        "POST",
        "/ui/memory/forget",
        &[
            ("Authorization", &foreign),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        &format!("uri={encoded_uri}"),
    );
    assert_eq!(
        status, 404,
        "another tenant's memory does not exist: {refused}"
    );
    let (_, still) = server.page("/ui/memory?q=invoice+rounding");
    assert!(still.contains("rounded half-even"), "{still}");

    let (status, body) = server.page("/ui/refs/not-a-ref");
    assert_eq!(status, 400);
    assert!(
        body.contains("not-a-ref"),
        "the page names what was wrong: {body}"
    );
    let (status, body) = server.page(&format!("{link}?lines=abc"));
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("bad slice"), "{body}");
    let (status, body) = server.page("/ui/sessions/no-such-session");
    assert_eq!(status, 404, "{body}");
    let (status, body) = server.page("/ui/memory?uri=user/alice");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("not a memory URI"), "{body}");
    let (status, body) =
        server.page("/ui/memory/read?uri=viking://user/default/memories/preferences/x.md&level=l9");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("l9"), "{body}");
    let (status, body) = server.page("/ui?colour=red");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("colour"), "{body}");
}

/// A scripted Anthropic Messages upstream: every `POST /v1/messages` gets one text answer with
/// usage that grows with the conversation (cache reads from the second call on). Runs until the
/// test process ends; answers one request per connection.
fn scripted_anthropic() -> String {
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
            let _ = stream.write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                    answer.len()
                )
                .as_bytes(),
            );
        }
    });
    format!("http://{address}")
}

/// Session id of the conversation [`proxied_conversation`] sends.
const PROXIED_SESSION: &str = "proxied-invoices";

/// Three calls of one conversation through the server's proxy (Anthropic Messages), as tenant
/// `t`; returns the proxied session's id as the server lists it.
fn proxied_conversation(server: &Server) -> String {
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

/// `playwright-core` installed with `npm ci` from `hosts/browser`, once per lockfile.
fn browser_driver() -> std::path::PathBuf {
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
    std::fs::copy(source.join("dashboard.mjs"), dir.join("dashboard.mjs")).unwrap();
    dir
}

#[test]
fn dashboard_in_headless_chromium_follows_a_placeholder_and_searches_memory() {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned());
    assert!(
        Path::new(&chromium).exists(),
        "the browser test needs Debian's chromium ({chromium}; `apt-get install chromium`); it \
         never skips"
    );
    let driver = browser_driver();
    let upstream = scripted_anthropic();
    let server = Server::start_full(true, Some(&upstream));
    let proxied = proxied_conversation(&server);
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let output = Command::new("node")
        .arg("dashboard.mjs")
        .current_dir(&driver)
        .env("BASE", format!("http://{}", server.address))
        .env("KEY", &server.key)
        .env("FOREIGN_KEY", &server.foreign_key)
        .env("SESSION", SESSION_ID)
        .env("PROXIED", &proxied)
        .env("SHOTS", &shots)
        .env("CHROMIUM", &chromium)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the browser run failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let seen: Value = serde_json::from_slice(&output.stdout).unwrap();
    let text = |field: &str| seen[field].as_str().unwrap_or_default().to_owned();
    assert_eq!(seen["loginStatus"], 401, "{seen}");
    assert!(text("sessions").contains(SESSION_ID), "{seen}");
    assert!(text("sessionTitle").contains(SESSION_ID), "{seen}");
    assert!(
        text("compactions").contains("Investigate invoice rounding"),
        "{seen}"
    );
    assert!(seen["refLinks"].as_u64().unwrap() >= 1, "{seen}");
    assert!(text("originalUrl").contains("/ui/refs/"), "{seen}");
    assert!(
        text("original").contains("test_total_0001 PASSED"),
        "{seen}"
    );
    let grepped = text("grepped");
    assert!(
        grepped.contains(NEEDLE) && !grepped.contains("test_total_1499"),
        "{seen}"
    );
    assert!(text("memoryRoot").contains("user/"), "{seen}");
    assert!(
        text("memoryResults").contains("rounded half-even"),
        "{seen}"
    );
    assert!(!text("foreignSessions").contains(SESSION_ID), "{seen}");
    assert!(
        text("foreignSessions").contains("No sessions yet"),
        "{seen}"
    );
    assert_eq!(seen["foreignSessionStatus"], 404, "{seen}");
    assert!(text("sessions").contains(&proxied), "{seen}");
    // The proxy stores an answer when the client sends it back with its next request: two of
    // the three answers. (Stored as the client spells them, they carry no upstream usage.)
    assert_eq!(
        seen["proxiedCalls"], 2,
        "the proxied calls' timeline: {seen}"
    );
    assert!(text("proxiedTotals").starts_with("2 calls"), "{seen}");
    assert!(
        text("switchState").contains("Compaction is paused"),
        "{seen}"
    );
    assert!(seen["savingsCharts"].as_u64().unwrap() >= 1, "{seen}");
    assert!(!text("foreignSessions").contains(&proxied), "{seen}");
    assert_eq!(seen["foreignProxiedStatus"], 404, "{seen}");

    // The pause set in the browser holds for the session's next compaction: asked for, it is
    // skipped, and the answer says why.
    let (status, _, compacted) = server.request(
        "POST",
        &format!("/v1/sessions/{SESSION_ID}/compact"),
        &[
            ("Authorization", &format!("Bearer {}", server.key)),
            ("Content-Type", "application/json"),
        ],
        r#"{"force": true}"#,
    );
    assert_eq!(status, 200, "{compacted}");
    assert!(
        compacted.contains("compaction is paused for this session"),
        "{compacted}"
    );
    for page in [
        "login", "sessions", "session", "original", "memory", "foreign", "timeline", "switches",
        "savings",
    ] {
        let shot = shots.join(format!("{page}.png"));
        assert!(
            std::fs::metadata(&shot).is_ok_and(|meta| meta.len() > 1_000),
            "no screenshot {}",
            shot.display()
        );
    }
}
