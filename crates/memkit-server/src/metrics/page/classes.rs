//! Memory by size class, seed 003's histogram: items and bytes per class as memkitd holds
//! them (`stats items`' `number` and `mem_requested`), beside what memcached's slab classes
//! would spend on the same items.
//!
//! memcached stores an item in `sizeof(item)` (48 bytes) + 8 of CAS + key + 1 + value + 2
//! (its `\r\n`) + 4 when the client flags are not 0, rounded up to the chunk of the
//! smallest slab class that holds it: 96 bytes growing by 1.25 (8-byte aligned) up to
//! `slab_chunk_max` (512 KiB); a larger item takes chunks of that size and one for the
//! rest. Chunks are cut from 1 MiB pages, one class per page. So that figure needs each
//! item's key and value lengths: it is computed over a sample, the first [`SAMPLE`] items
//! a fresh dump lists (in the order of their keys' hashes, so the sample is as good as
//! random), and scaled to each memkitd class's item count. A cache of at most [`SAMPLE`]
//! items is counted whole (`"exact": true`).

use std::collections::BTreeMap;

use memkit_engine::DumpCursor;

use super::json::Json;
use crate::state::Shared;

/// Items sampled for memcached's figure.
pub const SAMPLE: usize = 4096;
/// memcached's slab page.
pub const PAGE: u64 = 1 << 20;
/// memcached's default `slab_chunk_max`: half a page.
pub const CHUNK_MAX: u64 = PAGE / 2;

/// Bytes memcached 1.6 needs for an item, before rounding to a chunk.
pub fn memcached_item_size(key_len: usize, value_len: usize, flags: u32) -> u64 {
    (48 + 8 + key_len + 1 + value_len + 2 + if flags != 0 { 4 } else { 0 }) as u64
}

/// memcached's default slab classes' chunk sizes: 96, 120, 152, ... 394840, then
/// [`CHUNK_MAX`]. As its `slabs_init`, a class is added while it is below `CHUNK_MAX / 1.25`.
pub fn memcached_classes() -> Vec<u64> {
    let mut sizes = Vec::new();
    let mut size = 96u64;
    while (size as f64) < CHUNK_MAX as f64 / 1.25 {
        sizes.push(size);
        size = ((size as f64 * 1.25) as u64).next_multiple_of(8);
    }
    sizes.push(CHUNK_MAX);
    sizes
}

/// The class (chunk size) an item of `size` bytes is counted in, and the bytes of chunks
/// it takes: one chunk, or for an item past [`CHUNK_MAX`] whole chunks of that size and
/// the smallest chunk that holds the rest.
pub fn memcached_cost(classes: &[u64], size: u64) -> (u64, u64) {
    let fit = |n: u64| {
        classes
            .iter()
            .copied()
            .find(|&c| c >= n)
            .unwrap_or(CHUNK_MAX)
    };
    if size <= CHUNK_MAX {
        let c = fit(size);
        return (c, c);
    }
    let rest = size % CHUNK_MAX;
    let tail = if rest == 0 { 0 } else { fit(rest) };
    (CHUNK_MAX, size / CHUNK_MAX * CHUNK_MAX + tail)
}

/// One row of the histogram, by chunk size.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Row {
    items: u64,
    bytes: u64,
    mc_items: f64,
    mc_bytes: f64,
}

