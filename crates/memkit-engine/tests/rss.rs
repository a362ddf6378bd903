//! The memory bound, measured the way an operator sees it: the process's resident set.
//!
//! This file holds a single test so that the test binary's RSS is the engine's alone (plus
//! the harness's few MiB). It churns random-size sets from 1 byte to 1 MiB — overwrites,
//! deletes, values inline in segments and out of line — and samples VmRSS all along.

use memkit_engine::{Engine, EngineConfig};
use memkit_types::{Exptime, StoreMode, StoreOptions};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn rss_bytes() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("Linux /proc");
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .expect("VmRSS");
    let kb: usize = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

#[test]
fn rss_stays_within_the_budget_under_random_size_churn() {
    const MB: usize = 1 << 20;
    let budget = 64 * MB;
    let bound = budget + budget / 10 + 32 * MB;
    let engine = Engine::new(EngineConfig::with_memory(budget));
    let source: Vec<u8> = (0..MB as u32).map(|i| (i % 251) as u8).collect();
    let mut rng = SmallRng::seed_from_u64(0x5eed);
    let opts = StoreOptions::new(StoreMode::Set, 0, Exptime::NEVER);
    let mut peak = 0;
    let mut sets = 0u64;
    let mut bytes_written = 0usize;
    for round in 0..3 {
        // Round 0: sizes uniform over 1 B..1 MiB (mostly large values); round 1: log-uniform
        // (mostly small ones, many items, the index grows); round 2: both mixed.
        for i in 0..12_000u32 {
            let log_uniform = round == 1 || (round == 2 && i % 2 == 0);
            let len = if log_uniform {
                (2f64.powf(rng.random_range(0.0..20.0)) as usize).clamp(1, MB - 512)
            } else {
                rng.random_range(1..MB - 512)
            };
            let key = format!("churn:{}", rng.random_range(0..40_000u32));
            if rng.random_ratio(1, 10) {
                let _ = engine.delete(key.as_bytes(), &Default::default());
            } else {
                engine
                    .store(key.as_bytes(), &source[..len], &opts)
                    .expect("evicting store");
                sets += 1;
                bytes_written += len;
            }
            if i % 200 == 0 {
                let rss = rss_bytes();
                peak = peak.max(rss);
                assert!(
                    rss <= bound,
                    "RSS {} MiB over the bound {} MiB",
                    rss / MB,
                    bound / MB
                );
            }
        }
    }
    let s = engine.stats();
    // Each shard may map three segments past its budget for the stubs of out-of-line values.
    let limit = budget + (s.shards * 3 * s.segment_size) as usize;
    assert!(s.mapped_bytes as usize <= limit);
    assert!(
        bytes_written > 20 * budget,
        "the churn went through the budget many times over"
    );
    assert!(s.counters.evictions > 0 && sets > 30_000);
    eprintln!(
        "peak RSS {:.1} MiB for a {} MiB budget (bound {:.1} MiB); {} sets, {} GiB written",
        peak as f64 / MB as f64,
        budget / MB,
        bound as f64 / MB as f64,
        sets,
        bytes_written >> 30
    );
}
