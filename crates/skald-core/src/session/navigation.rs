//! Version-4 navigation: which entry is the leaf, and which parent each entry really hangs under,
//! once a session holds `leaf` records. This is OpenClaw 2026.9's
//! `scanSessionTranscriptNavigation` (`src/config/sessions/transcript-tree.ts`), one entry at a
//! time, so [`Session`](super::Session) keeps it current as entries are pushed.
//!
//! Why it exists: OpenClaw moves the leaf by appending a `leaf` record instead of keeping a
//! pointer, and it normalises parents while it scans — an entry appended after a `reset` that
//! names a parent from before the reset continues the conversation after the reset instead; an
//! entry whose parent is missing continues at the leaf; an entry whose parent is a `leaf` record
//! hangs under that record's target. Once a session has a valid `leaf` record (and only then:
//! OpenClaw's `selectSessionTranscriptLeafControlledPath` returns nothing otherwise), the active
//! path is the walk over these normalised parents from the scanned leaf, `leaf` records left out.
//! Without one, the raw `parentId`s and the last entry are the whole story, as in version 3.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::Entry;

/// The entry types OpenClaw calls canonical (`isCanonicalSessionEntryType`); anything else is an
/// opaque record.
const CANONICAL_TYPES: [&str; 10] = [
    "message",
    "thinking_level_change",
    "model_change",
    "compaction",
    "reset",
    "branch_summary",
    "custom",
    "custom_message",
    "label",
    "session_info",
];

/// One scanned entry: the parent it normalises to and whether it is a `leaf` record (which paths
/// walk through but never include).
#[derive(Debug, Clone, PartialEq)]
struct Node {
    parent: Option<String>,
    leaf_control: bool,
}

/// What a parsed entry says about the tree before normalisation (OpenClaw's tree entry).
struct TreeEntry {
    id: String,
    parent: Option<String>,
    /// `None`: the entry does not move the leaf (a side append, an opaque record);
    /// `Some(None)`: it empties the conversation.
    leaf: Option<Option<String>>,
    append_parent: Option<String>,
    side: bool,
}

/// The scan state after the entries pushed so far.
#[derive(Debug, Clone, PartialEq, Default)]
pub(super) struct Navigation {
    nodes: HashMap<String, Node>,
    leaf: Option<String>,
    append_parent: Option<String>,
    has_leaf_control: bool,
    latest_reset: Option<String>,
    reset_descendants: HashSet<String>,
    invalid_leaf_controls: HashSet<String>,
}

impl Navigation {
    /// True once a valid `leaf` record was scanned: from then on paths follow [`Navigation`].
    pub(super) fn has_leaf_control(&self) -> bool {
        self.has_leaf_control
    }

    /// The scanned leaf.
    pub(super) fn leaf(&self) -> Option<&str> {
        self.leaf.as_deref()
    }

    /// The normalised parent of `id`, and whether `id` is a `leaf` record; `None` when the scan
    /// left the entry out of the tree (no id, a blank parent, a malformed `leaf` record).
    pub(super) fn node(&self, id: &str) -> Option<(Option<&str>, bool)> {
        self.nodes
            .get(id)
            .map(|node| (node.parent.as_deref(), node.leaf_control))
    }

