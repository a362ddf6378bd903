//! `cargo +nightly fuzz run decode_binary`: the binary protocol's decoder against arbitrary
//! bytes.
//!
//! The invariants live in `memkit_protocol::check::fuzz_binary` so that the stable test
//! `crates/memkit-protocol/tests/fuzz_replay.rs` asserts exactly the same ones.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    memkit_protocol::check::fuzz_binary(data);
});
