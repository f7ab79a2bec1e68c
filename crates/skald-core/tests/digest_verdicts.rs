//! Verdicts of test runners, linters and type checkers in digests: a corpus of realistic outputs
//! under `fixtures/digest/<tool>/` (passing and failing, with progress marks, logs, warnings,
//! colours and compile lines), each digest keeping the runner's summary line and verdict, the
//! first failing test and the first exception; golden snapshots per tool.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use skald_core::digest::{DigestSettings, digest};

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/digest")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn summary_of(name: &str) -> String {
    digest(&fixture(name), &DigestSettings::default()).summary
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Expect {
    Pass,
    Fail,
}

/// Every fixture: its verdict, its summary line as the digest must show it, and further strings
/// the digest must show (the first failing test, the first exception).
const CORPUS: &[(&str, Expect, &str, &[&str])] = &[
    (
        "exunit/pass_logged_errors.txt",
        Expect::Pass,
        "2 doctests, 38 tests, 0 failures",
        &[],
    ),
    (
        "exunit/fail_runtime_error.txt",
        Expect::Fail,
        "1 doctest, 31 tests, 12 failures",
        &[
            "** (RuntimeError) no :secret_key_base configuration found in ShopWeb.Endpoint.",
            "test checkout charges the card (ShopWeb.CheckoutLiveTest)",
        ],
    ),
    (
        "exunit/fail_assertion.txt",
        Expect::Fail,
        "14 doctests, 297 tests, 1 failure, 3 excluded",
        &[
            "Assertion with == failed",
            "test parse/1 rejects negative amounts (Ledger.AmountTest)",
        ],
    ),
    (
        "exunit/fail_compile_error.txt",
        Expect::Fail,
        "Compilation error in file lib/fx/converter.ex",
        &["** (CompileError) lib/fx/converter.ex: cannot compile module Fx.Converter"],
    ),
    (
        "credo/fail_issues.txt",
        Expect::Fail,
        "312 mods/funs, found 1 refactoring opportunity, 2 code readability issues.",
        &["[R] → Modules should have a @moduledoc tag."],
    ),
    (
        "credo/pass_clean.txt",
        Expect::Pass,
        "312 mods/funs, found no issues.",
        &[],
    ),
    (
        "credo/fail_warning.txt",
        Expect::Fail,
        "48 mods/funs, found 1 warning.",
        &["[W] ↗ There should be no calls to `IO.inspect/1`."],
    ),
    (
        "pytest/fail_assertion.txt",
        Expect::Fail,
        "1 failed, 46 passed, 1 skipped, 1 warning in 2.14s",
        &[
            "assert 17.982 == 17.98",
            "tests/test_totals.py::test_total_with_discount",
        ],
    ),
    (
        "pytest/pass_with_logs.txt",
        Expect::Pass,
        "112 passed in 4.02s",
        &[],
    ),
    (
        "pytest/fail_errors_xdist.txt",
        Expect::Fail,
        "85 passed, 1 xfailed, 9 warnings, 40 errors in 0.56s",
        &[
            "recursive dependency involving fixture 'httpbin' detected",
            "test_requests.py::RequestsTestCase::test_DIGEST_HTTP_200_OK_GET",
        ],
    ),
    (
        "pytest/pass_quiet.txt",
        Expect::Pass,
        "115 passed in 0.87s",
        &[],
    ),
    (
        "unittest/fail_django.txt",
        Expect::Fail,
        "Ran 20 tests in 0.118s; FAILED (failures=1, errors=1)",
        &[
            "django.core.exceptions.FieldError: Invalid field name(s) for model Person: 'nickname'.",
            "test_update_or_create_defaults (",
        ],
    ),
    (
        "unittest/pass_skips.txt",
        Expect::Pass,
        "Ran 5 tests in 0.004s; OK (skipped=1)",
        &[],
    ),
    (
        "unittest/fail_plain.txt",
        Expect::Fail,
        "Ran 3 tests in 0.001s; FAILED (failures=1)",
        &[
            "AssertionError: 'crme-brle' != 'creme-brulee'",
            "test_slugify_unicode (test_text.SlugTests)",
        ],
    ),
    (
        "mypy/fail_errors.txt",
        Expect::Fail,
        "Found 3 errors in 3 files (checked 41 source files)",
        &["src/orders/service.py:42: error: Incompatible types in assignment"],
    ),
    (
        "mypy/pass_clean.txt",
        Expect::Pass,
        "Success: no issues found in 41 source files",
        &[],
    ),
    (
        "mypy/fail_single.txt",
        Expect::Fail,
        "Found 1 error in 1 file (checked 12 source files)",
        &["app/cache.py:9:5: error: Function is missing a return type annotation"],
    ),
    (
        "ruff/fail_concise.txt",
        Expect::Fail,
        "Found 3 errors.",
        &["F401 [*] `os` imported but unused", "src/app.py:1:8"],
    ),
    (
        "ruff/pass_clean.txt",
        Expect::Pass,
        "All checks passed!",
        &[],
    ),
    (
        "ruff/fail_full.txt",
        Expect::Fail,
        "Found 2 errors.",
        &[
            "F401 [*] `json` imported but unused",
            "scripts/migrate.py:3:8",
        ],
    ),
    (
        "ruff/fail_format_check.txt",
        Expect::Fail,
        "2 files would be reformatted, 17 files already formatted",
        &[],
    ),
    (
        "precommit/fail_ruff_hook.txt",
        Expect::Fail,
        "1 of 7 hooks failed: ruff",
        &["ruff: Found 3 errors."],
    ),
    (
        "precommit/pass_all.txt",
        Expect::Pass,
        "6 hooks passed",
        &[],
    ),
    (
        "precommit/fail_dialyzer_hook.txt",
        Expect::Fail,
        "Pre-commit validation failed",
        &["dialyzer: Total errors: 2"],
    ),
    (
        "precommit/fail_eslint_hook.txt",
        Expect::Fail,
        "husky - pre-commit hook failed",
        &["eslint: ✖ 2 problems (2 errors, 0 warnings)"],
    ),
    (
        "cargo-test/fail_panic.txt",
        Expect::Fail,
        "test result: FAILED. 23 passed; 1 failed;",
        &[
            "src/amount.rs:88:9: assertion `left == right` failed",
            "amount::tests::rounds_half_even",
        ],
    ),
    (
        "cargo-test/pass_workspace.txt",
        Expect::Pass,
        "test result: ok. 3 passed; 0 failed;",
        &[],
    ),
    (
        "cargo-test/fail_old_panic_no_fail_fast.txt",
        Expect::Fail,
        "test result: FAILED. 5 passed; 1 failed;",
        &[
            "panicked at 'called `Option::unwrap()` on a `None` value', src/report.rs:41:27",
            "tests::empty_rows",
        ],
    ),
    (
        "nextest/fail_one.txt",
        Expect::Fail,
        "Summary [ 0.412s] 45 tests run: 44 passed, 1 failed, 2 skipped",
        &[
            "assertion failed: ids(\"FFFFEEEE\").is_empty()",
            "skald-core identifiers::tests::progress_runs",
        ],
    ),
    (
        "nextest/pass_all.txt",
        Expect::Pass,
        "Summary [ 61.310s] 12 tests run: 12 passed (1 slow), 0 skipped",
        &[],
    ),
    (
        "nextest/fail_timeout.txt",
        Expect::Fail,
        "8 tests run: 7 passed, 1 timed out, 0 skipped",
        &["net client::tests::reconnects_after_drop"],
    ),
    (
        "clippy/fail_deny_warnings.txt",
        Expect::Fail,
        "could not compile `skald-core` (lib) due to 2 previous errors",
        &[
            "error: this `if` has identical blocks",
            "crates/skald-core/src/digest/facts.rs:88:21",
        ],
    ),
    (
        "clippy/pass_warnings.txt",
        Expect::Pass,
        "warning: `report` (lib) generated 1 warning",
        &[],
    ),
    (
        "clippy/pass_clean.txt",
        Expect::Pass,
        "Finished `dev` profile [unoptimized + debuginfo] target(s) in 4.10s",
        &[],
    ),
    (
        "clippy/fail_build_error.txt",
        Expect::Fail,
        "could not compile `report` (lib) due to 1 previous error",
        &[
            "error[E0425]: cannot find value `budget` in this scope",
            "src/render.rs:212:17",
        ],
    ),
    (
        "go-test/fail_assert.txt",
        Expect::Fail,
        "FAIL example.com/calc 0.004s",
        &["calc_test.go:14: Add(2, 2) = 5; want 4", "TestAdd"],
    ),
    (
        "go-test/pass_packages.txt",
        Expect::Pass,
        "ok github.com/acme/shop/cart 0.031s",
        &[],
    ),
    (
        "go-test/fail_build.txt",
        Expect::Fail,
        "FAIL github.com/acme/shop/cart [build failed]",
        &["cart/cart.go:41:9: undefined: applyDiscount"],
    ),
    (
        "go-test/fail_panic.txt",
        Expect::Fail,
        "FAIL github.com/acme/kv 0.012s",
        &[
            "panic: runtime error: index out of range [3] with length 3",
            "TestCache",
        ],
    ),
    (
        "ctest/fail_one.txt",
        Expect::Fail,
        "67% tests passed, 1 tests failed out of 3",
        &["/home/dev/geom/tests/mat_test.cpp:42: Failure"],
    ),
    (
        "ctest/pass_all.txt",
        Expect::Pass,
        "100% tests passed, 0 tests failed out of 3",
        &[],
    ),
    (
        "ctest/fail_segfault.txt",
        Expect::Fail,
        "92% tests passed, 1 tests failed out of 12",
        &["parse_test"],
    ),
    (
        "jest/fail_expect.txt",
        Expect::Fail,
        "Test Suites: 1 failed, 1 passed, 2 total; Tests: 1 failed, 11 passed, 12 total",
        &[
            "expect(received).toBe(expected)",
            "cart › total › applies the discount",
        ],
    ),
    (
        "jest/pass_colour.txt",
        Expect::Pass,
        "Test Suites: 2 passed, 2 total; Tests: 23 passed, 23 total",
        &[],
    ),
    (
        "jest/fail_type_error.txt",
        Expect::Fail,
        "Tests: 2 failed, 37 passed, 39 total",
        &[
            "TypeError: Cannot read properties of undefined (reading 'expiresAt')",
            "useSession › refreshes the token before expiry",
        ],
    ),
    (
        "vitest/fail_assert.txt",
        Expect::Fail,
        "Test Files 1 failed | 1 passed (2); Tests 1 failed | 9 passed (10)",
        &[
            "AssertionError: expected 20 to be 18",
            "src/lib/cart.test.ts > cart > total > applies the discount",
        ],
    ),
    (
        "vitest/pass_all.txt",
        Expect::Pass,
        "Test Files 2 passed (2); Tests 14 passed (14)",
        &[],
    ),
    (
        "vitest/fail_error.txt",
        Expect::Fail,
        "Tests 2 failed | 21 passed | 1 skipped (24)",
        &[
            "SyntaxError: Unexpected token",
            "src/store/session.test.ts > session > loads from storage",
        ],
    ),
    (
        "mocha/fail_assert.txt",
        Expect::Fail,
        "2 passing (9ms); 1 failing",
        &[
            "AssertionError [ERR_ASSERTION]: Expected values to be strictly equal",
            "should return the index of the value",
        ],
    ),
    (
        "mocha/pass_pending.txt",
        Expect::Pass,
        "2 passing (58ms); 1 pending",
        &[],
    ),
    (
        "mocha/fail_type_error.txt",
        Expect::Fail,
        "0 passing (12ms); 1 failing",
        &["TypeError: db.connect is not a function"],
    ),
    (
        "eslint/fail_errors.txt",
        Expect::Fail,
        "✖ 3 problems (2 errors, 1 warning)",
        &[
            "1:10 error 'foo' is defined but never used",
            "/home/dev/web/src/index.js",
        ],
    ),
    (
        "eslint/pass_warnings.txt",
        Expect::Pass,
        "✖ 2 problems (0 errors, 2 warnings)",
        &[],
    ),
    (
        "eslint/fail_colour.txt",
        Expect::Fail,
        "✖ 1 problem (1 error, 0 warnings)",
        &["14:7 error 'total' is assigned a value but never used"],
    ),
    (
        "tsc/fail_pretty.txt",
        Expect::Fail,
        "Found 2 errors in 2 files.",
        &[
            "error TS2322: Type 'string' is not assignable to type 'number'.",
            "src/cart.ts:14:7",
        ],
    ),
    (
        "tsc/fail_plain.txt",
        Expect::Fail,
        "Found 2 errors.",
        &["error TS2322: Type 'string' is not assignable to type 'number'."],
    ),
    (
        "tsc/pass_watch.txt",
        Expect::Pass,
        "Found 0 errors. Watching for file changes.",
        &[],
    ),
    (
        "maven/fail_surefire.txt",
        Expect::Fail,
        "Tests run: 8, Failures: 1, Errors: 0, Skipped: 0; BUILD FAILURE",
        &[
            "org.opentest4j.AssertionFailedError: expected: <4> but was: <5>",
            "com.example.CalculatorTest.testAdd",
        ],
    ),
    (
        "maven/pass_warnings.txt",
        Expect::Pass,
        "Tests run: 8, Failures: 0, Errors: 0, Skipped: 1; BUILD SUCCESS",
        &[],
    ),
    (
        "maven/fail_compile.txt",
        Expect::Fail,
        "BUILD FAILURE",
        &["Calculator.java:[21,16] cannot find symbol"],
    ),
    (
        "gradle/fail_test.txt",
        Expect::Fail,
        "12 tests completed, 1 failed; BUILD FAILED in 3s",
        &[
            "org.opentest4j.AssertionFailedError at CalculatorTest.java:12",
            "CalculatorTest > testAdd()",
        ],
    ),
    (
        "gradle/pass_build.txt",
        Expect::Pass,
        "BUILD SUCCESSFUL in 12s",
        &[],
    ),
    (
        "gradle/fail_compile.txt",
        Expect::Fail,
        "BUILD FAILED in 5s",
        &["e: file:///home/dev/app/src/main/kotlin/App.kt:22:5 Unresolved reference: fetchRates"],
    ),
    (
        "dotnet/fail_xunit.txt",
        Expect::Fail,
        "Failed! - Failed: 1, Passed: 14, Skipped: 0, Total: 15",
        &[
            "Assert.Equal() Failure: Values differ",
            "Calc.Tests.CalculatorTests.Add_ReturnsSum",
        ],
    ),
    (
        "dotnet/pass_all.txt",
        Expect::Pass,
        "Passed! - Failed: 0, Passed: 15, Skipped: 0, Total: 15",
        &[],
    ),
    (
        "dotnet/fail_build.txt",
        Expect::Fail,
        "Build FAILED.",
        &["error CS0103: The name 'totl' does not exist in the current context"],
    ),
    (
        "rspec/fail_expectation.txt",
        Expect::Fail,
        "7 examples, 1 failure, 1 pending",
        &[
            "Failure/Error: expect(calc.add(1, 2)).to eq(4)",
            "./spec/calculator_spec.rb:5 # Calculator adds two numbers",
        ],
    ),
    (
        "rspec/pass_all.txt",
        Expect::Pass,
        "27 examples, 0 failures",
        &[],
    ),
    (
        "rspec/fail_exception.txt",
        Expect::Fail,
        "2 examples, 1 failure",
        &["ActiveRecord::RecordNotFound: Couldn't find Product with 'id'=999"],
    ),
    (
        "minitest/fail_mixed.txt",
        Expect::Fail,
        "5 runs, 7 assertions, 1 failures, 1 errors, 0 skips",
        &["Expected: 4", "CalculatorTest#test_add"],
    ),
    (
        "minitest/pass_rails.txt",
        Expect::Pass,
        "42 runs, 88 assertions, 0 failures, 0 errors, 0 skips",
        &[],
    ),
    (
        "minitest/fail_rails.txt",
        Expect::Fail,
        "12 runs, 18 assertions, 0 failures, 1 errors, 0 skips",
        &[
            "NoMethodError: undefined method `sum' for nil:NilClass",
            "OrdersTest#test_total",
        ],
    ),
    (
        "phpunit/fail_assert.txt",
        Expect::Fail,
        "FAILURES!; Tests: 4, Assertions: 4, Failures: 1.",
        &[
            "Failed asserting that 5 matches expected 4.",
            "Tests\\CalculatorTest::testAdd",
        ],
    ),
    (
        "phpunit/pass_all.txt",
        Expect::Pass,
        "OK (20 tests, 41 assertions)",
        &[],
    ),
    (
        "phpunit/fail_error.txt",
        Expect::Fail,
        "ERRORS!; Tests: 5, Assertions: 6, Errors: 1, Skipped: 1.",
        &["TypeError: App\\Cart::total(): Return value must be of type float, null returned"],
    ),
];

