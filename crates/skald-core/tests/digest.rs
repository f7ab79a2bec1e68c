//! Digests of realistic tool outputs (golden snapshots under `snapshots/`, inputs under
//! `fixtures/digest/`), the identifiers each must keep, and the properties every digest has:
//! within budget, one line, deterministic, never a panic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use skald_core::digest::{
    CUT_MARK, ContentKind, DEFAULT_SUMMARY_MAX_CHARS, Digest, DigestSettings, DigestSettingsError,
    MIN_SUMMARY_MAX_CHARS, digest, digest_blocks,
};
use skald_core::identifiers::mentions_identifier;
use skald_core::message::{Block, Extra, ImageBlock, ImageSource};

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/digest")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn settings(max: usize) -> DigestSettings {
    DigestSettings::new(max).unwrap()
}

fn digest_fixture(name: &str) -> Digest {
    digest(&fixture(name), &DigestSettings::default())
}

/// Every fixture, its expected kind, and strings its default digest must show verbatim.
const FIXTURES: &[(&str, ContentKind, &[&str])] = &[
    (
        "pytest_failure.txt",
        ContentKind::PlainText,
        &[
            "2 failed, 10 passed in 0.31s",
            "tests/test_calc.py::test_divide",
            "tests/test_calc.py::test_parse_hex",
            "src/calc/parse.py:22",
        ],
    ),
    (
        "cargo_build_error.txt",
        ContentKind::PlainText,
        &[
            "error[E0425]: cannot find value `budget` in this scope",
            "crates/skald-core/src/digest.rs:212:17",
        ],
    ),
    (
        "api_response.json",
        ContentKind::Json,
        &[
            "json object, 7 keys",
            "code=404",
            "d41d8cd98f00b204",
            "https://api.example.com/v2/deployments/d41d8cd98f00b204",
        ],
    ),
    (
        "users_array.json",
        ContentKind::Json,
        &["json array of 4", "3 object", "email", "created_at"],
    ),
    (
        "git_diff.txt",
        ContentKind::Code,
        &["diff, 2 files", "src/server/handler.rs", "README.md"],
    ),
    (
        "git_log.txt",
        ContentKind::PlainText,
        &[
            "9c1e5b7a2f4d8e6c3b1a0f9e8d7c6b5a4f3e2d1c",
            "4b2a7e9f1c3d5e7a9b1c3d5e7f9a1b3c5d7e9f1a",
        ],
    ),
    (
        "source_rust.rs.txt",
        ContentKind::Code,
        &["rust code", "Config", "load", "parse", "limit"],
    ),
    (
        "source_python.py.txt",
        ContentKind::Code,
        &["python code", "Store", "open_store", "/var/lib/store"],
    ),
    (
        "read_numbered.txt",
        ContentKind::Code,
        &[
            "elixir code, 17 lines",
            "Spotter.Transcripts.Message",
            "render",
        ],
    ),
    (
        "readme.md",
        ContentKind::Markdown,
        &["markdown", "bash, toml", "Install", "docs/DESIGN.md"],
    ),
    (
        "table.csv",
        ContentKind::Table,
        &["table (csv), 4 rows x 5 cols", "mrr_usd"],
    ),
    (
        "table_pipe.txt",
        ContentKind::Table,
        &["table (pipe), 3 rows x 4 cols", "downloads"],
    ),
    (
        "ls_la.txt",
        ContentKind::PlainText,
        &["listing, 8 entries (3 dirs)", "Cargo.toml", "README.md"],
    ),
    (
        "grep_results.txt",
        ContentKind::PlainText,
        &[
            "grep, 8 matches in 4 files",
            "django/db/models/sql/query.py",
            "django/db/models/sql/compiler.py",
        ],
    ),
    (
        "app.log",
        ContentKind::Log,
        &[
            "ERROR 3",
            "2024-05-01T10:00:01.120Z",
            "2024-05-01T10:05:33.000Z",
            "ConnectionError x2",
            "4f1c2b7a9e",
        ],
    ),
    (
        "traceback_returncode.txt",
        ContentKind::PlainText,
        &[
            "exit 1",
            "django.core.exceptions.FieldError: Cannot compute Count(distinct)",
            "/testbed/django/db/models/aggregates.py",
            "/testbed/reproduce.py",
        ],
    ),
];

