//! Ruby and PHP: RSpec, Minitest (and `rails test`), PHPUnit.
//!
//! RSpec tallies `N examples, F failures`, lists `rspec ./spec/x_spec.rb:5 # description` and
//! states `Failure/Error:` then the exception class and message; Minitest tallies
//! `N runs, A assertions, F failures, E errors, S skips` after numbered `Failure:`/`Error:`
//! blocks; PHPUnit ends with `OK (N tests, A assertions)` or `FAILURES!` / `ERRORS!` and
//! `Tests: N, Assertions: A, Failures: F.`.

use super::Role::{Anchor, Exception, Failure, Support};
use super::Tool::{Minitest, Phpunit, Rspec};
use super::{Rule, rule};

pub(super) const RULES: &[Rule] = &[
    rule(
        Rspec,
        Anchor,
        r"\d+ examples?, (?P<fail>\d+) failures?(?:, \d+ pending)?(?:, (?P<fail2>\d+) errors? occurred outside of examples)?",
    ),
    rule(Rspec, Failure, r"^rspec (?P<name>\./\S+:\d+ # .+)$"),
    rule(Rspec, Failure, r"^[ \t]+1\) (?P<name>.+)$"),
    rule(
        Rspec,
        Exception,
        r"^[ \t]+(?P<show>(?:[A-Z]\w*::)*[A-Z]\w*(?:Error|Exception|Invalid|NotFound)):\n[ \t]+(?P<msg>.+)$",
    ),
    rule(Rspec, Exception, r"^[ \t]+(?P<show>Failure/Error: .+)$"),
    rule(
        Minitest,
        Anchor,
        r"\d+ runs, \d+ assertions, (?P<fail>\d+) failures, (?P<fail2>\d+) errors, \d+ skips",
    ),
    rule(
        Minitest,
        Failure,
        r"^[ \t]*(?:\d+\) )?(?:Failure|Error):\n(?P<name>[\w:]+#\w+)",
    ),
    rule(
        Minitest,
        Exception,
        r"^[ \t]*(?:\d+\) )?(?:Failure|Error):\n[^\n]*\n(?P<show>.+)$",
    ),
    rule(Phpunit, Anchor, r"OK \(\d+ tests?, \d+ assertions?\)"),
    rule(
        Phpunit,
        Anchor,
        r"Tests: \d+, Assertions: \d+(?:, (?:Errors: (?P<fail>\d+)|Failures: (?P<fail2>\d+)|[\w ]+: \d+))*\.",
    ),
    rule(Phpunit, Support, r"(?P<fail>FAILURES|ERRORS)!"),
    rule(Phpunit, Support, r"OK, but .+"),
    rule(Phpunit, Failure, r"^1\) (?P<name>[\w\\]+::\w+)"),
    rule(
        Phpunit,
        Exception,
        r"^1\) [\w\\]+::\w+(?: with data set .*)?\n(?P<show>.+)$",
    ),
];