#[test]
fn every_digest_keeps_the_summary_line_and_the_verdict() {
    let mut misses = Vec::new();
    for (name, expect, line, extra) in CORPUS {
        let summary = summary_of(name);
        // The verdict word opens the status, the summary line follows within it.
        let (word, wrong) = match expect {
            Expect::Pass => ("passed: ", "FAILED"),
            Expect::Fail => ("FAILED: ", "passed: "),
        };
        let status = summary.split_once(word).map_or("", |(_, status)| status);
        if !status.contains(line) || summary.contains(wrong) {
            misses.push(format!("{name}: missing {word}…{line:?}\n  {summary}"));
        }
        for want in *extra {
            if !summary.contains(want) {
                misses.push(format!("{name}: missing {want:?}\n  {summary}"));
            }
        }
        assert!(summary.chars().count() <= 300, "{name}: {summary}");
    }
    assert!(misses.is_empty(), "{}", misses.join("\n"));
}

#[test]
fn the_corpus_covers_every_fixture_and_three_per_tool() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/digest");
    let mut listed: Vec<&str> = CORPUS.iter().map(|(name, ..)| *name).collect();
    listed.sort_unstable();
    let mut on_disk = Vec::new();
    for tool in tools() {
        let mut count = 0;
        for entry in std::fs::read_dir(root.join(tool)).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            on_disk.push(format!("{tool}/{name}"));
            count += 1;
        }
        assert!(count >= 3, "{tool}: {count} fixtures");
        let kinds: Vec<Expect> = CORPUS
            .iter()
            .filter(|(name, ..)| name.starts_with(&format!("{tool}/")))
            .map(|(_, expect, ..)| *expect)
            .collect();
        assert!(kinds.contains(&Expect::Pass), "{tool}: no passing run");
        assert!(kinds.contains(&Expect::Fail), "{tool}: no failing run");
    }
    on_disk.sort_unstable();
    assert_eq!(listed, on_disk);
}

