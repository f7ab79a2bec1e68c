//! [`Content`]: the blocks of a message, shared between copies and copied on the first write.
//!
//! Why shared: the engine holds each session's context and hands the pipeline a copy for every
//! model request (the stages take the messages by value and rewrite some of them). Most messages
//! of a long session come out of the pipeline as they went in, so a copy of their text, tool
//! calls and results on every request is work for nothing. A clone of a `Content` is one reference
//! count; a write ([`DerefMut`]) copies the blocks only while another clone still shares them, so
//! a stage that rewrites one tool result copies that one message's blocks, not the session's.
//!
//! The rule for code that walks messages: read through `&Content` (or `.iter()`), and take
//! `&mut` only for a message it is about to change — a `iter_mut()` over every message copies
//! every shared one.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use super::Block;

/// What a message says, in order. Reads and writes as the `Vec<Block>` it holds ([`Deref`]).
#[derive(Clone, Default, PartialEq)]
pub struct Content(Arc<Vec<Block>>);

impl Content {
    /// No blocks.
    pub fn new() -> Content {
        Content::default()
    }

    /// The blocks as a vector of their own (copied only if another clone shares them).
    pub fn into_vec(self) -> Vec<Block> {
        Arc::unwrap_or_clone(self.0)
    }

    /// True when `a` and `b` are clones of one another that neither has written to since.
    pub fn ptr_eq(a: &Content, b: &Content) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }
}

impl Deref for Content {
    type Target = Vec<Block>;

    fn deref(&self) -> &Vec<Block> {
        &self.0
    }
}

impl DerefMut for Content {
    fn deref_mut(&mut self) -> &mut Vec<Block> {
        Arc::make_mut(&mut self.0)
    }
}

/// As the blocks themselves: a `Content` prints as the list it holds.
impl std::fmt::Debug for Content {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.as_ref().fmt(f)
    }
}

impl PartialEq<Vec<Block>> for Content {
    fn eq(&self, other: &Vec<Block>) -> bool {
        self.0.as_ref() == other
    }
}

impl From<Vec<Block>> for Content {
    fn from(blocks: Vec<Block>) -> Content {
        Content(Arc::new(blocks))
    }
}

impl From<Content> for Vec<Block> {
    fn from(content: Content) -> Vec<Block> {
        content.into_vec()
    }
}

impl FromIterator<Block> for Content {
    fn from_iter<I: IntoIterator<Item = Block>>(blocks: I) -> Content {
        Content::from(blocks.into_iter().collect::<Vec<Block>>())
    }
}

impl Extend<Block> for Content {
    fn extend<I: IntoIterator<Item = Block>>(&mut self, blocks: I) {
        self.deref_mut().extend(blocks);
    }
}

impl IntoIterator for Content {
    type Item = Block;
    type IntoIter = std::vec::IntoIter<Block>;

    fn into_iter(self) -> Self::IntoIter {
        self.into_vec().into_iter()
    }
}

impl<'a> IntoIterator for &'a Content {
    type Item = &'a Block;
    type IntoIter = std::slice::Iter<'a, Block>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl<'a> IntoIterator for &'a mut Content {
    type Item = &'a mut Block;
    type IntoIter = std::slice::IterMut<'a, Block>;

    fn into_iter(self) -> Self::IntoIter {
        self.deref_mut().iter_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clone_shares_the_blocks_until_one_side_writes() {
        let original = Content::from(vec![Block::text("a long tool output")]);
        let mut copy = original.clone();
        assert!(Content::ptr_eq(&original, &copy), "a clone is not a copy");
        copy.push(Block::text("a note"));
        assert!(!Content::ptr_eq(&original, &copy));
        assert_eq!(original.len(), 1, "the original did not change");
        assert_eq!(copy.len(), 2);
    }

    #[test]
    fn reading_never_copies() {
        let original = Content::from(vec![Block::text("x")]);
        let copy = original.clone();
        let texts: usize = (&copy).into_iter().filter_map(Block::as_text).count();
        assert_eq!(texts, 1);
        assert!(Content::ptr_eq(&original, &copy));
        assert_eq!(copy, vec![Block::text("x")]);
        assert_eq!(format!("{copy:?}"), format!("{:?}", vec![Block::text("x")]));
    }
}
