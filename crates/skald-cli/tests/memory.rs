//! End-to-end tests of the memory commands against a temporary data directory: remember,
//! search, ls, tree, read, search-docs, add, history and forget; their JSON shapes; identities;
//! and bad input that is refused with a message naming it and writes nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

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
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

fn failure(output: &Output) -> String {
    assert!(!output.status.success(), "expected a failure: {output:?}");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn uris(search: &Value) -> Vec<String> {
    search["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["uri"].as_str().unwrap().to_owned())
        .collect()
}

/// How many writes the history holds (0 when there is no database yet).
fn writes(home: &Path) -> usize {
    json(&skald(home, &["history", "--limit", "1000"]))
        .as_array()
        .unwrap()
        .len()
}

#[test]
fn remember_search_history_forget() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let added = json(&skald(
        home,
        &[
            "remember",
            "--content",
            "The user prefers dark mode in every editor",
            "--type",
            "preferences",
            "--priority",
            "7",
        ],
    ));
    assert_eq!(added["outcome"], "added");
    assert_eq!(added["category"], "preferences");
    assert_eq!(added["priority"], 7);
    let uri = added["uri"].as_str().unwrap().to_owned();
    assert!(
        uri.starts_with(
            "viking://user/default/memories/preferences/the-user-prefers-dark-mode-in-every-editor-"
        ) && uri.ends_with(".md"),
        "{uri}"
    );
    let agent = json(&skald(
        home,
        &[
            "remember",
            "--content",
            "CI flakes were fixed by pinning node 20",
            "--type",
            "cases",
        ],
    ));
    assert!(
        agent["uri"]
            .as_str()
            .unwrap()
            .starts_with("viking://agent/default/memories/cases/ci-flakes"),
        "{agent}"
    );

    // The same content again is merged into the entry already there.
    let again = json(&skald(
        home,
        &[
            "remember",
            "--content",
            "the user prefers dark mode in every editor.",
            "--type",
            "preferences",
        ],
    ));
    assert_eq!(again["outcome"], "merged");
    assert_eq!(again["uri"], uri.as_str());
    assert_eq!(again["duplicate"]["kind"], "exact");

    let found = json(&skald(
        home,
        &["search", "--query", "which editor theme, dark mode?"],
    ));
    assert_eq!(found["mode"], "full-text");
    assert_eq!(uris(&found), [uri.as_str()]);
    let row = &found["results"][0];
    assert_eq!(row["rank"], 1);
    assert_eq!(row["category"], "preferences");
    assert_eq!(row["l0"], "The user prefers dark mode in every editor");
    assert!(row["score"].as_f64().unwrap() > 0.0);
    for key in ["created_at", "updated_at"] {
        assert!(row[key].as_str().unwrap().ends_with('Z'), "{key}");
    }
    let cases = json(&skald(
        home,
        &["search", "-q", "dark mode node", "--category", "cases"],
    ));
    assert_eq!(uris(&cases).len(), 1);
    assert!(uris(&cases)[0].contains("/cases/"));

    let read = json(&skald(home, &["read", &uri, "--level", "l0"]));
    assert_eq!(read["text"], "The user prefers dark mode in every editor");
    assert_eq!(read["level"], "l0");

    let forgotten = json(&skald(home, &["forget", &uri]));
    assert_eq!(forgotten["uri"], uri.as_str());
    let after = json(&skald(home, &["search", "--query", "dark mode editor"]));
    assert!(uris(&after).is_empty(), "{after}");
    assert!(failure(&skald(home, &["read", &uri])).contains("forgotten"));

    let history = json(&skald(home, &["history", "--limit", "3"]));
    let actions: Vec<&str> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["forgotten", "merged", "added"]);
    assert_eq!(history[0]["uri"], uri.as_str());
    assert_eq!(history[1]["requested_uri"], uri.as_str());
    let versions = json(&skald(home, &["history", "--uri", &uri]));
    assert_eq!(versions[0]["status"], "forgotten");
    assert_eq!(versions[0]["version"], 1);
}

