//! End-to-end tests of the session commands: `skald import`, `skald sessions`, `skald context`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const SESSION_ID: &str = "7c1d2e3f-0a4b-4c5d-8e6f-9a0b1c2d3e4f";

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/session_with_compaction.jsonl")
}

fn skald(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skald"))
        .arg("--home")
        .arg(home)
        .args(args)
        .env_remove("SKALD_HOME")
        .output()
        .unwrap()
}

fn json(output: &Output) -> Value {
    assert!(output.status.success(), "{output:?}");
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn import_then_sessions_then_context() {
    let home = tempfile::tempdir().unwrap();
    let fixture = fixture();
    let imported = json(&skald(home.path(), &["import", fixture.to_str().unwrap()]));
    assert_eq!(imported["session_id"], SESSION_ID);
    assert_eq!(imported["format"], "openclaw-session");
    assert_eq!(imported["status"], "created");
    assert_eq!(imported["entries_added"], 15);
    assert_eq!(imported["messages"], 12);

    let sessions = json(&skald(home.path(), &["sessions"]));
    let row = &sessions[0];
    assert_eq!(sessions.as_array().unwrap().len(), 1);
    assert_eq!(row["session_id"], SESSION_ID);
    assert_eq!(row["entries"], 15);
    assert_eq!(row["messages"], 12);
    assert_eq!(row["leaf_id"], "c000000f");
    assert!(
        row["title"]
            .as_str()
            .unwrap()
            .starts_with("The CI run on fix/rounding fails")
    );
    assert!(row["estimated_tokens"].as_u64().unwrap() > 500);
    assert!(row["updated_at"].as_str().unwrap().ends_with('Z'));

    // The context as OpenClaw rebuilds it from the leaf (the compaction summary, the kept
    // entries, the branch summary, not the abandoned branch), after the skald policy.
    let context = json(&skald(home.path(), &["context", SESSION_ID]));
    let messages = context["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 10);
    assert!(
        messages[0]["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("The conversation history before this point was compacted")
    );
    assert_eq!(messages[3]["role"], "toolResult");
    assert!(
        !context.to_string().contains("Patch the migration instead"),
        "the abandoned branch leaked into the context"
    );
    assert!(context["estimatedTokens"].as_u64().unwrap() > 100);
    assert!(
        context["systemPromptAddition"]
            .as_str()
            .unwrap()
            .contains("REF_ID")
    );
    assert_eq!(context["tools"][0], "fetch_original_data");

    // Under the `none` policy nothing is offloaded and nothing is added to the prompt.
    let plain = json(&skald(
        home.path(),
        &["context", SESSION_ID, "--policy", "none"],
    ));
    assert_eq!(plain["systemPromptAddition"], Value::Null);
    assert!(plain["estimatedTokens"].as_u64() > context["estimatedTokens"].as_u64());
}

#[test]
fn refs_handed_out_by_context_are_in_the_local_ref_store() {
    let home = tempfile::tempdir().unwrap();
    let fixture = fixture();
    json(&skald(home.path(), &["import", fixture.to_str().unwrap()]));
    let context = json(&skald(home.path(), &["context", SESSION_ID]));
    let text = context["messages"][3]["content"][0]["text"]
        .as_str()
        .unwrap();
    let token = text.split(']').next().unwrap().to_owned() + "]";
    assert!(token.starts_with("[REF_ID: "), "{text}");
    let fetched = skald(home.path(), &["fetch", &token, "--grep", "FAILED"]);
    assert!(fetched.status.success(), "{fetched:?}");
    assert!(
        String::from_utf8_lossy(&fetched.stdout).contains("test_rounding FAILED"),
        "{fetched:?}"
    );
}

#[test]
fn importing_again_is_idempotent_and_a_grown_file_appends() {
    let home = tempfile::tempdir().unwrap();
    let full = std::fs::read_to_string(fixture()).unwrap();
    let lines: Vec<&str> = full.lines().collect();
    let file = home.path().join("session.jsonl");
    std::fs::write(&file, format!("{}\n", lines[..8].join("\n"))).unwrap();
    let path = file.to_str().unwrap();

    let first = json(&skald(home.path(), &["import", path]));
    assert_eq!(
        (first["status"].clone(), first["entries"].clone()),
        ("created".into(), 7.into())
    );
    let again = json(&skald(home.path(), &["import", path]));
    assert_eq!(again["status"], "already_imported");
    assert_eq!(again["entries_added"], 0);
    assert_eq!(again["entries"], 7);

    std::fs::write(&file, &full).unwrap();
    let grown = json(&skald(home.path(), &["import", path]));
    assert_eq!(grown["status"], "appended");
    assert_eq!(grown["entries_added"], 8);
    assert_eq!(grown["entries"], 15);
    let sessions = json(&skald(home.path(), &["sessions"]));
    assert_eq!(sessions.as_array().unwrap().len(), 1);
    assert_eq!(sessions[0]["leaf_id"], "c000000f");
}

#[test]
fn other_formats_import_under_a_derived_id() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("request.json");
    std::fs::write(
        &file,
        r#"{"model":"gpt-4o","messages":[{"role":"system","content":"Be terse."},{"role":"user","content":"List the files."},{"role":"assistant","content":"a.txt b.txt"}]}"#,
    )
    .unwrap();
    let path = file.to_str().unwrap();
    let imported = json(&skald(home.path(), &["import", path]));
    let id = imported["session_id"].as_str().unwrap().to_owned();
    // skald's one derivation: the id the proxy gives the same conversation.
    assert!(id.starts_with("conv-"), "{id}");
    assert_eq!(imported["format"], "openai-request");
    assert_eq!(imported["entries"], 3);
    let again = json(&skald(home.path(), &["import", path, "--tenant", "acme"]));
    assert_eq!(again["session_id"], id.as_str());
    assert_eq!(again["status"], "created", "a new tenant gets its own copy");
    let context = json(&skald(home.path(), &["context", &id, "--policy", "none"]));
    let roles: Vec<&str> = context["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant"]);
}

#[test]
fn unknown_sessions_and_bad_input_are_clear_errors() {
    let home = tempfile::tempdir().unwrap();
    let missing_store = skald(home.path(), &["context", SESSION_ID]);
    assert_eq!(missing_store.status.code(), Some(1));
    assert!(
        stderr(&missing_store).contains("import a transcript first"),
        "{missing_store:?}"
    );
    let empty = json(&skald(home.path(), &["sessions"]));
    assert_eq!(empty, Value::Array(vec![]));

    let fixture = fixture();
    json(&skald(home.path(), &["import", fixture.to_str().unwrap()]));
    let unknown = skald(home.path(), &["context", "no-such-session"]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(
        stderr(&unknown).contains("no session \"no-such-session\" for tenant \"default\""),
        "{unknown:?}"
    );
    let other_tenant = skald(home.path(), &["context", SESSION_ID, "--tenant", "acme"]);
    assert_eq!(other_tenant.status.code(), Some(1));
    assert!(
        stderr(&other_tenant).contains("no session"),
        "{other_tenant:?}"
    );
    let bad_leaf = skald(home.path(), &["context", SESSION_ID, "--leaf", "deadbeef"]);
    assert!(
        stderr(&bad_leaf).contains("has no entry \"deadbeef\""),
        "{bad_leaf:?}"
    );
    let bad_policy = skald(home.path(), &["context", SESSION_ID, "--policy", "nope"]);
    assert!(
        stderr(&bad_policy).contains("neither a preset"),
        "{bad_policy:?}"
    );

    let garbage = home.path().join("garbage.json");
    std::fs::write(&garbage, r#"{"foo": 1}"#).unwrap();
    let refused = skald(home.path(), &["import", garbage.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(stderr(&refused).contains("cannot import"), "{refused:?}");
    let sessions = json(&skald(home.path(), &["sessions"]));
    assert_eq!(sessions.as_array().unwrap().len(), 1, "nothing was stored");
}

#[test]
fn context_renders_what_the_model_reads() {
    let home = tempfile::tempdir().unwrap();
    let fixture = fixture();
    json(&skald(home.path(), &["import", fixture.to_str().unwrap()]));
    let output = skald(home.path(), &["context", SESSION_ID, "--text"]);
    assert!(output.status.success(), "{output:?}");
    insta::assert_snapshot!(
        "context_of_a_compacted_branching_session",
        String::from_utf8(output.stdout).unwrap()
    );
}

#[test]
fn context_with_memory_shows_the_profile_the_listing_and_the_recalled_memories() {
    let home = tempfile::tempdir().unwrap();
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/compactable_session.jsonl");
    let session = "0c0ffee0-1111-4222-8333-444455556666";
    json(&skald(home.path(), &["import", fixture.to_str().unwrap()]));
    let remember = |kind: &str, content: &str| {
        json(&skald(
            home.path(),
            &[
                "remember",
                "--content",
                content,
                "--type",
                kind,
                "--user",
                "dana",
            ],
        ))
    };
    remember(
        "profile",
        "Dana runs the checkout team of the shop and reviews every pricing change.",
    );
    remember(
        "cases",
        "Coupon totals were wrong when the coupon was applied after tax; the fix applies it \
         before tax, with a regression test in tests/test_pricing.py.",
    );

    // Without --memory nothing of memory shows.
    let plain = json(&skald(home.path(), &["context", session]));
    assert!(plain.get("memory").is_none());
    assert!(!plain.to_string().contains("search_memories"));

    let context = json(&skald(
        home.path(),
        &["context", session, "--memory", "--user", "dana"],
    ));
    let addition = context["systemPromptAddition"].as_str().unwrap();
    assert!(
        addition.contains("Dana runs the checkout team"),
        "{addition}"
    );
    let kept = context["memory"]["recall"]["kept"].as_array().unwrap();
    assert_eq!(kept.len(), 1, "{context:#}");
    assert!(
        kept[0]["uri"]
            .as_str()
            .unwrap()
            .contains("/memories/cases/")
    );
    let text = context["messages"].to_string();
    assert!(text.contains("search_memories") && text.contains("memory_ls"));
    assert!(text.contains("regression test in tests/test_pricing.py"));
    let tools: Vec<&str> = context["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(tools.contains(&"commit_memory"), "{tools:?}");
    assert!(
        context["estimatedTokens"].as_u64() > plain["estimatedTokens"].as_u64(),
        "the injected memories are counted"
    );

    // Another user of the same agent: the agent's case, not Dana's profile.
    let other = json(&skald(
        home.path(),
        &["context", session, "--memory", "--user", "erin"],
    ));
    assert!(!other.to_string().contains("Dana runs the checkout team"));
    assert_eq!(
        other["memory"]["recall"]["kept"].as_array().unwrap().len(),
        1
    );
}
