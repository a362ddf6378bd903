//! `cargo +nightly fuzz run server_stream`: arbitrary byte streams over a real socket to an
//! in-process memkitd, one connection per input; the server must stay up, close the
//! connection cleanly, answer in well-formed replies and keep serving a well-behaved client.
//!
//! The checks are the file the stable replay test uses
//! (`crates/memkit-server/tests/fuzz_replay.rs`), included here so both assert the same.
#![no_main]

use std::sync::OnceLock;

#[path = "../../crates/memkit-server/tests/support/server_fuzz.rs"]
mod server_fuzz;

/// One server and runtime for the whole run: starting them per input would dominate.
static HARNESS: OnceLock<server_fuzz::Harness> = OnceLock::new();

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    HARNESS
        .get_or_init(server_fuzz::Harness::start)
        .one(data);
});
