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
        // One write call per line: `writeln!` on a `File` writes the id and
        // the newline in two calls, and a kill -9 between them leaves a torn
        // line that the next process's line is appended to.
        let line = format!("{id}\n");
        self.log.lock().unwrap().write_all(line.as_bytes()).unwrap();
        Ok(())
    }
}

/// The log's lines, each checked to be one of the `n` ids `m0` … `m{n-1}`
/// that the test published: a torn or foreign line fails here, by name,
/// instead of being counted as one more message processed.
pub(crate) fn logged_ids(log: &std::path::Path, n: usize) -> Vec<String> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let ids: Vec<String> = text.lines().map(str::to_owned).collect();
    for line in &ids {
        let known = line
            .strip_prefix('m')
            .and_then(|i| i.parse::<usize>().ok())
            .is_some_and(|i| i < n && line == &format!("m{i}"));
        assert!(
            known,
            "the log holds a line that is no published id: {line:?}"
        );
    }
    ids
}
