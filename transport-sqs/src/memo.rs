//! What a visibility retry cannot write onto the message.
//!
//! Why a memo? `ChangeMessageVisibility` delays a message without copying
//! it, so its attributes — the envelope — stay as they were: the failure
//! time, reason, total delay and due time of the retry would be lost, and
//! the message would come back up to a second early (visibility is whole
//! seconds). The transport remembers the envelope it would have written,
//! by SQS message id, and lays it over the message when it comes back, so
//! the worker sees the same envelope as after a re-send and waits out the
//! sub-second rest. Releases (shutdown, halt) are remembered too: SQS counts
//! them as receives, but they spent no attempt.
//!
//! The memo lives in one process. If another worker (or a restart) gets the
//! message, `ApproximateReceiveCount` still counts the attempts and
//! `ApproximateFirstReceiveTimestamp` stands in for the first failure; only
//! the sub-second part of the delay and the total delay are then unknown.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Mutex, MutexGuard},
};

use parkway_core::Headers;

/// Entries kept at most; the oldest are forgotten first.
const CAPACITY: usize = 100_000;

#[derive(Debug, Default)]
struct Entry {
    envelope: Option<Headers>,
    uncounted: u32,
}

#[derive(Debug, Default)]
struct State {
    map: HashMap<String, Entry>,
    order: VecDeque<String>,
}

/// Envelopes of visibility retries and uncounted receives, by message id.
#[derive(Debug, Default)]
pub(crate) struct Memo {
    state: Mutex<State>,
}

impl Memo {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn entry<'a>(state: &'a mut State, id: &str) -> &'a mut Entry {
        if !state.map.contains_key(id) {
            state.order.push_back(id.to_owned());
            while state.order.len() > CAPACITY {
                if let Some(old) = state.order.pop_front() {
                    state.map.remove(&old);
                }
            }
        }
        state.map.entry(id.to_owned()).or_default()
    }

    /// Remembers the envelope (the `x-parkway-*` headers) of a retry;
    /// returns the one it replaces, for [`Memo::restore`].
    pub(crate) fn retried(&self, id: &str, headers: &Headers) -> Option<Headers> {
        let envelope: Headers = headers
            .iter()
            .filter(|(k, _)| k.starts_with(parkway_core::envelope::HEADER_PREFIX))
            .collect();
        let mut s = self.state();
        Self::entry(&mut s, id).envelope.replace(envelope)
    }

    /// Puts back the envelope a retry that SQS refused replaced.
    pub(crate) fn restore(&self, id: &str, envelope: Option<Headers>) {
        let mut s = self.state();
        Self::entry(&mut s, id).envelope = envelope;
    }

    /// Counts a receive that spent no attempt.
    pub(crate) fn released(&self, id: &str) {
        let mut s = self.state();
        let e = Self::entry(&mut s, id);
        e.uncounted = e.uncounted.saturating_add(1);
    }

    /// Forgets a message that left the queue.
    pub(crate) fn forget(&self, id: &str) {
        let mut s = self.state();
        s.map.remove(id);
        if s.order.len() > 2 * s.map.len() + 1024 {
            let State { map, order } = &mut *s;
            order.retain(|k| map.contains_key(k));
        }
    }

    /// The remembered envelope and uncounted receives of a message.
    pub(crate) fn recall(&self, id: &str) -> (Option<Headers>, u32) {
        let s = self.state();
        s.map
            .get(id)
            .map_or((None, 0), |e| (e.envelope.clone(), e.uncounted))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_envelopes_and_releases_until_forgotten() {
        let m = Memo::default();
        let mut h = Headers::new();
        h.insert("x-parkway-attempt", "2");
        h.insert("tenant", "acme");
        m.retried("a", &h);
        m.released("a");
        let (env, uncounted) = m.recall("a");
        let env = env.unwrap();
        assert_eq!(env.get("x-parkway-attempt"), Some("2"));
        assert_eq!(env.get("tenant"), None, "only the envelope");
        assert_eq!(uncounted, 1);
        m.forget("a");
        assert_eq!(m.recall("a"), (None, 0));
    }

    #[test]
    fn is_bounded() {
        let m = Memo::default();
        for i in 0..CAPACITY + 10 {
            m.released(&i.to_string());
        }
        assert_eq!(m.recall("0").1, 0, "the oldest was forgotten");
        assert_eq!(m.recall(&(CAPACITY + 9).to_string()).1, 1);
    }
}
