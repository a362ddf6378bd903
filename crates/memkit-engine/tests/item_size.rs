//! The item size rule at its boundary, as the engine applies it: the largest value that fits
//! at `-I 1m` with a 250-byte key is stored, one byte more is refused. The decoder's side of
//! the same boundary is pinned in memkit-protocol's tests/item_size.rs; both call
//! `memkit_types::item_fits`.

use memkit_engine::{Engine, EngineConfig};
use memkit_types::{DEFAULT_ITEM_SIZE_MAX, Error, Exptime, MAX_KEY_LEN, StoreMode, StoreOptions};

/// 1 MiB - 56 (header and CAS) - 251 (key and NUL) - 2 (`\r\n`).
const LARGEST_AT_1M_250B_KEY: usize = 1_048_267;

fn engine() -> Engine {
    let cfg = EngineConfig::with_memory(16 << 20);
    assert_eq!(cfg.item_size_max, DEFAULT_ITEM_SIZE_MAX);
    Engine::new(cfg)
}

fn set(e: &Engine, key: &[u8], len: usize, flags: u32) -> memkit_types::Result<()> {
    let opts = StoreOptions::new(StoreMode::Set, flags, Exptime::NEVER);
    e.store(key, &vec![b'v'; len], &opts).map(|_| ())
}

#[test]
fn the_largest_value_at_one_megabyte_is_stored_and_one_byte_more_refused() {
    let e = engine();
    let key = [b'k'; MAX_KEY_LEN];
    assert!(e.item_fits(MAX_KEY_LEN, LARGEST_AT_1M_250B_KEY, 0));
    assert!(!e.item_fits(MAX_KEY_LEN, LARGEST_AT_1M_250B_KEY + 1, 0));
    set(&e, &key, LARGEST_AT_1M_250B_KEY, 0).unwrap();
    assert_eq!(
        set(&e, &key, LARGEST_AT_1M_250B_KEY + 1, 0),
        Err(Error::TooLarge)
    );
}

#[test]
fn nonzero_flags_cost_four_bytes() {
    let e = engine();
    let key = [b'k'; MAX_KEY_LEN];
    set(&e, &key, LARGEST_AT_1M_250B_KEY - 4, 1).unwrap();
    assert_eq!(
        set(&e, &key, LARGEST_AT_1M_250B_KEY - 3, 1),
        Err(Error::TooLarge)
    );
}