/// The tool folders, in the order the corpus lists them.
fn tools() -> Vec<&'static str> {
    let mut tools: Vec<&'static str> = Vec::new();
    for (name, ..) in CORPUS {
        let tool = name.split('/').next().unwrap();
        if !tools.contains(&tool) {
            tools.push(tool);
        }
    }
    tools
}

/// One snapshot per tool: every fixture's digest, so a change to a recogniser shows up here.
#[test]
fn golden_verdict_digests() {
    for tool in tools() {
        let rendered: String = CORPUS
            .iter()
            .filter(|(name, ..)| name.starts_with(&format!("{tool}/")))
            .map(|(name, ..)| format!("{name}\n  {}\n", summary_of(name)))
            .collect();
        insta::assert_snapshot!(format!("verdict_{tool}"), rendered);
    }
}

#[test]
fn exunit_passing_run_with_logged_errors_reads_as_a_pass() {
    let summary = summary_of("exunit/pass_logged_errors.txt");
    assert!(summary.starts_with("mix test, "), "{summary}");
    assert!(
        summary.contains("passed: 2 doctests, 38 tests, 0 failures"),
        "{summary}"
    );
    for misleading in ["ERROR", "FAILED", "error types", "RuntimeError"] {
        assert!(!summary.contains(misleading), "{misleading}: {summary}");
    }
}

