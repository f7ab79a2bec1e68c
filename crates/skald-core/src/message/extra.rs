//! [`Extra`]: the fields of a message or block that skald does not interpret, shared between
//! copies and copied on the first write.
//!
//! Why shared: a session's context is cloned for every model request (the pipeline takes the
//! messages by value while the engine keeps the stored ones), and a host's transcript carries
//! much of its weight here — Claude Code's envelope (`uuid`, `parentUuid`, `cwd`, `gitBranch`,
//! its `message` fields…) is a tree of small JSON values, as costly to copy as all the text of
//! the conversation three times over. A clone of an `Extra` is one reference count; a write
//! ([`DerefMut`]) copies the map only while another clone still shares it.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// Fields a format carries that skald does not interpret; kept verbatim and written back. Reads
/// and writes as the JSON object it holds ([`Deref`] to [`Map`]).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Extra(Arc<Map<String, Value>>);

impl Extra {
    /// No fields.
    pub fn new() -> Extra {
        Extra::default()
    }

    /// The fields as a map of their own (copied only if another clone shares them).
    pub fn into_map(self) -> Map<String, Value> {
        Arc::unwrap_or_clone(self.0)
    }
}

impl Deref for Extra {
    type Target = Map<String, Value>;

    fn deref(&self) -> &Map<String, Value> {
        &self.0
    }
}

impl DerefMut for Extra {
    fn deref_mut(&mut self) -> &mut Map<String, Value> {
        Arc::make_mut(&mut self.0)
    }
}

/// As the map itself: an `Extra` prints as the JSON object it holds.
impl std::fmt::Debug for Extra {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.as_ref().fmt(f)
    }
}

impl From<Map<String, Value>> for Extra {
    fn from(map: Map<String, Value>) -> Extra {
        Extra(Arc::new(map))
    }
}

impl From<Extra> for Map<String, Value> {
    fn from(extra: Extra) -> Map<String, Value> {
        extra.into_map()
    }
}

impl FromIterator<(String, Value)> for Extra {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(fields: I) -> Extra {
        Extra::from(fields.into_iter().collect::<Map<String, Value>>())
    }
}

impl Extend<(String, Value)> for Extra {
    fn extend<I: IntoIterator<Item = (String, Value)>>(&mut self, fields: I) {
        self.deref_mut().extend(fields);
    }
}

impl IntoIterator for Extra {
    type Item = (String, Value);
    type IntoIter = serde_json::map::IntoIter;

    fn into_iter(self) -> Self::IntoIter {
        self.into_map().into_iter()
    }
}

impl<'a> IntoIterator for &'a Extra {
    type Item = (&'a String, &'a Value);
    type IntoIter = serde_json::map::Iter<'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl Serialize for Extra {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Extra {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Extra, D::Error> {
        Map::deserialize(deserializer).map(Extra::from)
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
        assert!(Arc::ptr_eq(&original.0, &copy.0), "a clone is not a copy");
        copy.insert("cwd".into(), Value::from("/srv"));
        assert!(!Arc::ptr_eq(&original.0, &copy.0));
        assert_eq!(original.len(), 1, "the original did not change");
        assert_eq!(copy.len(), 2);
    }

    #[test]
    fn it_reads_writes_and_prints_as_the_object_it_holds() {
        let json = r#"{"b":[1,2],"a":{"x":null}}"#;
        let extra: Extra = serde_json::from_str(json).unwrap();
        assert_eq!(serde_json::to_string(&extra).unwrap(), json);
        let map: Map<String, Value> = serde_json::from_str(json).unwrap();
        assert_eq!(format!("{extra:?}"), format!("{map:?}"));
        assert_eq!(Map::from(extra), map);
    }
}
