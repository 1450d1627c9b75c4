//! The handler of the kill -9 tests, shared by the broker suites: it runs
//! in a child worker process that the test kills mid-run.

use std::{collections::HashSet, io::Write};

use parkway::{Failure, Handler, Message};

/// 30 % fail once (per process), the rest succeed; successes are appended
/// to a log file that survives a kill -9.
pub(crate) struct Logging {
    pub(crate) log: std::sync::Mutex<std::fs::File>,
    pub(crate) failed: std::sync::Mutex<HashSet<String>>,
}

impl Handler for Logging {
    async fn handle(&self, msg: &Message) -> Result<(), Failure> {
        let id = msg.id.clone().unwrap_or_default();
        if String::from_utf8_lossy(&msg.body) == "fail:1"
            && self.failed.lock().unwrap().insert(id.clone())
        {
            return Err(Failure::transient("DOWNSTREAM_TIMEOUT"));
        }
        writeln!(self.log.lock().unwrap(), "{id}").unwrap();
        Ok(())
    }
}
