//! The in-memory parking lot: browse and sweep over a list.

use std::sync::Arc;

use async_trait::async_trait;

use super::state::{Entry, Inner};
use crate::transport::{Choice, ErrorKind, Parked, ParkingLot, Selector, TransportError};

#[derive(Debug, Clone)]
pub(super) struct MemoryParkingLot {
    inner: Arc<Inner>,
}

impl MemoryParkingLot {
    pub(super) fn new(inner: Arc<Inner>) -> Self {
        MemoryParkingLot { inner }
    }
}

#[async_trait]
impl ParkingLot for MemoryParkingLot {
    async fn browse(&self, limit: usize) -> Result<Vec<Parked>, TransportError> {
        let s = self.inner.lock();
        Ok(s.parked
            .iter()
            .take(limit)
            .map(|p| Parked::new(p.id.to_string(), p.message.clone(), Some(p.parked_at)))
            .collect())
    }

    async fn sweep(&self, selector: &mut dyn Selector) -> Result<(), TransportError> {
        let ids: Vec<u64> = self.inner.lock().parked.iter().map(|p| p.id).collect();
        for id in ids {
            let found = {
                let s = self.inner.lock();
                s.parked.iter().find(|p| p.id == id).cloned()
            };
            let Some(entry) = found else { continue };
            let parked = Parked::new(id.to_string(), entry.message, Some(entry.parked_at));
            match selector.choose(&parked).await {
                Choice::Keep => {}
                Choice::Stop => break,
                Choice::Move(headers) => {
                    let result = self.move_back(id, headers);
                    selector.moved(&parked, result);
                }
            }
        }
        Ok(())
    }
}

impl MemoryParkingLot {
    fn move_back(&self, id: u64, headers: crate::Headers) -> Result<(), TransportError> {
        let entry = {
            let mut s = self.inner.lock();
            if s.take_failure() {
                return Err(TransportError::new(
                    "memory",
                    ErrorKind::Refused,
                    "injected failure",
                ));
            }
            let Some(pos) = s.parked.iter().position(|p| p.id == id) else {
                return Err(TransportError::new(
                    "memory",
                    ErrorKind::Refused,
                    format!("parked message {id} is no longer parked"),
                ));
            };
            let Some(mut p) = s.parked.remove(pos) else {
                return Err(TransportError::new(
                    "memory",
                    ErrorKind::Refused,
                    "parked message vanished",
                ));
            };
            s.stats.redriven += 1;
            p.message.headers = headers;
            Entry {
                seq: s.next_seq(),
                message: p.message,
                deliveries: 0,
            }
        };
        self.inner.enqueue(entry, false);
        Ok(())
    }
}
