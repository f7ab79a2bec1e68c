//! What is injected once at session start: the `## User Profile` section of the system prompt
//! ([`render_profile_section`]), the instruction naming the memory commands for an agent that
//! has only a shell ([`CLI_MEMORY_SECTION`]) and a simulated `memory_ls` of `viking://`
//! ([`directory_messages`]), whose listing loses its deepest levels first when it is too long.

use serde_json::{Value, json};

use super::{LS_TOOL_NAME, render_result_json, simulated_call};
use crate::memory::levels::cut_at_word;
use crate::message::Message;
use crate::tokens::estimate_string_chars;

/// One memory of the user's profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileEntry {
    /// The memory's `viking://` URI.
    pub uri: String,
    /// The full content for `profile.md`, the abstract for the others.
    pub text: String,
}

/// The name of the user's main profile file, shown first and whole (cut only if alone it
/// exceeds the budget).
pub const PROFILE_FILE: &str = "profile.md";

/// The `## User Profile` section of the system prompt: `profile.md` first, then the other
/// profile entries (by URI) as bullets, each whole, while they fit in `max_chars`. `None` when
/// there is nothing to say.
pub fn render_profile_section(entries: &[ProfileEntry], max_chars: usize) -> Option<String> {
    let header = "## User Profile\n";
    let mut out = String::from(header);
    let is_main = |entry: &&ProfileEntry| entry.uri.ends_with(&format!("/{PROFILE_FILE}"));
    let main: Vec<&ProfileEntry> = entries.iter().filter(is_main).collect();
    let mut others: Vec<&ProfileEntry> = entries.iter().filter(|e| !is_main(e)).collect();
    others.sort_by(|a, b| a.uri.cmp(&b.uri));
    for entry in main {
        let room = max_chars.saturating_sub(out.chars().count() + 1);
        let text = cut_at_word(entry.text.trim(), room);
        if !text.is_empty() {
            out.push_str(&text);
            out.push('\n');
        }
    }
    for entry in others {
        let line = format!("- {}\n", entry.text.trim());
        if entry.text.trim().is_empty() {
            continue;
        }
        if out.chars().count() + line.chars().count() > max_chars {
            break;
        }
        out.push_str(&line);
    }
    (out.len() > header.len()).then(|| out.trim_end().to_owned())
}

/// The system prompt section `[memory] teach_cli` adds (seed 002's first recommendation): an
/// agent whose host offers it no memory tools, but that runs shell commands, is told that
/// `skald search`, `ls`, `read` and `remember` reach its long-term memory.
pub const CLI_MEMORY_SECTION: &str = "## Long-term memory from the shell\n\
Your long-term memory (what this user told earlier sessions, and what past work taught) is \
reachable with the `skald` command:\n\
- `skald search --query \"<what you need to know>\"` finds memories about a topic;\n\
- `skald ls viking://` lists what memory holds, and `skald read <viking:// URI>` prints one \
memory whole;\n\
- `skald remember --content \"<fact>\"` keeps a fact, preference or decision for later \
sessions.\n\
Search before asking the user something they may have said before; remember what they would \
not want to say twice.";

/// One line of a listing: a directory with its entry count, or an entry with its abstract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListingEntry {
    /// A directory.
    Directory {
        /// The directory's `viking://` URI.
        uri: String,
        /// How many entries it holds.
        entries: u64,
    },
    /// A memory.
    Entry {
        /// The memory's `viking://` URI.
        uri: String,
        /// Its abstract (L0).
        abstract_text: String,
    },
}

impl ListingEntry {
    fn to_json(&self) -> Value {
        match self {
            ListingEntry::Directory { uri, entries } => {
                json!({"uri": format!("{uri}/"), "entries": entries})
            }
            ListingEntry::Entry { uri, abstract_text } => {
                json!({"uri": uri, "abstract": abstract_text})
            }
        }
    }
}