#[test]
fn every_fixture_has_its_kind_and_keeps_its_key_strings() {
    for (name, kind, expected) in FIXTURES {
        let d = digest_fixture(name);
        assert_eq!(d.kind, *kind, "{name}: {}", d.summary);
        assert_eq!(ContentKind::detect(&fixture(name)), *kind, "{name}");
        for needle in *expected {
            assert!(
                mentions_identifier(&d.summary, needle),
                "{name}: {needle:?} missing from {:?}",
                d.summary
            );
        }
        assert!(d.summary.chars().count() <= DEFAULT_SUMMARY_MAX_CHARS);
    }
}

/// The golden summaries, one snapshot per fixture: a change to a strategy shows up here.
#[test]
fn golden_summaries() {
    for (name, _, _) in FIXTURES {
        let d = digest_fixture(name);
        let rendered = format!("[{}] {}", d.kind.name(), d.summary);
        insta::assert_snapshot!(format!("digest_{name}"), rendered);
    }
}

/// The same fixtures at the seed's minimum budget: still one line, and the most important
/// string (an error, a failing test, a kind) comes first.
#[test]
fn golden_summaries_at_minimum_budget() {
    let mut out = String::new();
    for (name, _, _) in FIXTURES {
        let d = digest(&fixture(name), &settings(MIN_SUMMARY_MAX_CHARS));
        assert!(d.summary.chars().count() <= MIN_SUMMARY_MAX_CHARS, "{name}");
        out.push_str(&format!("{name}: {}\n", d.summary));
    }
    insta::assert_snapshot!("digest_minimum_budget", out);
}

#[test]
fn settings_reject_budgets_below_the_minimum() {
    assert_eq!(
        DigestSettings::default().summary_max_chars(),
        DEFAULT_SUMMARY_MAX_CHARS
    );
    assert_eq!(settings(50).summary_max_chars(), 50);
    let err = DigestSettings::new(49).unwrap_err();
    assert_eq!(
        err,
        DigestSettingsError::SummaryMaxCharsTooSmall {
            found: 49,
            minimum: 50
        }
    );
    let message = err.to_string();
    assert!(message.starts_with("summary_max_chars: expected at least 50"));
    assert!(message.contains("found 49"));
    assert!(DigestSettings::new(0).is_err());
}

#[test]
fn empty_and_blank_inputs() {
    for text in ["", "   ", "\n\n\n", "\t \r\n"] {
        let d = digest(text, &DigestSettings::default());
        assert_eq!(d.kind, ContentKind::PlainText);
        assert!(!d.summary.is_empty(), "{text:?}");
        assert!(!d.summary.contains('\n'));
    }
}

#[test]
fn huge_single_line_is_cut_within_budget() {
    let line = format!("{} /srv/data/blob.bin", "x".repeat(1 << 20));
    let d = digest(&line, &DigestSettings::default());
    assert_eq!(d.kind, ContentKind::PlainText);
    assert!(d.summary.chars().count() <= DEFAULT_SUMMARY_MAX_CHARS);
    assert!(d.summary.contains("1 line"));
    assert!(d.summary.contains(CUT_MARK));
    // The identifier sits past the sampled part of the line: the summary may not show it, but
    // it must not show a cut-off version of it either.
    assert!(!d.summary.contains("/srv/data/blob.b…"));
}

#[test]
fn binaryish_text_becomes_printable_single_line() {
    let mut text: String = (0u32..=0x2ff).filter_map(char::from_u32).collect();
    text.push_str("\u{0}\u{7}\u{1b}[31mred\u{1b}[0m\r\n\u{feff}end");
    let d = digest(&text, &settings(120));
    assert!(d.summary.chars().count() <= 120);
    assert!(!d.summary.chars().any(char::is_control), "{:?}", d.summary);
}

#[test]
fn cjk_text_is_cut_on_character_boundaries() {
    let text = "错误：无法打开文件 /数据/日志 和 /var/log/应用.log\n".repeat(200)
        + "Traceback (most recent call last):\n  File \"/srv/app/main.py\", line 3\nValueError: 无效的输入值，请检查配置文件中的每一个字段是否正确设置并且没有遗漏任何必要的参数\n";
    for max in [50, 61, 77, 120, 300] {
        let d = digest(&text, &settings(max));
        assert!(d.summary.chars().count() <= max, "{max}: {}", d.summary);
    }
    let d = digest(&text, &DigestSettings::default());
    assert!(
        d.summary.contains("ValueError: 无效的输入值"),
        "{}",
        d.summary
    );
    assert!(d.summary.contains("/srv/app/main.py"), "{}", d.summary);
}

