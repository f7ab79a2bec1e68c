//! [`Shared`]: a value shared between clones and copied on the first write — what a message's
//! blocks ([`Content`]) and the fields skald does not interpret ([`Extra`]) are.
//!
//! Why shared: the engine holds each session's context and hands the pipeline a copy for every
//! model request (the stages take the messages by value and rewrite some of them). Most messages
//! of a long session come out of the pipeline as they went in, and a host's transcript carries
//! much of its weight in what skald does not interpret (Claude Code's envelope of each entry),
//! so a deep copy per request is work for nothing. A clone of a `Shared` is one reference count;
//! a write ([`DerefMut`]) copies the value only while another clone still shares it, so a stage
//! that rewrites one tool result copies that one message's blocks, not the session's.
//!
//! The rule for code that walks messages: read through `&` (or `.iter()`), and take `&mut` only
//! of a message it is about to change — an `iter_mut()` over every message copies every shared
//! one.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::Block;

/// What a message or a tool result says, in order: its blocks, shared.
pub type Content = Shared<Vec<Block>>;

/// Fields a format carries that skald does not interpret; kept verbatim and written back. Reads,
/// writes and serializes as the JSON object it holds.
pub type Extra = Shared<Map<String, Value>>;

/// A `T` shared between clones and copied on the first write. Reads and writes as the `T` it
/// holds ([`Deref`], [`DerefMut`]); prints and serializes as it.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Shared<T>(Arc<T>);

impl<T: Default> Shared<T> {
    /// An empty value.
    pub fn new() -> Shared<T> {
        Shared::default()
    }
}

impl<T: Clone> Shared<T> {
    /// The value as one of its own (copied only if another clone shares it).
    pub fn into_inner(self) -> T {
        Arc::unwrap_or_clone(self.0)
    }
}

impl<T> Shared<T> {
    /// True when `a` and `b` are clones of one another that neither has written to since.
    pub fn ptr_eq(a: &Shared<T>, b: &Shared<T>) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }
}

impl<T> Deref for Shared<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: Clone> DerefMut for Shared<T> {
    fn deref_mut(&mut self) -> &mut T {
        Arc::make_mut(&mut self.0)
    }
}

/// As the value itself.
impl<T: std::fmt::Debug> std::fmt::Debug for Shared<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.as_ref().fmt(f)
    }
}

impl<T> From<T> for Shared<T> {
    fn from(value: T) -> Shared<T> {
        Shared(Arc::new(value))
    }
}

impl From<Content> for Vec<Block> {
    fn from(content: Content) -> Vec<Block> {
        content.into_inner()
    }
}

impl From<Extra> for Map<String, Value> {
    fn from(extra: Extra) -> Map<String, Value> {
        extra.into_inner()
    }
}

impl PartialEq<Vec<Block>> for Content {
    fn eq(&self, other: &Vec<Block>) -> bool {
        self.0.as_ref() == other
    }
}

impl<T: FromIterator<A>, A> FromIterator<A> for Shared<T> {
    fn from_iter<I: IntoIterator<Item = A>>(items: I) -> Shared<T> {
        Shared::from(items.into_iter().collect::<T>())
    }
}

impl<T: Extend<A> + Clone, A> Extend<A> for Shared<T> {
    fn extend<I: IntoIterator<Item = A>>(&mut self, items: I) {
        self.deref_mut().extend(items);
    }
}

impl<T: IntoIterator + Clone> IntoIterator for Shared<T> {
    type Item = T::Item;
    type IntoIter = T::IntoIter;

    fn into_iter(self) -> Self::IntoIter {
        self.into_inner().into_iter()
    }
}

impl<'a, T> IntoIterator for &'a Shared<T>
where
    &'a T: IntoIterator,
{
    type Item = <&'a T as IntoIterator>::Item;
    type IntoIter = <&'a T as IntoIterator>::IntoIter;

    fn into_iter(self) -> Self::IntoIter {
        self.0.as_ref().into_iter()
    }
}

impl<'a, T: Clone> IntoIterator for &'a mut Shared<T>
where
    &'a mut T: IntoIterator,
{
    type Item = <&'a mut T as IntoIterator>::Item;
    type IntoIter = <&'a mut T as IntoIterator>::IntoIter;

    fn into_iter(self) -> Self::IntoIter {
        self.deref_mut().into_iter()
    }
}

impl<T: Serialize> Serialize for Shared<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Shared<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Shared<T>, D::Error> {
        T::deserialize(deserializer).map(Shared::from)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_clone_shares_the_fields_until_one_side_writes() {
        let mut original = Extra::new();
        original.insert("uuid".into(), Value::from("a1"));
        let mut copy = original.clone();
        assert!(Extra::ptr_eq(&original, &copy), "a clone is not a copy");
        copy.insert("cwd".into(), Value::from("/srv"));
        assert!(!Extra::ptr_eq(&original, &copy));
        assert_eq!(original.len(), 1, "the original did not change");
        assert_eq!(copy.len(), 2);
    }

    #[test]
    fn fields_read_write_and_print_as_the_object_they_hold() {
        let json = r#"{"b":[1,2],"a":{"x":null}}"#;
        let extra: Extra = serde_json::from_str(json).unwrap();
        assert_eq!(serde_json::to_string(&extra).unwrap(), json);
        let map: Map<String, Value> = serde_json::from_str(json).unwrap();
        assert_eq!(format!("{extra:?}"), format!("{map:?}"));
        assert_eq!(Map::from(extra), map);
    }

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
    fn reading_blocks_never_copies() {
        let original = Content::from(vec![Block::text("x")]);
        let copy = original.clone();
        let texts: usize = (&copy).into_iter().filter_map(Block::as_text).count();
        assert_eq!(texts, 1);
        assert!(Content::ptr_eq(&original, &copy));
        assert_eq!(copy, vec![Block::text("x")]);
        assert_eq!(format!("{copy:?}"), format!("{:?}", vec![Block::text("x")]));
    }
}