/// The histogram as JSON: `{"classes": [{"chunk", "items", "bytes", "mc_items",
/// "mc_bytes"}...], "items", "bytes", "mc_bytes", "mc_pages", "page", "sampled", "exact"}`.
/// Blocks for the crawl of the sample (a few short shard locks): call it off the runtime.
pub fn json(sh: &Shared) -> String {
    let stats = sh.engine.stats();
    let mc = memcached_classes();
    // Per memkitd class: how many sampled items, and where memcached would put them.
    let mut sampled: Vec<u64> = vec![0; stats.classes.len()];
    let mut to_mc: BTreeMap<(usize, u64), (u64, u64)> = BTreeMap::new();
    let (mut n, mut offset) = (0usize, 0i64);
    let mut cursor = DumpCursor::default();
    while n < SAMPLE
        && sh.engine.crawl(&mut cursor, (SAMPLE - n).min(64), |m| {
            let class = crate::stats::class_id(sh, m.size) as usize - 1;
            let size = memcached_item_size(m.key.len(), m.value_len, m.flags);
            let (chunk, cost) = memcached_cost(&mc, size);
            sampled[class] += 1;
            let e = to_mc.entry((class, chunk)).or_default();
            e.0 += 1;
            e.1 += cost;
            offset += size as i64 - m.size as i64;
            n += 1;
        })
    {}
    let exact = cursor.is_done(&sh.engine);
    // What memcached adds to memkitd's stored size, on average, for a class not sampled.
    let offset = if n > 0 { offset / n as i64 } else { 54 };
    let mut rows: BTreeMap<u64, Row> = BTreeMap::new();
    for (i, c) in stats
        .classes
        .iter()
        .enumerate()
        .filter(|(_, c)| c.items > 0)
    {
        let r = rows.entry(u64::from(c.size)).or_default();
        r.items += c.items;
        r.bytes += c.bytes;
        if sampled[i] == 0 {
            let mean = (c.bytes / c.items) as i64 + offset;
            let (chunk, cost) = memcached_cost(&mc, mean.max(1) as u64);
            let r = rows.entry(chunk).or_default();
            r.mc_items += c.items as f64;
            r.mc_bytes += (c.items * cost) as f64;
        }
    }
    for ((class, chunk), (count, cost)) in to_mc {
        let c = &stats.classes[class];
        let scale = c.items as f64 / sampled[class] as f64;
        let r = rows.entry(chunk).or_default();
        r.mc_items += count as f64 * scale;
        r.mc_bytes += cost as f64 * scale;
    }
    write(&rows, n, exact)
}

fn write(rows: &BTreeMap<u64, Row>, sampled: usize, exact: bool) -> String {
    let mut j = Json::new();
    j.open().key("classes").open_array();
    let (mut items, mut bytes, mut mc_bytes, mut mc_pages) = (0, 0, 0.0, 0.0);
    for (chunk, r) in rows
        .iter()
        .filter(|(_, r)| r.items > 0 || r.mc_items >= 0.5)
    {
        j.open().field_u("chunk", *chunk);
        j.field_u("items", r.items).field_u("bytes", r.bytes);
        j.field_u("mc_items", r.mc_items.round() as u64);
        j.field_u("mc_bytes", r.mc_bytes.round() as u64);
        j.close();
        items += r.items;
        bytes += r.bytes;
        mc_bytes += r.mc_bytes;
        mc_pages += (r.mc_bytes / PAGE as f64).ceil();
    }
    j.close_array();
    j.field_u("items", items).field_u("bytes", bytes);
    j.field_u("mc_bytes", mc_bytes.round() as u64);
    j.field_u("mc_pages", mc_pages as u64).field_u("page", PAGE);
    j.field_u("sampled", sampled as u64).key("exact").b(exact);
    j.close();
    j.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// memcached 1.6.18 with the default -f 1.25 -n 48 (`memcached -vv`): 39 classes, 96,
    /// 120, 152, 192, 240, 304, ..., 315872, 394840, 524288; a 20-byte key with a 100-byte value and
    /// flags 0 takes 179 bytes, a chunk of 192.
    #[test]
    fn memcached_arithmetic() {
        let c = memcached_classes();
        assert_eq!(&c[..6], &[96, 120, 152, 192, 240, 304]);
        assert_eq!(c.len(), 39);
        assert_eq!(&c[36..], &[315872, 394840, 524288]);
        assert_eq!(memcached_item_size(20, 100, 0), 179);
        assert_eq!(memcached_item_size(20, 100, 1), 183);
        assert_eq!(memcached_cost(&c, 179), (192, 192));
        assert_eq!(memcached_cost(&c, 96), (96, 96));
        assert_eq!(memcached_cost(&c, 97), (120, 120));
        assert_eq!(
            memcached_cost(&c, CHUNK_MAX * 2 + 100),
            (CHUNK_MAX, CHUNK_MAX * 2 + 120)
        );
    }
}
