//! Rust: `cargo test` (libtest), cargo-nextest, and `cargo build` / `cargo clippy`.
//!
//! libtest prints one `test result: ok. …` line per test binary; a failing binary stops the
//! run with `error: test failed, to rerun pass …` (or, under `--no-fail-fast`, `error: N targets
//! failed:`). Panics are `thread '…' panicked at file:line:col:` with the message on the next
//! line (before Rust 1.73, `panicked at 'message', file:line:col`). A build ends with
//! `error: could not compile …` or `Finished …`; its first `error[E…]:` is the one to fix.

use super::Role::{Anchor, Exception, Failure, Support};
use super::Tool::{Cargo, CargoTest, Nextest};
use super::{Rule, rule};

pub(super) const RULES: &[Rule] = &[
    rule(
        CargoTest,
        Anchor,
        r"test result: (?:ok|(?P<fail>FAILED))\. \d+ passed; \d+ failed;.*",
    ),
    rule(
        CargoTest,
        Support,
        r"(?P<fail>error): test failed, to rerun pass .*",
    ),
    rule(CargoTest, Support, r"error: (?P<fail>\d+) targets? failed:"),
    rule(CargoTest, Failure, r"^test (?P<name>\S+) \.\.\. FAILED$"),
    rule(CargoTest, Failure, r"^---- (?P<name>\S+) stdout ----$"),
    rule(
        CargoTest,
        Exception,
        r"^thread '[^\n']*' panicked at (?P<show>\S+:\d+:\d+):\n(?P<msg>.+)$",
    ),
    rule(
        CargoTest,
        Exception,
        r"^thread '[^\n']*' (?P<show>panicked at .+)$",
    ),
    rule(
        CargoTest,
        Exception,
        r"^(?P<show>error(?:\[E\d{4}\])?: .+)$",
    ),
    rule(
        Nextest,
        Anchor,
        r"Summary \[[^\n\]]*\] \d+ tests? run: \d+ passed[^\n,]*(?:, (?:(?P<fail>\d+) failed|(?P<fail2>\d+) timed out|[^\n,]+))*",
    ),
    rule(Nextest, Support, r"(?P<fail>error): test run failed"),
    rule(
        Nextest,
        Failure,
        r"^[ \t]*(?:FAIL|TIMEOUT|SIGSEGV|SIGABRT) \[[^\n\]]*\] (?P<name>.+)$",
    ),
    rule(
        Nextest,
        Exception,
        r"^thread '[^\n']*' panicked at (?P<show>\S+:\d+:\d+):\n(?P<msg>.+)$",
    ),
    rule(
        Nextest,
        Exception,
        r"^thread '[^\n']*' (?P<show>panicked at .+)$",
    ),
    rule(
        Cargo,
        Anchor,
        r"(?P<fail>error): could not compile `[^\n`]+`.*",
    ),
    rule(Cargo, Anchor, r"(?P<fail>error): aborting due to .*"),
    rule(
        Cargo,
        Anchor,
        r"warning: `[^\n`]+` \(.+\) generated \d+ warnings?.*",
    ),
    rule(
        Cargo,
        Anchor,
        r"Finished `?\w+`? profile \[.+\] target\(s\) in .+",
    ),
    rule(
        Cargo,
        Failure,
        r"^error(?:\[E\d{4}\])?: .+\n[ \t]*--> (?P<name>\S+:\d+:\d+)$",
    ),
    rule(Cargo, Exception, r"^(?P<show>error(?:\[E\d{4}\])?: .+)$"),
];
