//! A progress bar over a redrive, without the core knowing about it.
//!
//! Why a wrapper? Core's redrive reports each move to its selector
//! ([`parkway::Selector::moved`]); wrapping the parking lot lets the CLI see
//! those reports on their way and tick the bar, so the engine stays free of
//! any terminal concern.

use async_trait::async_trait;
use indicatif::ProgressBar;
use parkway::{Choice, Parked, ParkingLot, Selector, TransportError};

/// A parking lot whose sweeps tick a progress bar on every move.
#[derive(Debug)]
pub(crate) struct Ticking<'a> {
    pub(crate) lot: &'a dyn ParkingLot,
    pub(crate) bar: ProgressBar,
}

struct TickingSelector<'a> {
    inner: &'a mut dyn Selector,
    bar: &'a ProgressBar,
}

#[async_trait]
impl Selector for TickingSelector<'_> {
    async fn choose(&mut self, parked: &Parked) -> Choice {
        self.inner.choose(parked).await
    }

    fn moved(&mut self, parked: &Parked, result: Result<(), TransportError>) {
        if result.is_err() {
            self.bar.set_message("some moves failed");
        }
        self.bar.inc(1);
        self.inner.moved(parked, result);
    }
}

#[async_trait]
impl ParkingLot for Ticking<'_> {
    async fn browse(&self, limit: usize) -> Result<Vec<Parked>, TransportError> {
        self.lot.browse(limit).await
    }

    async fn sweep(&self, selector: &mut dyn Selector) -> Result<(), TransportError> {
        let mut ticking = TickingSelector {
            inner: selector,
            bar: &self.bar,
        };
        self.lot.sweep(&mut ticking).await
    }
}
