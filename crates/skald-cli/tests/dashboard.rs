//! The dashboard at `/ui` of `skald serve`, over HTTP as a browser asks for it: a server with a
//! key, a session imported from a transcript written here (a compaction, then a large tool
//! output the policy offloads) and a memory; the sessions list and its search, a session's
//! context with its placeholder linked to the original, the original sliced with `lines` and
//! `grep`, memory browsed and searched, the login cookie, a foreign tenant's key seeing none of
//! it, and bad input answered with a clear 4xx; a session's timeline of calls, its switches
//! (with the login's CSRF token), its export, the savings overview. Then the same in headless
//! Chromium (Debian's `chromium`, driven by the pinned `playwright-core` of `hosts/browser`),
//! with a conversation proxied through the server beside the imported session, which writes
//! screenshots of the main pages under the target directory (`dashboard-screenshots/`). The
//! harness (the server, the scripted upstream, the browser driver) is `dashboard_harness`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod dashboard_harness;

use std::path::Path;

use dashboard_harness::*;
use serde_json::Value;

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
    let own_origin = format!("http://{}", server.address);
    let (status, _, _) = server.request(
        "POST",
        &switches,
        &[form[0], ("Cookie", pair), ("Origin", &own_origin)],
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
    // The session was imported, never served: skald saved it nothing, and the prompt cache's
    // saving is shown apart, not credited to skald.
    assert!(
        totals.contains("$0.0000 saved by skald"),
        "an imported session saved nothing: {totals}"
    );
    assert!(savings.contains("id=\"cache-saved\""), "{savings}");
    assert!(savings.contains("not served by skald"), "{savings}");
    let (status, estimated) = server.page(&format!("/ui/savings?estimate={SESSION_ID}"));
    assert_eq!(status, 200, "{estimated}");
    let estimate = &estimated[estimated.find("id=\"estimate\"").unwrap()..];
    assert!(
        estimate.contains("An estimate by replay, not a saving skald made"),
        "{estimate}"
    );
    let (status, body) = server.page("/ui/savings?estimate=no-such-session");
    assert_eq!(status, 404, "{body}");
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

#[test]
fn dashboard_in_headless_chromium_follows_a_placeholder_and_searches_memory() {
    let upstream = scripted_anthropic();
    let server = Server::start_full(true, Some(&upstream));
    let proxied = proxied_conversation(&server);
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let seen = run_browser_script(
        "dashboard.mjs",
        &[
            ("BASE", format!("http://{}", server.address)),
            ("KEY", server.key.clone()),
            ("FOREIGN_KEY", server.foreign_key.clone()),
            ("SESSION", SESSION_ID.to_owned()),
            ("PROXIED", proxied.clone()),
            ("SHOTS", shots.display().to_string()),
        ],
    );
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
    // The proxy stores an answer when the client sends it back with its next request (two of
    // the three), with the usage the upstream reported for it.
    assert_eq!(
        seen["proxiedCalls"], 2,
        "the proxied calls' timeline: {seen}"
    );
    assert!(
        text("proxiedTotals").starts_with("2 calls (2 with reported usage)"),
        "{seen}"
    );
    // …and with what skald's pipeline did on the request that produced it.
    let pipelines = seen["proxiedPipelines"].as_array().unwrap();
    assert_eq!(
        pipelines.len(),
        2,
        "each proxied call names its pipeline: {seen}"
    );
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
