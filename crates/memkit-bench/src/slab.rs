//! memcached 1.6's memory arithmetic, to say how many items `memcached -m N` would hold.
//!
//! An item costs `sizeof(item)` (48 bytes on 64-bit) + 8 bytes of CAS + key + 1 (the key's
//! NUL) + value + 2 (the stored "\r\n"); client flags of 0 take no room. It is stored in the
//! smallest slab class whose chunk holds it. Classes start at 96 bytes and grow by a factor
//! of 1.25, each rounded up to 8 bytes, up to `slab_chunk_max` (half the 1 MiB page). Memory
//! is handed to classes one 1 MiB page at a time, each page cut into `page / chunk` chunks.
//! Not counted against `-m` by memcached (so not here either): its hash table (8 bytes per
//! bucket, grown to 1.5 buckets per item) and per-connection buffers.

/// memcached's slab page (`-I` default 1 MiB).
pub const PAGE: usize = 1 << 20;
/// `sizeof(item)` on a 64-bit build.
pub const ITEM_HEADER: usize = 48;
/// The CAS field (on unless `-C`).
pub const CAS: usize = 8;

/// Bytes memcached needs for one item (before slab rounding).
pub fn item_size(key_len: usize, value_len: usize) -> usize {
    ITEM_HEADER + CAS + key_len + 1 + value_len + 2
}

/// The default slab classes' chunk sizes: 96, 120, 152, 192, 240, ... up to `PAGE / 2`.
pub fn class_sizes() -> Vec<usize> {
    let mut sizes = Vec::new();
    let mut size = 96usize;
    while size < PAGE / 2 {
        sizes.push(size);
        size = ((size as f64 * 1.25) as usize).next_multiple_of(8);
    }
    sizes.push(PAGE / 2);
    sizes
}

/// The chunk an item of `key_len` + `value_len` goes into.
pub fn chunk_size(key_len: usize, value_len: usize) -> usize {
    let need = item_size(key_len, value_len);
    class_sizes()
        .into_iter()
        .find(|&c| c >= need)
        .expect("items above half a page are chunked; not modelled")
}

/// Items of one shape that `memory` bytes of slab pages hold.
pub fn items_that_fit(memory: usize, key_len: usize, value_len: usize) -> usize {
    let chunk = chunk_size(key_len, value_len);
    (memory / PAGE) * (PAGE / chunk)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_memcached_defaults() {
        assert_eq!(&class_sizes()[..6], &[96, 120, 152, 192, 240, 304]);
        assert_eq!(item_size(20, 100), 179);
        assert_eq!(chunk_size(20, 100), 192);
        assert_eq!(chunk_size(16, 100), 192);
        assert_eq!(chunk_size(32, 100), 192);
        assert_eq!(items_that_fit(64 << 20, 20, 100), 64 * 5461);
    }
}
