//! JavaScript and TypeScript: Jest, Vitest, Mocha, ESLint, tsc.
//!
//! Jest ends with `Test Suites:` and `Tests:` tallies and marks each failure `● suite › test`;
//! Vitest with `Test Files` and `Tests` tallies split by `|`; Mocha with `N passing` and
//! `N failing`. ESLint counts `✖ N problems (E errors, W warnings)`; tsc `Found N errors in …`
//! (its bare `Found N errors.` is shared with ruff, so it needs a tsc error row as evidence).

use super::Role::{Anchor, Evidence, Exception, Failure, Support};
use super::Tool::{Eslint, Jest, Mocha, Tsc, Vitest};
use super::{Rule, rule};

/// `TypeError: x is not a function`, `AssertionError [ERR_ASSERTION]: …`.
const JS_ERROR: &str = r"^[ \t]*(?P<show>(?:[A-Z]\w*)?(?:Error|Exception)(?: \[\w+\])?: .+)$";

pub(super) const RULES: &[Rule] = &[
    rule(
        Jest,
        Anchor,
        r"Tests:[ \t]+(?:(?P<fail>\d+) failed, )?(?:\d+ \w+, )*\d+ total",
    ),
    rule(
        Jest,
        Anchor,
        r"Test Suites:[ \t]+(?:(?P<fail>\d+) failed, )?(?:\d+ \w+, )*\d+ total",
    ),
    rule(Jest, Failure, r"^[ \t]*● (?P<name>.+ › .+)$"),
    rule(Jest, Failure, r"^[ \t]*● (?P<name>.+)$"),
    rule(
        Jest,
        Exception,
        r"^[ \t]*(?P<show>expect\(.+\)\.\S+\(.*)\n\n[ \t]*(?P<msg>.+)$",
    ),
    rule(Jest, Exception, JS_ERROR),
    rule(
        Vitest,
        Anchor,
        r"Tests[ \t]+(?:(?P<fail>\d+) failed(?: \| )?)?(?:\d+ (?:passed|skipped|todo)(?: \| )?)*[ \t]*\(\d+\)",
    ),
    rule(
        Vitest,
        Anchor,
        r"Test Files[ \t]+(?:(?P<fail>\d+) failed(?: \| )?)?(?:\d+ (?:passed|skipped|todo)(?: \| )?)*[ \t]*\(\d+\)",
    ),
    rule(Vitest, Failure, r"^[ \t]*FAIL[ \t]+(?P<name>\S+ > .+)$"),
    rule(Vitest, Failure, r"^[ \t]*[×✗] (?P<name>.+?)(?: \d+ms)?$"),
    rule(Vitest, Exception, JS_ERROR),
    rule(Mocha, Anchor, r"\d+ passing \(\d+m?s\)"),
    rule(Mocha, Support, r"(?P<fail>\d+) failing"),
    rule(Mocha, Support, r"\d+ pending"),
    rule(Mocha, Failure, r"^[ \t]+\d+\) (?P<name>.+?):?$"),
    rule(Mocha, Exception, JS_ERROR),
    rule(
        Eslint,
        Anchor,
        r"✖ \d+ problems? \((?P<fail>\d+) errors?, \d+ warnings?\)",
    ),
    rule(
        Eslint,
        Failure,
        r"^(?P<name>\S+\.(?:[cm]?[jt]sx?|vue|svelte))\n(?:[ \t]+\d+:\d+[ \t]+warning.*\n)*[ \t]+\d+:\d+[ \t]+error",
    ),
    rule(
        Eslint,
        Exception,
        r"^[ \t]+(?P<show>\d+:\d+[ \t]+error[ \t]+.+)$",
    ),
    rule(
        Tsc,
        Anchor,
        r"Found (?P<fail>\d+) errors? in (?:\d+ files?|\S+:\d+)\.?",
    ),
    rule(
        Tsc,
        Anchor,
        r"(?:\[[^\n\]]+\] )?Found (?P<fail>\d+) errors?\. Watching for file changes\.",
    ),
    rule(Tsc, Support, r"Found (?P<fail>\d+) errors?\."),
    rule(Tsc, Evidence, r"\S+\(\d+,\d+\): error TS\d+: .*"),
    rule(Tsc, Evidence, r"\S+:\d+:\d+ - error TS\d+: .*"),
    rule(
        Tsc,
        Failure,
        r"^(?P<name>\S+(?:\(\d+,\d+\)|:\d+:\d+))(?::| -) error TS\d+",
    ),
    rule(
        Tsc,
        Exception,
        r"^\S+(?:\(\d+,\d+\)|:\d+:\d+)(?::| -) (?P<show>error TS\d+: .+)$",
    ),
];
