//! A transport-neutral header map.
//!
//! Every broker has headers of some kind (AMQP field tables, Kafka record
//! headers, SQS message attributes); the envelope codec writes to and reads
//! from this one shape and each transport maps it to its own.
//!
//! Why one text buffer and a sorted list of spans, not a `BTreeMap` or a
//! `Vec` of string pairs: every message builds and drops a map, on the hot
//! path of every transport. A B-tree's first insert allocates a whole node
//! (over 500 bytes here); string pairs allocate twice per header. Here a
//! map of any size is two allocations (the text and the spans), a binary
//! search over a handful of names is as quick as the tree's, and a clone
//! copies two blocks. A replaced or removed value leaves its bytes behind
//! until they outweigh the live ones, then the text is compacted.

use std::{fmt, ops::Range};

/// Where one header's name and value are in the text.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Span {
    name: Range<usize>,
    value: Range<usize>,
}

/// Bytes a header takes on average, for [`Headers::with_capacity`].
const BYTES_PER_HEADER: usize = 32;

/// Message headers as ordered `name → text` pairs, one value per name.
///
/// ```
/// use parkway_core::Headers;
/// let mut h = Headers::new();
/// h.insert("content-type", "application/json");
/// assert_eq!(h.get("content-type"), Some("application/json"));
/// ```
#[derive(Clone, Default)]
pub struct Headers {
    /// Names and values, back to back (and bytes no span points to any
    /// more, at most as many as the live ones past a small floor).
    text: String,
    /// One per header, sorted by name.
    spans: Vec<Span>,
    /// Bytes of `text` no span points to.
    dead: usize,
}

impl Headers {
    /// An empty map.
    pub fn new() -> Self {
        Headers::default()
    }

    /// An empty map with room for `n` headers of a usual size.
    pub fn with_capacity(n: usize) -> Self {
        Headers::with_room(n, n.saturating_mul(BYTES_PER_HEADER))
    }

    /// An empty map with room for `n` headers whose names and values take
    /// `bytes` bytes in all: filled without allocating again.
    ///
    /// ```
    /// use parkway_core::Headers;
    /// let mut h = Headers::with_room(1, "message-id".len() + "m-1".len());
    /// h.insert("message-id", "m-1");
    /// assert_eq!(h.get("message-id"), Some("m-1"));
    /// ```
    pub fn with_room(n: usize, bytes: usize) -> Self {
        Headers {
            text: String::with_capacity(bytes),
            spans: Vec::with_capacity(n),
            dead: 0,
        }
    }

    fn text(&self, r: &Range<usize>) -> &str {
        self.text.get(r.clone()).unwrap_or_default()
    }

    fn find(&self, name: &str) -> Result<usize, usize> {
        self.spans
            .binary_search_by(|s| self.text(&s.name).cmp(name))
    }

    /// Appends `s` to the text; returns where it is.
    fn push(&mut self, s: &str) -> Range<usize> {
        let start = self.text.len();
        self.text.push_str(s);
        start..self.text.len()
    }

    /// Rewrites the text with the live bytes only, once the dead ones
    /// outweigh them (and a small floor, so tiny maps never bother).
    fn compact_if_worth_it(&mut self) {
        if self.dead <= 256 || self.dead <= self.text.len() / 2 {
            return;
        }
        let mut text = String::with_capacity(self.text.len().saturating_sub(self.dead));
        for span in &mut self.spans {
            for r in [&mut span.name, &mut span.value] {
                let start = text.len();
                text.push_str(self.text.get(r.clone()).unwrap_or_default());
                *r = start..text.len();
            }
        }
        self.text = text;
        self.dead = 0;
    }

    /// The value of a header.
    pub fn get(&self, name: &str) -> Option<&str> {
        let i = self.find(name).ok()?;
        self.spans.get(i).map(|s| self.text(&s.value))
    }

    /// Sets a header, returning the previous value.
    pub fn insert(&mut self, name: impl AsRef<str>, value: impl AsRef<str>) -> Option<String> {
        let (name, value) = (name.as_ref(), value.as_ref());
        match self.find(name) {
            Ok(i) => {
                let old = self.spans.get(i)?.value.clone();
                let previous = self.text(&old).to_owned();
                let new = self.push(value);
                if let Some(span) = self.spans.get_mut(i) {
                    span.value = new;
                }
                self.dead += old.len();
                self.compact_if_worth_it();
                Some(previous)
            }
            Err(i) => {
                let span = Span {
                    name: self.push(name),
                    value: self.push(value),
                };
                self.spans.insert(i, span);
                None
            }
        }
    }

    /// Removes a header.
    pub fn remove(&mut self, name: &str) -> Option<String> {
        let i = self.find(name).ok()?;
        let span = self.spans.remove(i);
        let value = self.text(&span.value).to_owned();
        self.dead += span.name.len() + span.value.len();
        self.compact_if_worth_it();
        Some(value)
    }

    /// Keeps only the headers for which `keep` returns true.
    pub fn retain(&mut self, mut keep: impl FnMut(&str, &str) -> bool) {
        let text = &self.text;
        let mut dead = 0;
        self.spans.retain(|s| {
            let name = text.get(s.name.clone()).unwrap_or_default();
            let value = text.get(s.value.clone()).unwrap_or_default();
            let kept = keep(name, value);
            if !kept {
                dead += s.name.len() + s.value.len();
            }
            kept
        });
        self.dead += dead;
        self.compact_if_worth_it();
    }

