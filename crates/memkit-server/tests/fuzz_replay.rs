//! The server end-to-end fuzz target's checks on stable Rust: replays the checked-in corpus
//! (`fuzz/corpus/server_stream/`) against an in-process memkitd, through each way it drives
//! a connection, bounded in time.
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

/// The corpus through each of the three ways a connection is driven: the worker loop
/// through io_uring (where the kernel has it), the loop through epoll, and the connection
/// task.
#[test]
fn corpus_replays_clean() {
    let seeds = memkit_testkit::fuzz::corpus("server_stream");
    for flags in ["uring", "epoll", "task"] {
        let h = match flags {
            "epoll" => server_fuzz::Harness::start_with(&["--io", "epoll"]),
            "task" => server_fuzz::Harness::start_tasks(),
            _ => server_fuzz::Harness::start(),
        };
        let started = Instant::now();
        for (i, data) in seeds.iter().enumerate() {
            h.one(data);
            // A budget, not a sample: the corpus is sized to replay in a few seconds, and
            // a replay that slow means something regressed.
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "{flags}: replay too slow at seed {i} of {}",
                seeds.len()
            );
        }
    }
}
