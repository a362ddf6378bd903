//! The server end-to-end fuzz target's checks on stable Rust: replays the checked-in corpus
//! (`fuzz/corpus/server_stream/`) against an in-process memkitd, bounded in time.
//! `cargo +nightly fuzz run server_stream` explores further.

#[path = "support/server_fuzz.rs"]
mod server_fuzz;

use std::path::PathBuf;
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
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/server_stream");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| rd.filter_map(|e| Some(e.ok()?.path())).collect())
        .unwrap_or_default();
    assert!(!files.is_empty(), "no seeds in {}", dir.display());
    files.sort();
    let h = server_fuzz::Harness::start();
    let started = Instant::now();
    for f in &files {
        let data = std::fs::read(f).unwrap();
        h.one(&data);
        // A budget, not a sample: the corpus is sized to replay in a few seconds, and a
        // replay that slow means something regressed.
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "replay too slow at {}",
            f.display()
        );
    }
}
