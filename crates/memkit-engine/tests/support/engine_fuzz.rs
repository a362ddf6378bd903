//! The engine-vs-model check on one fuzz input, shared by the cargo-fuzz target
//! (`fuzz/fuzz_targets/engine_model.rs` includes this file) and the stable replay test
//! (`tests/fuzz_replay.rs`), so both assert exactly the same thing.

use std::sync::{Arc, Mutex};

use memkit_engine::{Embedded, EngineConfig, EvictionPolicy};
use memkit_testkit::fuzz::{FUZZ_KEYS, decode_ops};
use memkit_testkit::ops::{CompareOptions, compare_with, short};
use memkit_types::ManualClock;
use memkit_types::blocking::block_on;

/// `-I` for the fuzzed engine and the model (see [`engine_vs_model`]).
const ITEM_SIZE_MAX: usize = 256 << 10;

/// Runs the ops `data` decodes to on a 1 MiB one-shard engine (16 KiB segments, so large
/// values make it evict within a few dozen ops) and on the model, and panics at the first
/// divergence. Evicted keys reach the comparison through the engine's eviction hook.
///
/// Items are limited to 256 KiB (`-I`): with items up to the whole budget an append can
/// rightly fail for want of memory (memcached's "out of memory storing object"), which the
/// model cannot predict; a quarter of the budget always fits once the rest is evicted.
///
/// The ops run twice, once under each eviction policy: what a policy evicts differs, and
/// the model is told either way, but every other reply must be the same.
pub fn engine_vs_model(data: &[u8]) {
    let ops = decode_ops(data);
    for policy in [EvictionPolicy::S3Fifo, EvictionPolicy::Sieve] {
        engine_vs_model_under(&ops, policy);
    }
}

fn engine_vs_model_under(ops: &[memkit_testkit::ops::Op], policy: EvictionPolicy) {
    let clock = ManualClock::default();
    let cfg = EngineConfig {
        shards: Some(1),
        item_size_max: ITEM_SIZE_MAX,
        eviction: policy,
        ..EngineConfig::with_memory(1 << 20)
    };
    let store = Embedded::new(cfg.clock(Arc::new(clock.clone())));
    let evicted: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
    let sink = evicted.clone();
    store
        .engine()
        .set_evict_hook(move |e| sink.lock().unwrap().push(e.key.to_vec()));
    let drain = || std::mem::take(&mut *evicted.lock().unwrap());
    let opts = CompareOptions {
        keys: &FUZZ_KEYS,
        evicted: Some(&drain),
        item_size_max: ITEM_SIZE_MAX,
        ignore_fetched: false,
    };
    if let Err(e) = block_on(compare_with(&store, &clock, ops, &opts, |_| {})) {
        // The whole program, numbered, so that a crash file can be read without a debugger.
        let listing: Vec<String> = ops
            .iter()
            .enumerate()
            .map(|(i, op)| format!("#{i} {}", short(op)))
            .collect();
        panic!(
            "engine ({policy:?}) and model diverge: {e}\nops:\n{}",
            listing.join("\n")
        );
    }
}
