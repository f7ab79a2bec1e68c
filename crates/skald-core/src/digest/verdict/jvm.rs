//! JVM and .NET: Maven (Surefire), Gradle, `dotnet test`.
//!
//! Surefire totals a run as `Tests run: N, Failures: F, Errors: E, Skipped: S` (per class with
//! `Time elapsed` after it, which is not the total) and Maven closes with `BUILD SUCCESS` or
//! `BUILD FAILURE`; Gradle with `N tests completed, F failed` and `BUILD SUCCESSFUL|FAILED in …`;
//! `dotnet test` with `Passed!|Failed!  - Failed: F, Passed: P, …` per test assembly.

use super::Role::{Anchor, Exception, Failure, Support};
use super::Tool::{Dotnet, Gradle, Maven};
use super::{Rule, rule};

/// `org.opentest4j.AssertionFailedError: expected: <4> but was: <3>`.
const JVM_EXCEPTION: &str =
    r"^[ \t]*(?P<show>(?:[a-z]\w*\.)+[A-Z]\w*(?:Error|Exception|Failure)\w*(?:: .+)?)$";

pub(super) const RULES: &[Rule] = &[
    rule(
        Maven,
        Anchor,
        r"(?:\[\w+\] )?Tests run: \d+, Failures: (?P<fail>\d+), Errors: (?P<fail2>\d+), Skipped: \d+",
    ),
    rule(Maven, Anchor, r"\[INFO\] BUILD SUCCESS"),
    rule(Maven, Anchor, r"\[(?:INFO|ERROR)\] BUILD (?P<fail>FAILURE)"),
    rule(
        Maven,
        Failure,
        r"^\[ERROR\] (?P<name>[\w.$]+(?:\.\w+|\(\S+\)))[ \t]+(?:-- )?Time elapsed: .*<<< (?:FAILURE|ERROR)!",
    ),
    rule(
        Maven,
        Failure,
        r"^\[ERROR\][ \t]+(?P<name>[\w.$]+\.\w+:\d+)",
    ),
    rule(Maven, Exception, JVM_EXCEPTION),
    rule(
        Maven,
        Exception,
        r"^\[ERROR\] (?P<show>\S+\.(?:java|kt):\[\d+,\d+\] .+)$",
    ),
    rule(
        Maven,
        Exception,
        r"^\[ERROR\] (?P<show>Failed to execute goal .+)$",
    ),
    rule(Gradle, Anchor, r"BUILD SUCCESSFUL in .+"),
    rule(Gradle, Anchor, r"BUILD (?P<fail>FAILED) in .+"),
    rule(
        Gradle,
        Support,
        r"\d+ tests? completed, (?P<fail>\d+) failed(?:, \d+ skipped)?",
    ),
    rule(Gradle, Failure, r"^(?P<name>\S+ > .+) FAILED$"),
    rule(Gradle, Exception, JVM_EXCEPTION),
    rule(
        Gradle,
        Exception,
        r"^[ \t]+(?P<show>(?:[a-z]\w*\.)+[A-Z]\w*(?:Error|Exception|Failure)\w* at \S+)$",
    ),
    rule(
        Gradle,
        Exception,
        r"^(?P<show>\S+\.(?:java|kt):\d+: error: .+)$",
    ),
    rule(Gradle, Exception, r"^(?P<show>e: .+)$"),
    rule(Gradle, Exception, r"^\* What went wrong:\n(?P<show>.+)$"),
    rule(
        Dotnet,
        Anchor,
        r"(?:Passed|(?P<fail>Failed))![ \t]+-[ \t]+Failed:[ \t]+(?P<fail2>\d+),.*",
    ),
    rule(Dotnet, Anchor, r"Build (?P<fail>FAILED)\."),
    rule(Dotnet, Support, r"Total tests: \d+"),
    rule(
        Dotnet,
        Failure,
        r"^[ \t]+Failed (?P<name>[\w.]+(?:\(.*\))?) \[[^\n\]]+\]$",
    ),
    rule(
        Dotnet,
        Exception,
        r"^[ \t]+Error Message:\n[ \t]+(?P<show>.+)$",
    ),
    rule(
        Dotnet,
        Exception,
        r"^(?P<show>\S+\(\d+,\d+\): error [A-Z]+\d+: .+)$",
    ),
];
