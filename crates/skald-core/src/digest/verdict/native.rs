//! Go and C/C++: `go test` and CTest.
//!
//! `go test` closes each package with `ok  <pkg> <time>` or `FAIL <pkg> <time>` (or
//! `[build failed]`), names failures `--- FAIL: TestX`, and reports the failing check as
//! `file_test.go:12: message` under it. CTest totals `N% tests passed, F tests failed out of T`
//! and lists `The following tests FAILED:`.

use super::Role::{Anchor, Exception, Failure};
use super::Tool::{Ctest, GoTest};
use super::{Rule, rule};

pub(super) const RULES: &[Rule] = &[
    rule(
        GoTest,
        Anchor,
        r"(?P<fail>FAIL)[ \t]+\S+[ \t]+(?:[0-9.]+s|\[(?:build|setup) failed\])",
    ),
    rule(
        GoTest,
        Anchor,
        r"ok[ \t]+\S+[ \t]+(?:[0-9.]+s|\(cached\))(?:[ \t]+coverage: .*)?",
    ),
    rule(GoTest, Failure, r"^[ \t]*--- FAIL: (?P<name>\S+)"),
    rule(GoTest, Exception, r"^(?P<show>panic: .+)$"),
    rule(GoTest, Exception, r"^[ \t]+(?P<show>\S+_test\.go:\d+: .+)$"),
    rule(GoTest, Exception, r"^(?P<show>\S+\.go:\d+:\d+: .+)$"),
    rule(
        Ctest,
        Anchor,
        r"\d+% tests passed, (?P<fail>\d+) tests? failed out of \d+",
    ),
    rule(
        Ctest,
        Failure,
        r"^[ \t]*\d+ - (?P<name>\S+) \((?:Failed|Timeout|SEGFAULT|Not Run|Subprocess aborted|Exception|Child aborted)\)",
    ),
    rule(
        Ctest,
        Failure,
        r"^[ \t]*\d+/\d+ Test[ \t]+#\d+: (?P<name>\S+) \.+\*\*\*",
    ),
    rule(
        Ctest,
        Exception,
        r"^(?P<show>\S+:\d+: Failure)\n(?P<msg>.+)$",
    ),
    rule(Ctest, Exception, r"^(?P<show>.*Assertion .+ failed\.?)$"),
];
