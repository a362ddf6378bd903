//! The engine-vs-model fuzz target's check on stable Rust: replays the checked-in corpus
//! (`fuzz/corpus/engine_model/`), then mutates it with a fixed-seed generator for a bounded
//! number of rounds. `cargo +nightly fuzz run engine_model` explores further.

#[path = "support/engine_fuzz.rs"]
mod engine_fuzz;

use engine_fuzz::engine_vs_model;
use memkit_testkit::fuzz::Rng;

fn corpus() -> Vec<Vec<u8>> {
    memkit_testkit::fuzz::corpus("engine_model")
}

/// `MEMKIT_FUZZ_INPUT=path cargo test -p memkit-engine --test fuzz_replay one_input`
/// replays one file (a crash artifact, say) with the full op listing on failure.
#[test]
fn one_input() {
    if let Ok(path) = std::env::var("MEMKIT_FUZZ_INPUT") {
        engine_vs_model(&std::fs::read(path).unwrap());
    }
}

#[test]
fn corpus_replays_clean() {
    for seed in corpus() {
        engine_vs_model(&seed);
    }
}

#[test]
fn mutations_of_the_corpus_agree_too() {
    let seeds = corpus();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // Bounded by count, not wall time: deterministic, a few seconds in a debug build.
    for _ in 0..300 {
        let mut v = seeds[rng.below(seeds.len())].clone();
        for _ in 0..=rng.below(4) {
            let at = rng.below(v.len() + 1);
            match rng.below(4) {
                0 if !v.is_empty() => {
                    let i = rng.below(v.len());
                    v[i] = rng.next_u64() as u8;
                }
                1 => {
                    // Splice in part of another seed: ops recombine.
                    let o = &seeds[rng.below(seeds.len())];
                    let from = rng.below(o.len() + 1);
                    let to = (from + rng.below(64)).min(o.len());
                    v.splice(at..at, o[from..to].iter().copied());
                }
                2 if at < v.len() => {
                    let end = (at + rng.below(8)).min(v.len());
                    v.drain(at..end);
                }
                _ => v.truncate(at),
            }
        }
        engine_vs_model(&v);
    }
}