    /// Scans one more entry, as OpenClaw's loop body does.
    pub(super) fn push(&mut self, entry: &Entry) {
        let control = entry.kind.leaf_control();
        let Some(mut tree) = tree_entry(entry, control.as_ref()) else {
            return;
        };
        let is_control = control.is_some();
        // After a reset, a `leaf` record may not move the conversation back before it.
        if let (Some(_), Some(leaf), Some(target), true) =
            (&self.latest_reset, &self.leaf, &tree.leaf, is_control)
        {
            let before_reset = target
                .as_ref()
                .is_none_or(|target| !self.reset_descendants.contains(target));
            if before_reset {
                tree.parent = Some(leaf.clone());
                tree.leaf = Some(Some(leaf.clone()));
                tree.append_parent = Some(leaf.clone());
            }
        }
        if let (true, Some(target)) = (is_control, &tree.leaf) {
            let known = |id: &Option<String>| {
                id.as_ref().is_none_or(|id| {
                    self.nodes.contains_key(id) && !self.invalid_leaf_controls.contains(id)
                })
            };
            if !known(target) || !known(&tree.append_parent) {
                // A `leaf` record naming an entry the scan does not know moves nothing; paths
                // still walk through it to its own parent.
                self.invalid_leaf_controls.insert(tree.id.clone());
                self.nodes.insert(
                    tree.id,
                    Node {
                        parent: entry.parent_id.clone(),
                        leaf_control: true,
                    },
                );
                return;
            }
        }
        if is_canonical(entry) {
            let stale = tree
                .parent
                .as_ref()
                .is_some_and(|parent| !self.nodes.contains_key(parent))
                && self.leaf.is_some();
            let after_reset = self.latest_reset.is_some()
                && !tree.side
                && tree
                    .parent
                    .as_ref()
                    .is_none_or(|parent| !self.reset_descendants.contains(parent));
            let candidate = if after_reset || (!tree.side && stale) {
                self.leaf.clone()
            } else if !tree.side
                && tree.parent == self.append_parent
                && self.leaf != self.append_parent
            {
                // The host appended at its append point while the leaf was elsewhere: the
                // conversation continues at the leaf.
                self.leaf.clone()
            } else {
                tree.parent.clone()
            };
            tree.parent = self.through_leaf_controls(candidate);
        }
        if entry.kind.type_name() == Some("reset") {
            self.latest_reset = Some(tree.id.clone());
            self.reset_descendants.clear();
            self.reset_descendants.insert(tree.id.clone());
        } else if self.latest_reset.is_some()
            && tree
                .parent
                .as_ref()
                .is_some_and(|parent| self.reset_descendants.contains(parent))
        {
            self.reset_descendants.insert(tree.id.clone());
        }
        self.append_parent = tree.append_parent.clone();
        if let Some(leaf) = tree.leaf {
            self.leaf = leaf;
        }
        if is_control {
            self.has_leaf_control = true;
        }
        self.nodes.insert(
            tree.id,
            Node {
                parent: tree.parent,
                leaf_control: is_control,
            },
        );
    }

    /// OpenClaw's `resolveCanonicalParentId`: a parent that is a `leaf` record stands for that
    /// record's own (normalised) parent, its target.
    fn through_leaf_controls(&self, parent: Option<String>) -> Option<String> {
        let mut seen = HashSet::new();
        let mut current = parent;
        while let Some(id) = current {
            if seen.contains(&id) {
                return Some(id);
            }
            match self.nodes.get(&id) {
                Some(node) if node.leaf_control => {
                    current = node.parent.clone();
                    seen.insert(id);
                }
                Some(_) | None => return Some(id),
            }
        }
        None
    }
}

/// OpenClaw's `parseSessionTranscriptTreeEntry`.
fn tree_entry(entry: &Entry, control: Option<&super::entry::LeafControl>) -> Option<TreeEntry> {
    if entry.id.trim().is_empty() {
        return None;
    }
    let parent = match &entry.parent_id {
        None => None,
        Some(parent) if parent.trim().is_empty() => return None,
        Some(parent) => Some(parent.clone()),
    };
    if entry.kind.type_name() == Some("leaf") {
        // A `leaf` record of a shape OpenClaw refuses is no node at all.
        let control = control?;
        return Some(TreeEntry {
            id: entry.id.clone(),
            parent: control.target_id.clone(),
            leaf: Some(control.target_id.clone()),
            append_parent: control.append_parent_id.clone(),
            side: control.side,
        });
    }
    let side = is_side(entry);
    Some(TreeEntry {
        id: entry.id.clone(),
        parent,
        leaf: (is_canonical(entry) && !side).then(|| Some(entry.id.clone())),
        append_parent: Some(entry.id.clone()),
        side,
    })
}

fn is_canonical(entry: &Entry) -> bool {
    entry
        .kind
        .type_name()
        .is_some_and(|name| CANONICAL_TYPES.contains(&name))
}

/// `appendMode: "side"`: an entry appended beside the conversation (it does not move the leaf).
fn is_side(entry: &Entry) -> bool {
    let side = |value: Option<&Value>| value.and_then(Value::as_str) == Some("side");
    side(entry.extra.get("appendMode"))
        || match &entry.kind {
            super::EntryKind::Other(body) => side(body.get("appendMode")),
            super::EntryKind::Message(_)
            | super::EntryKind::Compaction { .. }
            | super::EntryKind::Reset { .. }
            | super::EntryKind::BranchSummary { .. }
            | super::EntryKind::Custom { .. }
            | super::EntryKind::CustomMessage { .. }
            | super::EntryKind::ThinkingLevelChange { .. }
            | super::EntryKind::ModelChange { .. }
            | super::EntryKind::Label { .. }
            | super::EntryKind::SessionInfo { .. } => false,
        }
}
