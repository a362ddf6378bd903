//! `cargo +nightly fuzz run engine_model`: the engine against the reference model, on op
//! sequences decoded from the input (`memkit_testkit::fuzz::decode_ops`), with a 1 MiB
//! budget so that it evicts.
//!
//! The check is the file the stable replay test uses
//! (`crates/memkit-engine/tests/fuzz_replay.rs`), included here so both assert the same.
#![no_main]

#[path = "../../crates/memkit-engine/tests/support/engine_fuzz.rs"]
mod engine_fuzz;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    engine_fuzz::engine_vs_model(data);
});