#[test]
fn exunit_failure_keeps_count_and_exception() {
    let summary = summary_of("exunit/fail_runtime_error.txt");
    assert!(summary.contains("exit 2"), "{summary}");
    assert!(
        summary.contains("FAILED: 1 doctest, 31 tests, 12 failures"),
        "{summary}"
    );
    assert!(
        summary.contains("** (RuntimeError) no :secret_key_base"),
        "{summary}"
    );
    assert!(
        summary.contains("failed: test checkout charges the card (ShopWeb.CheckoutLiveTest)"),
        "{summary}"
    );
}

#[test]
fn precommit_hook_failure_keeps_error_count() {
    let summary = summary_of("precommit/fail_ruff_hook.txt");
    assert!(
        summary.contains("FAILED: 1 of 7 hooks failed: ruff"),
        "{summary}"
    );
    assert!(summary.contains("ruff: Found 3 errors."), "{summary}");
    let summary = summary_of("precommit/fail_dialyzer_hook.txt");
    assert!(summary.contains("dialyzer: Total errors: 2"), "{summary}");
    assert!(!summary.contains("\\n"), "{summary}");
}

#[test]
fn passing_runs_never_read_as_failures() {
    for (name, expect, ..) in CORPUS {
        if *expect == Expect::Pass {
            let summary = summary_of(name);
            for misleading in ["FAILED", "ERROR", "error lines", "failed:"] {
                assert!(!summary.contains(misleading), "{name}: {summary}");
            }
        }
    }
}

#[test]
fn linters_keep_their_error_counts() {
    for (name, want) in [
        ("eslint/fail_errors.txt", "(2 errors, 1 warning)"),
        ("mypy/fail_errors.txt", "Found 3 errors in 3 files"),
        ("ruff/fail_concise.txt", "Found 3 errors."),
        ("tsc/fail_pretty.txt", "Found 2 errors in 2 files."),
        (
            "credo/fail_issues.txt",
            "found 1 refactoring opportunity, 2 code readability issues",
        ),
    ] {
        let summary = summary_of(name);
        assert!(summary.contains(want), "{name}: {summary}");
    }
}

#[test]
fn verdicts_fit_small_budgets() {
    let small = DigestSettings::new(120).unwrap();
    for (name, expect, ..) in CORPUS {
        let summary = digest(&fixture(name), &small).summary;
        assert!(summary.chars().count() <= 120, "{name}: {summary}");
        let word = match expect {
            Expect::Pass => "passed",
            Expect::Fail => "FAILED",
        };
        assert!(summary.contains(word), "{name}: {summary}");
    }
}
