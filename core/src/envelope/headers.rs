//! A transport-neutral header map.
//!
//! Every broker has headers of some kind (AMQP field tables, Kafka record
//! headers, SQS message attributes); the envelope codec writes to and reads
//! from this one shape and each transport maps it to its own.
//!
//! Why a sorted `Vec` and not a `BTreeMap`: a message has a handful of
//! headers, and every message builds and drops a map. A B-tree's first
//! insert allocates a whole node (over 500 bytes here); a vector holds
//! exactly what is there, and a binary search over a few names is as quick
//! as the tree's.

/// Message headers as ordered `name → text` pairs, one value per name.
///
/// ```
/// use parkway_core::Headers;
/// let mut h = Headers::new();
/// h.insert("content-type", "application/json");
/// assert_eq!(h.get("content-type"), Some("application/json"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Headers(Vec<(String, String)>);

impl Headers {
    /// An empty map.
    pub fn new() -> Self {
        Headers::default()
    }

    /// An empty map with room for `n` headers.
    pub fn with_capacity(n: usize) -> Self {
        Headers(Vec::with_capacity(n))
    }

    fn find(&self, name: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.as_str().cmp(name))
    }

    /// The value of a header.
    pub fn get(&self, name: &str) -> Option<&str> {
        let i = self.find(name).ok()?;
        self.0.get(i).map(|(_, v)| v.as_str())
    }

    /// Sets a header, returning the previous value.
    pub fn insert(&mut self, name: impl Into<String>, value: impl Into<String>) -> Option<String> {
        let name = name.into();
        let value = value.into();
        match self.find(&name) {
            Ok(i) => self
                .0
                .get_mut(i)
                .map(|e| std::mem::replace(&mut e.1, value)),
            Err(i) => {
                self.0.insert(i, (name, value));
                None
            }
        }
    }

    /// Removes a header.
    pub fn remove(&mut self, name: &str) -> Option<String> {
        let i = self.find(name).ok()?;
        Some(self.0.remove(i).1)
    }

    /// Keeps only the headers for which `keep` returns true.
    pub fn retain(&mut self, mut keep: impl FnMut(&str, &str) -> bool) {
        self.0.retain(|(k, v)| keep(k, v));
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
        let i = self.find(prefix).unwrap_or_else(|i| i);
        self.0.get(i).is_some_and(|(k, _)| k.starts_with(prefix))
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
        self.0.into_iter()
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
            name.prop_map(Op::Remove),
            Just(Op::RetainShort),
        ]
    }

    proptest! {
        /// The vector behaves as the ordered map it replaced, step by step.
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
            }
        }
    }
}
