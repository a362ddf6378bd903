//! The fuzz targets' invariants on stable Rust: replay the checked-in seed corpora
//! (`fuzz/corpus/decode_request/` for text and meta, `fuzz/corpus/decode_binary/` for the
//! binary protocol), then mutate them with a fixed-seed generator for a bounded number of
//! rounds. `cargo +nightly fuzz run decode_request` (or `decode_binary`) explores further.

use memkit_protocol::check::{fuzz_binary, fuzz_one};
use memkit_testkit::fuzz::{Rng, corpus as seeds};

fn corpus() -> Vec<Vec<u8>> {
    seeds("decode_request")
}

const INTERESTING: &[&[u8]] = &[
    b" ",
    b"\r\n",
    b"\n",
    b"\r",
    b"\0",
    b"noreply",
    b"0",
    b"-1",
    b"4294967297",
    b"2000000",
    b"b",
    b"q",
    b"O",
    b"Mx",
    b"get ",
    b"ms k 1 ",
    b"HTTP/",
    b"99999999999999999999",
];

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut v = seeds[rng.below(seeds.len())].clone();
    for _ in 0..=rng.below(4) {
        let at = rng.below(v.len() + 1);
        match rng.below(5) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] = rng.next_u64() as u8;
            }
            1 => {
                let s = INTERESTING[rng.below(INTERESTING.len())];
                v.splice(at..at, s.iter().copied());
            }
            2 if at < v.len() => {
                let end = (at + rng.below(8)).min(v.len());
                v.drain(at..end);
            }
            3 => {
                let other = &seeds[rng.below(seeds.len())];
                v.splice(at..at, other.iter().copied());
            }
            _ => v.truncate(at),
        }
    }
    v
}

#[test]
fn corpus_replays_clean() {
    for seed in corpus() {
        fuzz_one(&seed);
    }
}

#[test]
fn mutations_hold_the_invariants() {
    let seeds = corpus();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // Bounded by count, not wall time, so the test is deterministic (about a second).
    for _ in 0..20_000 {
        let input = mutate(&mut rng, &seeds);
        fuzz_one(&input);
    }
}

#[test]
fn binary_corpus_replays_clean() {
    for seed in seeds("decode_binary") {
        fuzz_binary(&seed);
    }
}

#[test]
fn binary_mutations_hold_the_invariants() {
    let seeds = seeds("decode_binary");
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for _ in 0..20_000 {
        let mut input = mutate(&mut rng, &seeds);
        // Binary frames are mostly lengths: also flip bits of the header fields.
        if !input.is_empty() {
            let i = rng.below(input.len().min(24));
            input[i] ^= 1 << rng.below(8);
        }
        fuzz_binary(&input);
    }
}
