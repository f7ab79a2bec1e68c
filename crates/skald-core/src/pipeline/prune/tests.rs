//! The pruning stage's tests: soft trim, hard clear, the cache-TTL gate, tool globs.

use super::*;

fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    glob_match(&p, &t)
}

#[test]
fn globs_match_stars_and_question_marks() {
    assert!(glob("*", ""));
    assert!(glob("*", "bash"));
    assert!(glob("read*", "read_file"));
    assert!(glob("*_file", "read_file"));
    assert!(glob("r?ad", "read"));
    assert!(glob("*a*b*", "xxaxxbxx"));
    assert!(!glob("read", "read_file"));
    assert!(!glob("r?d", "read"));
    assert!(!glob("", "x"));
}

#[test]
fn head_and_tail_cross_block_boundaries() {
    let parts = ["AAAAA", "B"];
    assert_eq!(take_head(&parts, 7), "AAAAA\nB");
    assert_eq!(take_head(&parts, 6), "AAAAA\n");
    assert_eq!(take_head(&parts, 3), "AAA");
    assert_eq!(take_tail(&parts, 3), "A\nB");
    assert_eq!(take_tail(&parts, 2), "\nB");
    assert_eq!(take_tail(&parts, 1), "B");
    assert_eq!(take_tail(&parts, 0), "");
}