#[test]
fn cuts_are_marked() {
    let long_error = format!("error: {}", "word ".repeat(200));
    let d = digest(&long_error, &settings(80));
    assert!(d.summary.chars().count() <= 80);
    assert!(d.summary.contains(CUT_MARK), "{}", d.summary);
}

#[test]
fn exit_codes_are_kept() {
    let wrapped = "<returncode>2</returncode>\n<output>\nls: cannot access 'nope': No such file or directory\n</output>";
    let d = digest(wrapped, &DigestSettings::default());
    assert!(d.summary.contains("exit 2"), "{}", d.summary);
    assert!(d.summary.contains("No such file or directory"));
    let claude = "Exit code 127\n/bin/sh: 1: frobnicate: not found\n";
    let d = digest(claude, &DigestSettings::default());
    assert!(d.summary.contains("exit 127"), "{}", d.summary);
}

#[test]
fn failing_tests_of_several_runners_are_named() {
    let cases = [
        (
            "running 3 tests\ntest parse::empty ... ok\ntest parse::nested ... FAILED\n\ntest result: FAILED. 2 passed; 1 failed; 0 ignored\n",
            "parse::nested",
            "test result: FAILED. 2 passed; 1 failed",
        ),
        (
            "=== RUN   TestAdd\n--- FAIL: TestAdd (0.00s)\n    add_test.go:9: got 3, want 4\nFAIL\nFAIL\texample.com/calc\t0.002s\n",
            "TestAdd",
            "add_test.go:9",
        ),
        (
            "FAIL: test_slugify (utils_tests.test_text.TestUtilsText)\n----\nTraceback (most recent call last):\n  File \"/testbed/tests/utils_tests/test_text.py\", line 12, in test_slugify\nAssertionError: 'a-b' != 'a_b'\n\nRan 4 tests in 0.01s\n\nFAILED (failures=1)\n",
            "test_slugify (utils_tests.test_text.TestUtilsText)",
            "AssertionError: 'a-b' != 'a_b'",
        ),
    ];
    for (text, test, other) in cases {
        let d = digest(text, &DigestSettings::default());
        assert!(d.summary.contains(test), "{test:?} missing: {}", d.summary);
        assert!(
            d.summary.contains(other),
            "{other:?} missing: {}",
            d.summary
        );
    }
}

#[test]
fn traceback_prefers_the_project_frame_over_the_library_frame() {
    let text = "Traceback (most recent call last):\n  File \"/testbed/tests/aggregation/tests.py\", line 1654, in test_default\n    self.assertEqual(result, expected)\n  File \"/opt/miniconda3/envs/testbed/lib/python3.9/unittest/case.py\", line 912, in assertEqual\n    raise self.failureException(msg)\nAssertionError: 4003 != 300\n";
    let d = digest(text, &settings(120));
    assert!(
        d.summary.contains("AssertionError: 4003 != 300"),
        "{}",
        d.summary
    );
    assert!(
        d.summary.contains("/testbed/tests/aggregation/tests.py"),
        "{}",
        d.summary
    );
}

#[test]
fn a_path_containing_another_identifier_is_shown_instead_of_both() {
    let text = "collected in /tmp/pytest-of-root/pytest-2/test_pkgfile0\nimporting /tmp/pytest-of-root/pytest-2/test_pkgfile0/subdir/__init__.py\n";
    let d = digest(text, &DigestSettings::default());
    let ids = d
        .summary
        .split("; ")
        .find_map(|part| part.strip_prefix("ids: "))
        .unwrap_or_else(|| panic!("no ids in {}", d.summary));
    assert_eq!(
        ids, "/tmp/pytest-of-root/pytest-2/test_pkgfile0/subdir/__init__.py",
        "{}",
        d.summary
    );
}

#[test]
fn logs_without_timestamps_but_with_levels() {
    let text = "INFO:root:starting\nINFO:root:loaded 3 plugins\nWARNING:root:slow disk\nERROR:root:plugin foo crashed: KeyError: 'bar'\n";
    let d = digest(text, &DigestSettings::default());
    assert_eq!(d.kind, ContentKind::Log, "{}", d.summary);
    assert!(d.summary.contains("ERROR 1"), "{}", d.summary);
    assert!(d.summary.contains("WARN 1"));
    assert!(d.summary.contains("INFO 2"));
}