#[test]
fn users_see_their_own_memories_and_the_config_names_them() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let alice = json(&skald(
        home,
        &[
            "remember",
            "--content",
            "Alice is allergic to peanuts",
            "--type",
            "profile",
            "--user",
            "alice",
        ],
    ));
    assert!(
        alice["uri"]
            .as_str()
            .unwrap()
            .starts_with("viking://user/alice/memories/profile/")
    );
    let as_bob = json(&skald(
        home,
        &["search", "-q", "peanuts allergy", "--user", "bob"],
    ));
    assert!(uris(&as_bob).is_empty());
    let as_alice = json(&skald(
        home,
        &["search", "-q", "peanuts allergy", "--user", "alice"],
    ));
    assert_eq!(uris(&as_alice).len(), 1);
    // Other tenants see nothing.
    let other = json(&skald(
        home,
        &[
            "search", "-q", "peanuts", "--user", "alice", "--tenant", "globex",
        ],
    ));
    assert!(uris(&other).is_empty());

    std::fs::write(home.join("skald.toml"), "[memory]\nuser = \"alice\"\n").unwrap();
    let configured = json(&skald(home, &["search", "-q", "peanuts allergy"]));
    assert_eq!(uris(&configured).len(), 1);
    let listed = json(&skald(home, &["ls", "--category", "profile"]));
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert_eq!(listed[0]["type"], "entry");
}

#[test]
fn add_a_directory_then_browse_search_and_re_add() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let src = tempfile::tempdir().unwrap();
    let docs = src.path().join("docs");
    std::fs::create_dir_all(docs.join("api")).unwrap();
    std::fs::create_dir_all(docs.join(".git")).unwrap();
    std::fs::create_dir_all(docs.join("node_modules/x")).unwrap();
    std::fs::write(
        docs.join("guide.md"),
        "Project guide.\n\n# Setup\nRun make to build everything.\n\n# Auth\nTokens expire after one hour; refresh them with the refresh endpoint.\n",
    )
    .unwrap();
    std::fs::write(
        docs.join("api/retry.rs"),
        "fn retry_with_backoff() {}\n\nfn jitter() {}\n",
    )
    .unwrap();
    std::fs::write(docs.join(".git/config"), "secret refresh token").unwrap();
    std::fs::write(docs.join("node_modules/x/index.js"), "refresh token").unwrap();
    std::fs::write(docs.join("logo.png"), [0x89, b'P', b'N', b'G', 0, 0, 1]).unwrap();
    let docs_arg = docs.to_str().unwrap();

    let report = json(&skald(home, &["add", docs_arg]));
    assert_eq!(report["root"], "viking://resources/docs");
    assert_eq!(report["files"], 2);
    // guide.md: intro, setup, auth; retry.rs: one part.
    assert_eq!(report["chunks"], 4);
    // docs, docs/api, docs/api/retry.rs, docs/guide.md.
    assert_eq!(report["directories"], 4);
    assert_eq!(report["added"], 8);
    assert_eq!(report["skipped"].as_array().unwrap().len(), 1);
    assert!(
        report["skipped"][0]["path"]
            .as_str()
            .unwrap()
            .ends_with("logo.png")
    );
    assert!(
        report["skipped"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("binary")
    );

    let listed = json(&skald(home, &["ls", "viking://resources/docs"]));
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["api/", "guide.md/", "_overview"]);
    assert_eq!(listed[1]["type"], "directory");
    assert_eq!(listed[1]["entries"], 4);
    assert_eq!(listed[1]["l0"], "guide.md: Project guide.");

    let tree = json(&skald(
        home,
        &["tree", "viking://resources/docs", "--depth", "3"],
    ));
    assert_eq!(tree["uri"], "viking://resources/docs");
    assert!(tree["children"].as_array().unwrap().len() == 3);

    let chunk = json(&skald(
        home,
        &["read", "viking://resources/docs/guide.md/auth"],
    ));
    assert_eq!(
        chunk["text"],
        "# Auth\nTokens expire after one hour; refresh them with the refresh endpoint."
    );
    let overview = json(&skald(
        home,
        &["read", "viking://resources/docs/guide.md", "--level", "l0"],
    ));
    assert_eq!(
        overview["entry"],
        "viking://resources/docs/guide.md/_overview"
    );
    assert_eq!(overview["text"], "guide.md: Project guide.");

    let found = json(&skald(
        home,
        &["search-docs", "--query", "how do I refresh tokens"],
    ));
    assert_eq!(uris(&found)[0], "viking://resources/docs/guide.md/auth");
    let scoped = json(&skald(
        home,
        &[
            "search-docs",
            "-q",
            "retry backoff",
            "--path",
            "viking://resources/docs/api",
        ],
    ));
    assert!(!uris(&scoped).is_empty());
    assert!(
        uris(&scoped)
            .iter()
            .all(|uri| uri.starts_with("viking://resources/docs/api/"))
    );
    // Memories search does not return resources unless asked.
    assert!(uris(&json(&skald(home, &["search", "-q", "refresh tokens"]))).is_empty());

    // Unchanged: nothing written.
    let before = writes(home);
    let again = json(&skald(home, &["add", docs_arg]));
    assert_eq!(again["unchanged"], 8);
    assert_eq!(again["added"], 0);
    assert_eq!(writes(home), before);

    // A changed section is a new version; a deleted file's entries are forgotten.
    std::fs::write(
        docs.join("guide.md"),
        "Project guide.\n\n# Setup\nRun make to build everything.\n\n# Auth\nTokens now expire after two hours.\n",
    )
    .unwrap();
    std::fs::remove_dir_all(docs.join("api")).unwrap();
    let changed = json(&skald(home, &["add", docs_arg]));
    // auth, guide.md/_overview and docs/_overview changed.
    assert_eq!(changed["updated"], 3);
    // api/_overview, api/retry.rs/_overview, api/retry.rs/part-001.
    assert_eq!(changed["forgotten"], 3);
    let chunk = json(&skald(
        home,
        &["read", "viking://resources/docs/guide.md/auth"],
    ));
    assert_eq!(chunk["version"], 2);
    assert!(
        uris(&json(&skald(
            home,
            &["search-docs", "-q", "retry backoff jitter"]
        )))
        .is_empty()
    );

    // Forgetting a whole document.
    let gone = json(&skald(
        home,
        &["forget", "--recursive", "viking://resources/docs/guide.md"],
    ));
    assert_eq!(gone.as_array().unwrap().len(), 4);
    assert!(
        uris(&json(&skald(
            home,
            &["search-docs", "-q", "tokens expire hours"]
        )))
        .iter()
        .all(|uri| !uri.starts_with("viking://resources/docs/guide.md/"))
    );

    // A single file, under --to.
    let single = json(&skald(
        home,
        &[
            "add",
            docs.join("guide.md").to_str().unwrap(),
            "--to",
            "viking://resources/project",
        ],
    ));
    assert_eq!(single["root"], "viking://resources/project/guide.md");
    assert_eq!(single["chunks"], 3);
}