    /// Number of headers.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether there are no headers.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Whether any header's name starts with `prefix`; one lookup, since
    /// names are kept in order.
    ///
    /// ```
    /// use parkway_core::Headers;
    /// let h: Headers = [("x-parkway-attempt", "2"), ("z", "1")].into_iter().collect();
    /// assert!(h.has_prefix("x-parkway-"));
    /// assert!(!h.has_prefix("x-other-"));
    /// ```
    pub fn has_prefix(&self, prefix: &str) -> bool {
        let i = self.find(prefix).unwrap_or_else(|i| i);
        self.spans
            .get(i)
            .is_some_and(|s| self.text(&s.name).starts_with(prefix))
    }

    /// Total bytes of names and values of the headers whose name starts with
    /// `prefix` (what a broker counts against its header limit).
    pub fn byte_size(&self, prefix: &str) -> usize {
        self.iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| k.len() + v.len())
            .sum()
    }

    /// Iterates in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.spans
            .iter()
            .map(|s| (self.text(&s.name), self.text(&s.value)))
    }
}

/// Equal when they hold the same headers (however their text is laid out).
impl PartialEq for Headers {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for Headers {}

impl fmt::Debug for Headers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: AsRef<str>, V: AsRef<str>> FromIterator<(K, V)> for Headers {
    /// A later value for a name replaces an earlier one.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let iter = iter.into_iter();
        let mut h = Headers::with_capacity(iter.size_hint().0);
        for (k, v) in iter {
            h.insert(k, v);
        }
        h
    }
}

impl IntoIterator for Headers {
    type Item = (String, String);
    type IntoIter = std::vec::IntoIter<(String, String)>;
    /// In name order.
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect::<Vec<_>>()
            .into_iter()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    #[derive(Debug, Clone)]
    enum Op {
        Insert(String, String),
        Remove(String),
        RetainShort,
    }

    fn op() -> impl Strategy<Value = Op> {
        let name = "[a-d]{0,3}";
        prop_oneof![
            (name, "[a-z]{0,3}").prop_map(|(k, v)| Op::Insert(k, v)),
            // Long values: replacing and removing them leaves enough dead
            // text for the map to compact.
            (name, "[a-z]{60,200}").prop_map(|(k, v)| Op::Insert(k, v)),
            name.prop_map(Op::Remove),
            Just(Op::RetainShort),
        ]
    }

    proptest! {
        /// The map behaves as the ordered map it replaced, step by step.
        #[test]
        fn behaves_as_an_ordered_map(ops in proptest::collection::vec(op(), 0..40)) {
            let mut h = Headers::new();
            let mut m = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Insert(k, v) => {
                        prop_assert_eq!(h.insert(k.clone(), v.clone()), m.insert(k, v));
                    }
                    Op::Remove(k) => prop_assert_eq!(h.remove(&k), m.remove(&k)),
                    Op::RetainShort => {
                        h.retain(|k, _| k.len() < 2);
                        m.retain(|k: &String, _| k.len() < 2);
                    }
                }
                let expected: Vec<(&str, &str)> = m.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                prop_assert_eq!(h.iter().collect::<Vec<_>>(), expected);
                for k in ["", "a", "ab", "zz"] {
                    prop_assert_eq!(h.get(k), m.get(k).map(String::as_str));
                }
                // However its text is laid out (dead bytes, compacted or
                // not), it equals a map built afresh, as does its clone.
                let fresh: Headers = m.iter().collect();
                prop_assert_eq!(&h, &fresh);
                prop_assert_eq!(&h.clone(), &fresh);
                prop_assert_eq!(h.len(), m.len());
                prop_assert!(h.dead <= 256 || h.dead <= h.text.len() / 2, "dead text is bounded");
            }
        }
    }
}

#[cfg(test)]
mod layout_tests {
    use super::*;

    #[test]
    fn replacing_a_long_value_again_and_again_keeps_the_text_small() {
        let mut h = Headers::new();
        let long = "v".repeat(1_000);
        for i in 0..100 {
            h.insert("k", format!("{i}{long}"));
        }
        assert_eq!(h.get("k"), Some(format!("99{long}").as_str()));
        assert!(
            h.text.len() <= 3 * (1 + 1_002),
            "text grew to {}",
            h.text.len()
        );
        let owned: Vec<(String, String)> = h.into_iter().collect();
        assert_eq!(owned, [("k".to_owned(), format!("99{long}"))]);
    }

    #[test]
    fn room_for_the_headers_means_no_reallocation() {
        let mut h = Headers::with_room(2, "a".len() + "1".len() + "bb".len() + "22".len());
        let (text, spans) = (h.text.capacity(), h.spans.capacity());
        h.insert("bb", "22");
        h.insert("a", "1");
        assert_eq!((h.text.capacity(), h.spans.capacity()), (text, spans));
        assert_eq!(format!("{h:?}"), r#"{"a": "1", "bb": "22"}"#);
    }
}
