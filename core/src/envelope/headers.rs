//! A transport-neutral header map.
//!
//! Every broker has headers of some kind (AMQP field tables, Kafka record
//! headers, SQS message attributes); the envelope codec writes to and reads
//! from this one shape and each transport maps it to its own.

use std::collections::{BTreeMap, btree_map};

/// Message headers as ordered `name → text` pairs.
///
/// ```
/// use parkway_core::Headers;
/// let mut h = Headers::new();
/// h.insert("content-type", "application/json");
/// assert_eq!(h.get("content-type"), Some("application/json"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Headers(BTreeMap<String, String>);

impl Headers {
    /// An empty map.
    pub fn new() -> Self {
        Headers::default()
    }

    /// The value of a header.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// Sets a header, returning the previous value.
    pub fn insert(&mut self, name: impl Into<String>, value: impl Into<String>) -> Option<String> {
        self.0.insert(name.into(), value.into())
    }

    /// Removes a header.
    pub fn remove(&mut self, name: &str) -> Option<String> {
        self.0.remove(name)
    }

    /// Keeps only the headers for which `keep` returns true.
    pub fn retain(&mut self, mut keep: impl FnMut(&str, &str) -> bool) {
        self.0.retain(|k, v| keep(k, v));
    }

    /// Number of headers.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are no headers.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
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
        self.0
            .range::<str, _>((
                std::ops::Bound::Included(prefix),
                std::ops::Bound::Unbounded,
            ))
            .next()
            .is_some_and(|(k, _)| k.starts_with(prefix))
    }

    /// Total bytes of names and values of the headers whose name starts with
    /// `prefix` (what a broker counts against its header limit).
    pub fn byte_size(&self, prefix: &str) -> usize {
        self.0
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| k.len() + v.len())
            .sum()
    }

    /// Iterates in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Headers {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Headers(
            iter.into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }
}

impl IntoIterator for Headers {
    type Item = (String, String);
    type IntoIter = btree_map::IntoIter<String, String>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}