#[test]
fn bad_input_is_named_and_writes_nothing() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    json(&skald(
        home,
        &["remember", "--content", "A first memory about kayaks"],
    ));
    let before = writes(home);
    for (args, expected) in [
        (vec!["read", "user/alice"], "must start with viking://"),
        (
            vec!["read", "viking://users/alice"],
            "not a top-level directory",
        ),
        (
            vec!["forget", "viking://user/default/memories"],
            "is a directory",
        ),
        (
            vec!["forget", "viking://user/default/memories/events/none.md"],
            "no memory at",
        ),
        (
            vec!["ls", "--category", "memos"],
            "unknown category \"memos\"",
        ),
        (
            vec!["search", "-q", "x", "--category", "memos"],
            "the categories are",
        ),
        (vec!["search", "-q", "  "], "--query is empty"),
        (
            vec!["add", "/nonexistent/skald/file.md"],
            "no file or directory at",
        ),
        (
            vec!["add", ".", "--to", "viking://user/default/memories/events"],
            "not under viking://resources",
        ),
        (
            vec!["search-docs", "-q", "x", "--path", "viking://user/default"],
            "not under viking://resources",
        ),
        (vec!["remember", "--content", " "], "--content is empty"),
        (
            vec!["remember", "--content", "x", "--user", "a/b"],
            "has a '/'",
        ),
        (
            vec!["remember", "--content", "x", "--type", "notes"],
            "invalid value 'notes'",
        ),
        (vec!["remember", "--content", "x", "--priority", "11"], "11"),
        (
            vec!["history", "--uri", "viking://resources"],
            "is a directory",
        ),
    ] {
        let error = failure(&skald(home, &args));
        assert!(error.contains(expected), "{args:?}: {error}");
    }
    assert_eq!(writes(home), before);

    // A configured embedder that cannot start is an error before anything is written.
    std::fs::write(
        home.join("skald.toml"),
        "[embedding]\nkind = \"openai\"\nmodel = \"e\"\napi_key_env = \"SKALD_TEST_UNSET_EMBED_KEY\"\n",
    )
    .unwrap();
    let error = failure(&skald(
        home,
        &["remember", "--content", "Another memory about canoes"],
    ));
    assert!(error.contains("SKALD_TEST_UNSET_EMBED_KEY"), "{error}");
    std::fs::remove_file(home.join("skald.toml")).unwrap();
    assert_eq!(writes(home), before);
}

fn help(command: &str) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_skald"))
        .args([command, "--help"])
        .env_remove("SKALD_URL")
        .env_remove("SKALD_API_KEY")
        .output()
        .unwrap();
    assert!(output.status.success());
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn help_texts_of_the_memory_commands() {
    for command in [
        "search",
        "search-docs",
        "ls",
        "tree",
        "read",
        "add",
        "history",
        "remember",
        "forget",
    ] {
        insta::assert_snapshot!(format!("help_{command}"), help(command));
    }
}
