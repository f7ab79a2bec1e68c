//! JSON: an object's keys with sampled values, an array's length, element types and keys, the
//! records and keys of JSON Lines.
//!
//! The summary needs the shape of a document, not its values: a serde visitor reads the text
//! once, renders the few fields it shows and skips everything else without allocating (serde's
//! `IgnoredAny`), several times faster than building a `serde_json::Value`. serde_json's
//! recursion limit bounds nesting, so hostile input cannot exhaust the stack.

use std::collections::BTreeMap;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::input::{Input, MAX_ITEMS};
use super::show::{Shape, count_of, push_unique};
use super::text::clean_inline;

/// How many array elements contribute their keys to an array summary.
const JSON_KEY_ELEMENTS: usize = 20;

pub(super) enum JsonShape {
    Object {
        len: usize,
        /// `key=value`, `key[n]`, `key{a,b,…}` for the first fields.
        fields: Vec<String>,
    },
    Array {
        len: usize,
        types: BTreeMap<&'static str, usize>,
        keys: Vec<String>,
        /// The first element's fields, when it is an object.
        first: Option<Vec<String>>,
    },
    Scalar(&'static str),
    Lines {
        records: usize,
        keys: Vec<String>,
    },
}

pub(super) fn json_shape(input: &Input<'_>) -> Option<JsonShape> {
    let trimmed = input.body.trim();
    let first = *trimmed.as_bytes().first()?;
    let last = *trimmed.as_bytes().last()?;
    if matches!((first, last), (b'{', b'}') | (b'[', b']')) {
        let mut deserializer = serde_json::Deserializer::from_str(trimmed);
        if let Ok(shape) = TopSeed.deserialize(&mut deserializer) {
            if deserializer.end().is_ok() {
                return Some(shape);
            }
        }
    }
    if first != b'{' {
        return None;
    }
    // JSON Lines: every non-empty line is an object (the first 50 are parsed).
    let mut records = 0;
    let mut keys: Vec<String> = Vec::new();
    for line in input.nonempty() {
        if records < 50 {
            let mut deserializer = serde_json::Deserializer::from_str(line);
            let element = ElementSeed {
                keys: true,
                fields: false,
            }
            .deserialize(&mut deserializer)
            .ok()?;
            deserializer.end().ok()?;
            if element.kind != "object" {
                return None;
            }
            for key in element.keys {
                push_unique(&mut keys, key);
            }
        } else if !line.trim_start().starts_with('{') {
            return None;
        }
        records += 1;
    }
    (records >= 2).then_some(JsonShape::Lines { records, keys })
}

/// The whole document.
struct TopSeed;

impl<'de> DeserializeSeed<'de> for TopSeed {
    type Value = JsonShape;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<JsonShape, D::Error> {
        deserializer.deserialize_any(TopVisitor)
    }
}

struct TopVisitor;

impl<'de> Visitor<'de> for TopVisitor {
    type Value = JsonShape;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON document")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<JsonShape, A::Error> {
        let (len, fields) = read_fields(&mut map, true)?;
        Ok(JsonShape::Object { len, fields })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<JsonShape, A::Error> {
        let mut len = 0;
        let mut types: BTreeMap<&'static str, usize> = BTreeMap::new();
        let mut keys: Vec<String> = Vec::new();
        let mut first = None;
        while let Some(element) = seq.next_element_seed(ElementSeed {
            keys: len < JSON_KEY_ELEMENTS,
            fields: len == 0,
        })? {
            *types.entry(element.kind).or_default() += 1;
            for key in element.keys {
                push_unique(&mut keys, key);
            }
            if len == 0 {
                first = element.fields;
            }
            len += 1;
        }
        Ok(JsonShape::Array {
            len,
            types,
            keys,
            first,
        })
    }

    fn visit_bool<E>(self, _: bool) -> Result<JsonShape, E> {
        Ok(JsonShape::Scalar("bool"))
    }
    fn visit_i64<E>(self, _: i64) -> Result<JsonShape, E> {
        Ok(JsonShape::Scalar("number"))
    }
    fn visit_u64<E>(self, _: u64) -> Result<JsonShape, E> {
        Ok(JsonShape::Scalar("number"))
    }
    fn visit_f64<E>(self, _: f64) -> Result<JsonShape, E> {
        Ok(JsonShape::Scalar("number"))
    }
    fn visit_str<E>(self, _: &str) -> Result<JsonShape, E> {
        Ok(JsonShape::Scalar("string"))
    }
    fn visit_unit<E>(self) -> Result<JsonShape, E> {
        Ok(JsonShape::Scalar("null"))
    }
}

/// Reads an object's entries: its size, and (when `render`) the first fields rendered.
fn read_fields<'de, A: MapAccess<'de>>(
    map: &mut A,
    render: bool,
) -> Result<(usize, Vec<String>), A::Error> {
    let mut len = 0;
    let mut fields = Vec::new();
    while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
        if render && fields.len() < MAX_ITEMS {
            let value = map.next_value_seed(FieldSeed)?;
            fields.push(format!("{}{value}", clean_inline(&key, 40)));
        } else {
            map.next_value::<IgnoredAny>()?;
        }
        len += 1;
    }
    Ok((len, fields))
}