#[test]
fn jsonl_is_json() {
    let text = "{\"ts\":1,\"msg\":\"a\"}\n{\"ts\":2,\"msg\":\"b\",\"extra\":true}\n";
    let d = digest(text, &DigestSettings::default());
    assert_eq!(d.kind, ContentKind::Json);
    assert!(d.summary.starts_with("jsonl, 2 records"), "{}", d.summary);
    assert!(d.summary.contains("extra"));
}

#[test]
fn json_scalars_and_empty_containers() {
    for (text, expected) in [
        ("[]", "json array, empty"),
        ("{}", "json object, 0 keys"),
        ("{\"a\": 1.0}", "a=1.0"),
        ("[1, \"x\", null, [2], {\"k\": 3}]", "json array of 5"),
    ] {
        let d = digest(text, &DigestSettings::default());
        assert_eq!(d.kind, ContentKind::Json, "{text}");
        assert!(d.summary.contains(expected), "{text}: {}", d.summary);
    }
    // A bare number is not worth calling JSON.
    assert_eq!(
        digest("42", &DigestSettings::default()).kind,
        ContentKind::PlainText
    );
}

#[test]
fn deeply_nested_json_does_not_overflow() {
    let deep = "[".repeat(100_000) + &"]".repeat(100_000);
    let d = digest(&deep, &DigestSettings::default());
    assert!(d.summary.chars().count() <= DEFAULT_SUMMARY_MAX_CHARS);
}

fn image(media_type: &str) -> Block {
    Block::Image(ImageBlock {
        source: ImageSource::Base64 {
            media_type: media_type.to_owned(),
            data: "iVBORw0KGgo=".to_owned(),
        },
        extra: Extra::new(),
    })
}

#[test]
fn blocks_join_text_and_note_images_first() {
    let blocks = vec![
        Block::text("Saved screenshot to /tmp/shots/home.png"),
        image("image/png"),
        Block::text("error: page returned 500"),
        Block::Image(ImageBlock {
            source: ImageSource::Url {
                url: "data:image/jpeg;base64,/9j/4AAQ".to_owned(),
            },
            extra: Extra::new(),
        }),
    ];
    let d = digest_blocks(&blocks, &DigestSettings::default());
    assert!(
        d.summary
            .starts_with("[image: image/png]; [image: image/jpeg]"),
        "{}",
        d.summary
    );
    assert!(d.summary.contains("error: page returned 500"));
    assert!(d.summary.contains("/tmp/shots/home.png"));

    let only_image = digest_blocks(&[image("image/webp")], &settings(50));
    assert_eq!(
        only_image.summary,
        "[image: image/webp]; text, 0 lines, 0 chars"
    );

    let opaque = digest_blocks(
        &[Block::Opaque(json!({"type": "document", "source": {}}))],
        &DigestSettings::default(),
    );
    assert!(
        opaque.summary.starts_with("[document]"),
        "{}",
        opaque.summary
    );
}

#[test]
fn digest_is_deterministic_across_runs() {
    for (name, _, _) in FIXTURES {
        let text = fixture(name);
        let first = digest(&text, &DigestSettings::default());
        for _ in 0..3 {
            assert_eq!(digest(&text, &DigestSettings::default()), first, "{name}");
        }
    }
}

#[test]
fn large_inputs_stay_within_budget_and_report_whole_text_counts() {
    let mut log = String::new();
    for i in 0..20_000 {
        let level = if i % 100 == 0 { "ERROR" } else { "INFO" };
        log.push_str(&format!(
            "2024-05-01T10:{:02}:{:02}Z {level} job {i} done\n",
            (i / 60) % 60,
            i % 60
        ));
    }
    let d = digest(&log, &DigestSettings::default());
    assert_eq!(d.kind, ContentKind::Log);
    assert!(d.summary.contains("log, 20000 lines"), "{}", d.summary);
    assert!(d.summary.contains("ERROR 200"), "{}", d.summary);
    assert!(d.summary.contains("INFO 19800"), "{}", d.summary);
}

// ---------------------------------------------------------------------------------------------
// Properties.

