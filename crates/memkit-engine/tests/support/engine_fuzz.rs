//! The engine-vs-model check on one fuzz input, shared by the cargo-fuzz target
//! (`fuzz/fuzz_targets/engine_model.rs` includes this file) and the stable replay test
//! (`tests/fuzz_replay.rs`), so both assert exactly the same thing.

use std::sync::{Arc, Mutex};

use memkit_engine::{Embedded, EngineConfig};
use memkit_testkit::fuzz::{FUZZ_KEYS, decode_ops};
use memkit_testkit::ops::{CompareOptions, Op, compare_with};
use memkit_types::ManualClock;
use memkit_types::blocking::block_on;

/// Runs the ops `data` decodes to on a 1 MiB one-shard engine (16 KiB segments, so large
/// values make it evict within a few dozen ops) and on the model, and panics at the first
/// divergence. Evicted keys reach the comparison through the engine's eviction hook.
pub fn engine_vs_model(data: &[u8]) {
    let ops = decode_ops(data);
    let clock = ManualClock::default();
    let cfg = EngineConfig {
        shards: Some(1),
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
    };
    if let Err(e) = block_on(compare_with(&store, &clock, &ops, &opts)) {
        // The whole program, numbered, so that a crash file can be read without a debugger.
        let listing: Vec<String> = ops
            .iter()
            .enumerate()
            .map(|(i, op)| format!("#{i} {}", short(op)))
            .collect();
        panic!(
            "engine and model diverge: {e}\nops:\n{}",
            listing.join("\n")
        );
    }
}

/// An op's `Debug` with a large value shown as its length and first bytes.
fn short(op: &Op) -> String {
    match op {
        Op::Store { value, .. } if value.len() > 16 => {
            let mut op = op.clone();
            if let Op::Store { value: v, .. } = &mut op {
                v.truncate(8);
            }
            format!("{op:?} (value: {} bytes)", value.len())
        }
        _ => format!("{op:?}"),
    }
}
