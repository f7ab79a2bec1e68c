//! Which tools' results pruning may touch: the policy's allow and deny globs (`*` any run of
//! characters, `?` any one), matched case-insensitively against the tool's name.

use super::ToolMatch;

/// Allow/deny globs lowercased once per prune.
pub(super) struct CompiledMatch {
    allow: Vec<Vec<char>>,
    deny: Vec<Vec<char>>,
}

impl CompiledMatch {
    pub(super) fn new(tools: &ToolMatch) -> CompiledMatch {
        let compile = |globs: &[String]| -> Vec<Vec<char>> {
            globs
                .iter()
                .map(|glob| glob.trim().to_lowercase().chars().collect())
                .filter(|glob: &Vec<char>| !glob.is_empty())
                .collect()
        };
        CompiledMatch {
            allow: compile(&tools.allow),
            deny: compile(&tools.deny),
        }
    }

    pub(super) fn is_prunable(&self, tool_name: &str) -> bool {
        if self.allow.is_empty() && self.deny.is_empty() {
            return true;
        }
        let name: Vec<char> = tool_name.trim().to_lowercase().chars().collect();
        if self.deny.iter().any(|glob| glob_match(glob, &name)) {
            return false;
        }
        self.allow.is_empty() || self.allow.iter().any(|glob| glob_match(glob, &name))
    }
}

/// `*` matches any run of characters, `?` any one character.
pub(super) fn glob_match(pattern: &[char], text: &[char]) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where the last `*` was, and how much of the text it has swallowed so far.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        let pc = pattern.get(p).copied();
        if pc == Some('*') {
            star = Some((p, t));
            p += 1;
        } else if pc.is_some() && (pc == Some('?') || pc == text.get(t).copied()) {
            p += 1;
            t += 1;
        } else if let Some((star_p, star_t)) = star {
            p = star_p + 1;
            t = star_t + 1;
            star = Some((star_p, star_t + 1));
        } else {
            return false;
        }
    }
    pattern
        .get(p..)
        .unwrap_or_default()
        .iter()
        .all(|c| *c == '*')
}