/// One array element: its type, and on request its keys and rendered fields.
struct ElementSeed {
    keys: bool,
    fields: bool,
}

struct Element {
    kind: &'static str,
    keys: Vec<String>,
    fields: Option<Vec<String>>,
}

impl Element {
    fn of(kind: &'static str) -> Element {
        Element {
            kind,
            keys: Vec::new(),
            fields: None,
        }
    }
}

impl<'de> DeserializeSeed<'de> for ElementSeed {
    type Value = Element;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Element, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ElementSeed {
    type Value = Element;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Element, A::Error> {
        let mut keys = Vec::new();
        let mut fields = Vec::new();
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if self.fields && fields.len() < MAX_ITEMS {
                let value = map.next_value_seed(FieldSeed)?;
                fields.push(format!("{}{value}", clean_inline(&key, 40)));
            } else {
                map.next_value::<IgnoredAny>()?;
            }
            if self.keys && keys.len() < MAX_ITEMS {
                keys.push(clean_inline(&key, 40));
            }
        }
        Ok(Element {
            kind: "object",
            keys,
            fields: self.fields.then_some(fields),
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Element, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Element::of("array"))
    }

    fn visit_bool<E>(self, _: bool) -> Result<Element, E> {
        Ok(Element::of("bool"))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Element, E> {
        Ok(Element::of("number"))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Element, E> {
        Ok(Element::of("number"))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Element, E> {
        Ok(Element::of("number"))
    }
    fn visit_str<E>(self, _: &str) -> Result<Element, E> {
        Ok(Element::of("string"))
    }
    fn visit_unit<E>(self) -> Result<Element, E> {
        Ok(Element::of("null"))
    }
}

/// A field's value as shown after its key: `="text"`, `=404`, `[n]`, `{a,b,c,…}`.
struct FieldSeed;

impl<'de> DeserializeSeed<'de> for FieldSeed {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<String, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for FieldSeed {
    type Value = String;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<String, A::Error> {
        let mut keys: Vec<String> = Vec::new();
        let mut len = 0;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if keys.len() < 3 {
                keys.push(clean_inline(&key, 20));
            }
            map.next_value::<IgnoredAny>()?;
            len += 1;
        }
        let more = if len > 3 { ",…" } else { "" };
        Ok(format!("{{{}{more}}}", keys.join(",")))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<String, A::Error> {
        let mut len = 0;
        while seq.next_element::<IgnoredAny>()?.is_some() {
            len += 1;
        }
        Ok(format!("[{len}]"))
    }

    fn visit_bool<E>(self, v: bool) -> Result<String, E> {
        Ok(format!("={v}"))
    }
    fn visit_i64<E>(self, v: i64) -> Result<String, E> {
        Ok(format!("={v}"))
    }
    fn visit_u64<E>(self, v: u64) -> Result<String, E> {
        Ok(format!("={v}"))
    }
    fn visit_f64<E>(self, v: f64) -> Result<String, E> {
        // serde_json's own spelling (`1.0`, not `1`).
        let number =
            serde_json::Number::from_f64(v).map_or_else(|| v.to_string(), |n| n.to_string());
        Ok(format!("={number}"))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        Ok(format!("=\"{}\"", clean_inline(v, 80)))
    }
    fn visit_unit<E>(self) -> Result<String, E> {
        Ok("=null".to_owned())
    }
}

pub(super) fn json_summary(json: &JsonShape) -> Shape {
    match json {
        JsonShape::Array { len: 0, .. } => Shape::new("json array, empty".to_owned()),
        JsonShape::Array {
            len,
            types,
            keys,
            first,
        } => {
            let mut by_count: Vec<(&str, usize)> = types.iter().map(|(t, n)| (*t, *n)).collect();
            by_count.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
            let dist: Vec<String> = by_count.iter().map(|(t, n)| format!("{n} {t}")).collect();
            let first = first
                .as_ref()
                .filter(|fields| !fields.is_empty())
                .map(|fields| format!("first: {}", fields.join(", ")));
            Shape::new(format!("json array of {len}: {}", dist.join(", ")))
                .items("keys:", keys.clone(), 6)
                .details(first)
        }
        JsonShape::Object { len, fields } => Shape::new(format!(
            "json object, {}",
            count_of(*len, "key")
        ))
        .items("", fields.clone(), 5),
        JsonShape::Scalar(kind) => Shape::new(format!("json {kind}")),
        JsonShape::Lines { records, keys } => {
            Shape::new(format!("jsonl, {records} records")).items("keys:", keys.clone(), 6)
        }
    }
}