/// Lines that exercise every strategy when mixed.
fn line_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[ -~]{0,120}",
        Just("Traceback (most recent call last):".to_owned()),
        "  File \"/[a-z]{2,8}/[a-z]{2,8}\\.py\", line [0-9]{1,4}, in [a-z_]{1,10}",
        "[A-Z][a-z]{2,10}Error: [ -~]{0,60}",
        "error\\[E[0-9]{4}\\]: [ -~]{0,60}",
        " *--> [a-z]{1,6}/[a-z]{1,6}\\.rs:[0-9]{1,3}:[0-9]{1,2}",
        "20[0-9]{2}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-5][0-9]Z (INFO|WARN|ERROR) [ -~]{0,40}",
        "#{1,6} [ -~]{1,30}",
        "[-*] [ -~]{0,30}",
        "```[a-z]{0,6}",
        "[a-z]{1,8}(,[a-z0-9]{0,8}){1,5}",
        "\\|( [a-z0-9]{0,6} \\|){1,5}",
        "[a-z]{1,8}/[a-z_]{1,8}\\.(py|rs|js):[0-9]{1,4}:[ -~]{0,40}",
        "(pub )?fn [a-z_]{1,12}\\([a-z: &]{0,20}\\) \\{",
        "FAILED [a-z/_]{1,20}\\.py::[a-z_]{1,20} - [ -~]{0,30}",
        "[0-9]{1,3} (passed|failed), [0-9]{1,3} (passed|skipped) in [0-9]\\.[0-9]{2}s",
        "<returncode>[0-9]{1,3}</returncode>",
        "[0-9a-f]{7,40}",
        "https?://[a-z]{1,10}\\.[a-z]{2,3}/[ -~]{0,20}",
        "diff --git a/[a-z]{1,8}\\.rs b/[a-z]{1,8}\\.rs",
        "@@ -[0-9],[0-9] \\+[0-9],[0-9] @@",
        "[+-][ -~]{0,40}",
        "[\\u{4e00}-\\u{9fff}]{1,40}",
        "[dl-][rwx-]{9} +[0-9] [a-z]{1,6} [a-z]{1,6} +[0-9]{1,5} [A-Z][a-z]{2} +[0-9]{1,2} [0-9]{2}:[0-9]{2} [ -~]{1,20}",
    ]
}

fn text_strategy() -> impl Strategy<Value = String> {
    prop::collection::vec(line_strategy(), 0..40).prop_map(|lines| lines.join("\n"))
}

fn json_strategy() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        ".{0,40}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::vec((".{0,12}", inner), 0..8)
                .prop_map(|entries| Value::Object(entries.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn check(text: &str, max: usize) -> Result<(), TestCaseError> {
    let settings = DigestSettings::new(max).unwrap();
    let first = digest(text, &settings);
    prop_assert!(
        first.summary.chars().count() <= max,
        "{} > {max}: {:?}",
        first.summary.chars().count(),
        first.summary
    );
    prop_assert!(!first.summary.contains('\n'));
    prop_assert_eq!(&digest(text, &settings), &first);
    prop_assert_eq!(ContentKind::detect(text), first.kind);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_string_digests_within_budget(text in any::<String>(), max in 50usize..400) {
        check(&text, max)?;
    }

    #[test]
    fn tool_output_like_text_digests_within_budget(text in text_strategy(), max in 50usize..400) {
        check(&text, max)?;
    }

    #[test]
    fn any_json_digests_within_budget(value in json_strategy(), pretty in any::<bool>(), max in 50usize..400) {
        let text = if pretty {
            serde_json::to_string_pretty(&value).unwrap()
        } else {
            value.to_string()
        };
        check(&text, max)?;
    }

    #[test]
    fn blocks_digest_within_budget(
        texts in prop::collection::vec(text_strategy(), 0..4),
        images in 0usize..3,
        max in 50usize..400,
    ) {
        let mut blocks: Vec<Block> = texts.into_iter().map(Block::text).collect();
        for _ in 0..images {
            blocks.push(image("image/png"));
        }
        let d = digest_blocks(&blocks, &DigestSettings::new(max).unwrap());
        prop_assert!(d.summary.chars().count() <= max);
        prop_assert_eq!(d, digest_blocks(&blocks, &DigestSettings::new(max).unwrap()));
    }
}