/// The `memory_ls` result: the listing in order, one line per entry. When it does not fit in
/// `max_chars`, the deepest levels go first, so the answer stays an overview of everything
/// (every top directory with its count) rather than the first subtree in full; `omitted` says
/// how many lines were left out.
pub fn listing_result_text(path: &str, entries: &[ListingEntry], max_chars: usize) -> String {
    let items: Vec<(usize, Value, usize)> = listing_levels(entries)
        .into_iter()
        .zip(entries)
        .map(|(level, entry)| {
            let item = entry.to_json();
            let chars = estimate_string_chars(&item.to_string()) + 2;
            (level, item, chars)
        })
        .collect();
    let deepest = items.iter().map(|(level, _, _)| *level).max().unwrap_or(0);
    let cost = |limit: usize| -> usize {
        items
            .iter()
            .filter(|(level, _, _)| *level <= limit)
            .map(|(_, _, chars)| chars)
            .sum()
    };
    let limit = (0..=deepest).rev().find(|limit| cost(*limit) <= max_chars);
    let mut shown = Vec::new();
    let mut used = 0usize;
    for (level, item, chars) in &items {
        let wanted = match limit {
            Some(limit) => *level <= limit,
            None => *level == 0 && used + chars <= max_chars,
        };
        if wanted {
            used += chars;
            shown.push(item.clone());
        }
    }
    let omitted = items.len() - shown.len();
    let mut fields = vec![
        ("success", json!(true)),
        ("path", json!(path)),
        ("entries", Value::Array(shown)),
    ];
    if omitted > 0 {
        fields.push(("omitted", json!(omitted)));
        fields.push((
            "more",
            json!("call memory_ls on a directory to see what is below it"),
        ));
    }
    render_result_json(&fields)
}

/// How deep each line of a listing (parents before children) is below the lines above it: 0
/// for a line with no listed ancestor.
fn listing_levels(entries: &[ListingEntry]) -> Vec<usize> {
    let mut open: Vec<String> = Vec::new();
    let mut levels = Vec::with_capacity(entries.len());
    for entry in entries {
        let uri = match entry {
            ListingEntry::Directory { uri, .. } | ListingEntry::Entry { uri, .. } => uri,
        };
        while open
            .last()
            .is_some_and(|dir| !uri.starts_with(&format!("{}/", dir.trim_end_matches('/'))))
        {
            open.pop();
        }
        levels.push(open.len());
        if let ListingEntry::Directory { uri, .. } = entry {
            open.push(uri.clone());
        }
    }
    levels
}

/// The simulated `memory_ls {"path": "viking://"}` of session start.
pub fn directory_messages(entries: &[ListingEntry], max_chars: usize) -> Vec<Message> {
    let path = "viking://";
    simulated_call(
        LS_TOOL_NAME,
        json!({"path": path}),
        listing_result_text(path, entries, max_chars),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_listing_too_long_loses_its_deepest_levels_first() {
        let dir = |uri: &str, entries| ListingEntry::Directory {
            uri: uri.into(),
            entries,
        };
        let entry = |uri: &str| ListingEntry::Entry {
            uri: uri.into(),
            abstract_text: "x".repeat(80),
        };
        let listing = vec![
            dir("viking://user/a", 2),
            dir("viking://user/a/memories", 2),
            entry("viking://user/a/memories/x.md"),
            entry("viking://user/a/memories/y.md"),
            dir("viking://resources", 1),
            entry("viking://resources/r.md"),
        ];
        assert_eq!(listing_levels(&listing), [0, 1, 2, 2, 0, 1]);
        let full = listing_result_text("viking://", &listing, 10_000);
        assert!(!full.contains("omitted"));
        let short = listing_result_text("viking://", &listing, 300);
        assert!(short.contains("\"viking://user/a/memories/\""), "{short}");
        assert!(short.contains("\"viking://resources/\""), "{short}");
        assert!(!short.contains("x.md"), "{short}");
        assert!(short.contains("\"omitted\":2"), "{short}");
        let tiny = listing_result_text("viking://", &listing, 60);
        assert!(tiny.contains("\"omitted\":5"), "{tiny}");
        assert!(tiny.contains("viking://user/a/"), "{tiny}");
    }

    #[test]
    fn profile_section_puts_profile_md_first_and_keeps_entries_whole() {
        let entries = vec![
            ProfileEntry {
                uri: "viking://user/a/memories/profile/work.md".into(),
                text: "Works at Acme as an SRE.".into(),
            },
            ProfileEntry {
                uri: "viking://user/a/memories/profile/profile.md".into(),
                text: "Alice, based in Lyon.".into(),
            },
            ProfileEntry {
                uri: "viking://user/a/memories/profile/zz.md".into(),
                text: "x".repeat(500),
            },
        ];
        let section = render_profile_section(&entries, 200).unwrap();
        assert_eq!(
            section,
            "## User Profile\nAlice, based in Lyon.\n- Works at Acme as an SRE."
        );
        assert_eq!(render_profile_section(&[], 200), None);
    }
}
