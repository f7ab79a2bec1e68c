//! Python: pytest, unittest (and Django's runner), mypy, ruff, and pre-commit, which wraps them.
//!
//! pytest's tally is a `===`-framed line (`2 failed, 10 passed in 0.31s`, bare under `-q`);
//! unittest's is `Ran N tests in …s` followed by `OK` or `FAILED (failures=1)`. mypy and ruff
//! count their errors (`Found 3 errors in 2 files`, `Found 2 errors.`); pre-commit prints one
//! line per hook ending in `Passed`, `Skipped` or `Failed`, then the failing hook's own output.

use super::Role::{Anchor, Evidence, Exception, Failure, Support};
use super::Tool::{Mypy, PreCommit, Pytest, Ruff, Unittest};
use super::{Rule, rule};

pub(super) const RULES: &[Rule] = &[
    rule(
        Pytest,
        Anchor,
        r"=*[ \t]*(?:(?:(?P<fail>\d+) failed|(?P<fail2>\d+) errors?|\d+ (?:passed|skipped|deselected|xfailed|xpassed|warnings?|rerun|subtests passed))(?:, )?)+ in [0-9.]+s(?: \([0-9:.]+\))?[ \t]*=*",
    ),
    rule(
        Pytest,
        Failure,
        r"^(?:FAILED|ERROR) (?P<name>\S+::\S+|\S+\.py)",
    ),
    rule(Pytest, Failure, r"^(?P<name>\S+::\S+) (?:FAILED|ERROR)"),
    rule(
        Pytest,
        Failure,
        r"^_{3,} (?P<name>(?:\w+\.)?test\S*) _{3,}$",
    ),
    // The first `E` line states the first failure (an assertion or the exception raised).
    rule(Pytest, Exception, r"^E[ \t]+(?P<show>\S.*)$"),
    rule(Unittest, Anchor, r"Ran \d+ tests? in [0-9.]+s"),
    rule(Unittest, Support, r"OK(?: \(.*\))?"),
    rule(Unittest, Support, r"FAILED \((?P<fail>.+)\)"),
    rule(
        Unittest,
        Failure,
        r"^(?:FAIL|ERROR): (?P<name>\S+ \([^\n)]*\))",
    ),
    rule(
        Unittest,
        Exception,
        r"^(?P<show>(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Failure)(?::.*)?)$",
    ),
    rule(
        Mypy,
        Anchor,
        r"Found (?P<fail>\d+) errors? in \d+ files? \(checked \d+ source files?\)",
    ),
    rule(
        Mypy,
        Anchor,
        r"Success: no issues found in \d+ source files?",
    ),
    rule(Mypy, Failure, r"^(?P<name>\S+\.pyi?:\d+(?::\d+)?): error:"),
    rule(
        Mypy,
        Exception,
        r"^(?P<show>\S+\.pyi?:\d+(?::\d+)?: error: .+)$",
    ),
    rule(Ruff, Anchor, r"All checks passed!"),
    rule(
        Ruff,
        Anchor,
        r"(?P<fail>\d+) files? would be reformatted(?:, \d+ files? (?:already formatted|left unchanged))?",
    ),
    rule(
        Ruff,
        Anchor,
        r"\d+ files? (?:already formatted|left unchanged)",
    ),
    rule(
        Ruff,
        Support,
        r"Found (?P<fail>\d+) errors?\.(?: \(\d+ fixed, \d+ remaining\))?",
    ),
    rule(Ruff, Evidence, r"\S+\.pyi?:\d+:\d+: [A-Z]+\d+ .*"),
    rule(Ruff, Evidence, r"\[\*\] \d+ fix(?:able|es available) .*"),
    rule(Ruff, Failure, r"^(?P<name>\S+\.pyi?:\d+:\d+): [A-Z]+\d+"),
    rule(Ruff, Failure, r"^[ \t]*--> (?P<name>\S+\.pyi?:\d+:\d+)$"),
    rule(
        Ruff,
        Exception,
        r"^\S+\.pyi?:\d+:\d+: (?P<show>[A-Z]+\d+ .+)$",
    ),
    rule(Ruff, Exception, r"^(?P<show>[A-Z]{1,4}\d{3,4} .+)$"),
    rule(
        PreCommit,
        Anchor,
        r"\S.*?\.{4,}(?:\([^\n)]*\))?(?:Passed|Skipped|(?P<fail>Failed))",
    ),
    // Hand-written hooks announce themselves in prose.
    rule(
        PreCommit,
        Anchor,
        r"(?:\w+ - )?(?i:pre-commit)(?: (?:validation|hooks?|checks?))? (?P<fail>failed)\b.*",
    ),
    rule(PreCommit, Failure, r"^- hook id: (?P<name>\S+)"),
    rule(PreCommit, Failure, r"^(?P<name>\S.*?)\.{4,}Failed$"),
    rule(PreCommit, Exception, r"^\[(?P<show>[A-Z][A-Z_ -]+)\]"),
];
