//! `skald serve` and `skald keys` as a user runs them: keys created, listed and revoked; a
//! server started on an ephemeral port, answering, and stopping cleanly on SIGTERM; and the
//! refusals (an open server on a public address, a bad `[proxy]` table, a bad tenant).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};

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
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn keys_are_created_listed_and_revoked_and_the_secret_is_shown_once() {
    let home = tempfile::tempdir().unwrap();
    let created = json(&skald(
        home.path(),
        &["keys", "create", "--tenant", "acme", "--name", "ci"],
    ));
    let secret = created["secret"].as_str().unwrap();
    assert!(secret.starts_with("sk-skald-"));
    assert_eq!(created["tenant"], "acme");
    let listed = json(&skald(home.path(), &["keys", "list"]));
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert!(
        listed[0].get("secret").is_none(),
        "a listing never shows a secret"
    );
    let id = created["id"].as_str().unwrap();
    let revoked = json(&skald(home.path(), &["keys", "revoke", id]));
    assert!(revoked["revoked_at"].is_string());
    let again = skald(home.path(), &["keys", "revoke", id]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already revoked"));
}

#[test]
fn a_bad_tenant_is_refused_before_anything_is_created() {
    let home = tempfile::tempdir().unwrap();
    let data = home.path().join("data");
    let output = skald(&data, &["keys", "create", "--tenant", "../etc"]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("invalid tenant"));
    assert!(!data.exists());
}

#[test]
fn an_open_server_refuses_a_public_address() {
    let home = tempfile::tempdir().unwrap();
    let output = skald(home.path(), &["serve", "--addr", "0.0.0.0:0"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("without API keys"), "{stderr}");
    assert!(stderr.contains("skald keys create"), "{stderr}");
}

#[test]
fn an_address_that_is_not_host_and_port_is_refused() {
    let home = tempfile::tempdir().unwrap();
    for bad in ["7420", "127.0.0.1", "no such host:99999"] {
        let output = skald(home.path(), &["serve", "--addr", bad]);
        assert!(!output.status.success(), "{bad} was accepted");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("is not HOST:PORT"), "{bad}: {stderr}");
    }
}

#[test]
fn a_bad_proxy_table_is_refused_at_start() {
    let home = tempfile::tempdir().unwrap();
    for (toml, expected) in [
        (
            "[proxy.openai]\nbase_url = \"localhost:8000\"\n",
            "not an http",
        ),
        (
            "[proxy.openai]\nbase_url = \"http://x\"\nkey = 1\n",
            "unknown field",
        ),
        (
            "[proxy.openai]\nbase_url = \"http://x\"\napi_key_env = \"SKALD_TEST_UNSET_VAR\"\n",
            "not set",
        ),
        ("[server]\nmax_body_bytes = 10\n", "at least 1024"),
        ("[server]\nmax_cached_bytes = 0\n", "max_cached_bytes"),
    ] {
        std::fs::write(home.path().join("skald.toml"), toml).unwrap();
        let output = skald(home.path(), &["serve", "--addr", "127.0.0.1:0"]);
        assert!(!output.status.success(), "{toml} was accepted");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(expected), "{toml}: {stderr}");
    }
}

#[cfg(unix)]
#[test]
fn the_server_answers_and_stops_cleanly_on_sigterm() {
    let home = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_skald"))
        .arg("--home")
        .arg(home.path())
        .args(["serve", "--addr", "127.0.0.1:0"])
        .env_remove("SKALD_HOME")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let url = first.split_whitespace().last().unwrap().to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "{first}");
    let health: Value = {
        let address = url.trim_start_matches("http://");
        let mut stream = std::net::TcpStream::connect(address).unwrap();
        use std::io::{Read, Write};
        write!(
            stream,
            "GET /healthz HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let body = response.split("\r\n\r\n").nth(1).unwrap();
        serde_json::from_str(body).unwrap()
    };
    assert_eq!(health["status"], "ok");
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(rest.iter().any(|line| line.contains("stopped")), "{rest:?}");
    assert!(home.path().join("skald.sqlite3").exists());
}

#[test]
fn a_database_that_is_not_postgres_is_refused_at_start() {
    let home = tempfile::tempdir().unwrap();
    let output = skald(
        home.path(),
        &["serve", "--database", "mysql://root:hunter2@db/skald"],
    );
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("must be a PostgreSQL URL"), "{stderr}");
    assert!(
        !stderr.contains("hunter2"),
        "a password is never shown: {stderr}"
    );
    std::fs::write(
        home.path().join("skald.toml"),
        "[database]\nurl = \"sqlite:///tmp/x.db\"\n",
    )
    .unwrap();
    let output = skald(home.path(), &["keys", "list"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("[database] url"), "{stderr}");
}
