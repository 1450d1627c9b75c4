//! `Config::from_toml` must never panic, whatever the text: a bad config is
//! an `Err`, never a crash.
#![no_main]

use libfuzzer_sys::fuzz_target;
use parkway_core::config::Config;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = Config::from_toml(&text);
});
