//! The server end-to-end fuzz target's checks on stable Rust: replays the checked-in corpus
//! (`fuzz/corpus/server_stream/`) against an in-process memkitd, bounded in time.
//! `cargo +nightly fuzz run server_stream` explores further.

#[path = "support/server_fuzz.rs"]
mod server_fuzz;

use std::time::{Duration, Instant};

/// `MEMKIT_FUZZ_INPUT=path cargo test -p memkit-server --test fuzz_replay one_input`
/// replays one file (a crash artifact, say).
#[test]
fn one_input() {
    if let Ok(path) = std::env::var("MEMKIT_FUZZ_INPUT") {
        server_fuzz::Harness::start().one(&std::fs::read(path).unwrap());
    }
}

#[test]
fn corpus_replays_clean() {
    let seeds = memkit_testkit::fuzz::corpus("server_stream");
    let h = server_fuzz::Harness::start();
    let started = Instant::now();
    for (i, data) in seeds.iter().enumerate() {
        h.one(data);
        // A budget, not a sample: the corpus is sized to replay in a few seconds, and a
        // replay that slow means something regressed.
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "replay too slow at seed {i} of {}",
            seeds.len()
        );
    }
}
