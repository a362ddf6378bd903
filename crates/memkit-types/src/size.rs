//! memcached's item size rule (`item_size_ok` in items.c), stated once: the decoder applies
//! it before reading a value off the wire, the engine when a value reaches it by any path
//! (the embedded API, an append that grows an item). Both must refuse exactly the items
//! memcached refuses, so both call [`item_fits`].

/// What memcached counts against `-I` beyond key and value: `sizeof(item)` (48 bytes on a
/// 64-bit build) plus the 8-byte CAS that `item_size_ok` adds when CAS is on (memcached's
/// default; memkit always keeps CAS).
pub const ITEM_HEADER: usize = 48 + 8;

/// The bytes memcached's `item_size_ok` counts for an item: header, key and its NUL, 4
/// bytes for nonzero client flags, the value and its `\r\n`. Saturates instead of
/// wrapping, as a length may come straight from an untrusted header.
pub const fn item_total(key_len: usize, value_len: usize, flags: u32) -> usize {
    let flags_len = if flags == 0 { 0 } else { 4 };
    ITEM_HEADER
        .saturating_add(key_len)
        .saturating_add(1 + flags_len + 2)
        .saturating_add(value_len)
}

/// Whether memcached, started with `-I item_size_max`, would store an item of this shape.
pub const fn item_fits(item_size_max: usize, key_len: usize, value_len: usize, flags: u32) -> bool {
    item_total(key_len, value_len, flags) <= item_size_max
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DEFAULT_ITEM_SIZE_MAX, MAX_KEY_LEN};

    /// At `-I 1m` with a 250-byte key: 1 MiB - 56 - 251 - 2 bytes of value fit, and 4 fewer
    /// with nonzero flags. The same numbers pin the decoder and the engine in their tests.
    #[test]
    fn the_largest_item_at_one_megabyte() {
        let max = DEFAULT_ITEM_SIZE_MAX;
        assert!(item_fits(max, MAX_KEY_LEN, 1_048_267, 0));
        assert!(!item_fits(max, MAX_KEY_LEN, 1_048_268, 0));
        assert!(item_fits(max, MAX_KEY_LEN, 1_048_263, 1));
        assert!(!item_fits(max, MAX_KEY_LEN, 1_048_264, 1));
    }

    #[test]
    fn an_untrusted_length_saturates() {
        assert_eq!(item_total(usize::MAX, 1, 0), usize::MAX);
        assert!(!item_fits(usize::MAX - 1, 1, usize::MAX, 1));
    }
}
