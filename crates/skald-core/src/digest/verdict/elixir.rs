//! Elixir: ExUnit (`mix test`), Credo and Dialyzer (dialyxir).
//!
//! ExUnit ends with `Finished in …` and a tally (`1 doctest, 43 tests, 0 failures`); each
//! failure is numbered (`  1) test name (Module)`) and states `** (Exception) message` or an
//! assertion (`Assertion with == failed`). Logger lines (`[error] …`) inside a run are the
//! application's, not the run's.

use super::Role::{Anchor, Exception, Failure, Support};
use super::Tool::{Credo, Dialyzer, ExUnit};
use super::{Rule, rule};

pub(super) const RULES: &[Rule] = &[
    rule(
        ExUnit,
        Anchor,
        r"(?:\d+ (?:doctests?|propert(?:y|ies)), )*\d+ tests?, (?P<fail>\d+) failures?(?:, (?:(?P<fail2>\d+) invalid|\d+ excluded|\d+ skipped))*(?: \(.*\))?",
    ),
    // A compile error stops the run before any tally.
    rule(
        ExUnit,
        Anchor,
        r"(?P<fail>==) Compilation error in file \S+ ==",
    ),
    rule(
        ExUnit,
        Failure,
        r"^[ \t]+\d+\) (?P<name>(?:test|doctest|property) .+ \([\w.]+\))[ \t]*$",
    ),
    rule(ExUnit, Exception, r"^[ \t]*(?P<show>\*\* \([\w.]+\) .+)$"),
    rule(
        ExUnit,
        Exception,
        r"^[ \t]+(?P<show>(?:Assertion with \S+ failed|Expected truthy, got \S+|Expected false or nil, got .+|Assertion failed|match \(=\) failed|No message matching .+))[ \t]*$",
    ),
    rule(
        Credo,
        Anchor,
        r"\d+ mods/funs, found (?:no issues\.|(?P<fail>\d+ .+))",
    ),
    rule(
        Credo,
        Failure,
        r"^[┃ \t]+(?P<name>\S+\.exs?:\d+(?::\d+)?) #\(.+\)$",
    ),
    rule(Credo, Exception, r"^[┃ \t]*(?P<show>\[[A-Z]\] [↑↗→↘↓] .+)$"),
    rule(
        Dialyzer,
        Anchor,
        r"Total errors: (?P<fail>\d+), Skipped: \d+(?:, Unnecessary Skips: \d+)?",
    ),
    rule(Dialyzer, Anchor, r"done \(passed successfully\)"),
    rule(
        Dialyzer,
        Support,
        r"done \((?P<fail>warnings were emitted)\)",
    ),
    rule(Dialyzer, Failure, r"^(?P<name>\S+\.exs?:\d+(?::\d+)?):\w+$"),
    rule(
        Dialyzer,
        Exception,
        r"^\S+\.exs?:\d+(?::\d+)?:(?P<show>\w+)\n(?P<msg>.+)$",
    ),
];
