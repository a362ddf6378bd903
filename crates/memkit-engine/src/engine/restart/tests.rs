//! Crafted and mutated warm restart files: whatever a file says, a restore checks its sizes
//! and counts against its length before it allocates anything from them, and either brings
//! back what is valid or starts empty, without a panic.

use std::path::PathBuf;
use std::sync::Arc;

use memkit_types::{Exptime, GetOptions, ManualClock, StoreMode, StoreOptions};
use proptest::prelude::*;

use super::*;

const SEED: u64 = 0x5eed_0f7e_5700;
const NOW: u64 = 1_700_000_000;

fn config(shards: usize) -> EngineConfig {
    EngineConfig {
        shards: Some(shards),
        ..EngineConfig::with_memory(8 << 20).clock(Arc::new(ManualClock::new(NOW)))
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("memkit-crafted-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// A record as `shard::restart` writes it, with no expiry, flags or bits.
fn record(key: &[u8], value: &[u8], seq: u64) -> Vec<u8> {
    let mut r = vec![0, key.len() as u8];
    r.extend_from_slice(&(value.len() as u32).to_le_bytes());
    r.extend_from_slice(&0u32.to_le_bytes());
    r.extend_from_slice(&0u64.to_le_bytes());
    r.extend_from_slice(&seq.to_le_bytes());
    r.extend_from_slice(key);
    r.extend_from_slice(value);
    r
}

/// A file whose sections hold `sections` (item count, records), checksums right, after
/// `edit` has changed the header's numbers.
fn file(sections: &[(u64, Vec<u8>)], edit: impl FnOnce(&mut FileHeader)) -> Vec<u8> {
    let cfg = config(sections.len());
    let mut at = header_len(sections.len()) as u64;
    let secs = sections
        .iter()
        .map(|(items, b)| {
            let s = Section {
                offset: at,
                len: b.len() as u64,
                items: *items,
                seq: 100,
                flush_at_unix: 0,
                index_capacity: 0,
                crc: crc32fast::hash(b),
            };
            at += b.len() as u64;
            s
        })
        .collect();
    let mut header = FileHeader {
        memory_limit: cfg.memory_limit as u64,
        item_size_max: cfg.item_size_max as u64,
        hash_seed: SEED,
        saved_at_unix: NOW,
        items: sections.iter().map(|s| s.0).sum(),
        data_bytes: sections.iter().map(|s| s.1.len() as u64).sum(),
        sections: secs,
    };
    edit(&mut header);
    let mut out = header.encode();
    for (_, b) in sections {
        out.extend_from_slice(b);
    }
    out
}

/// Restores `bytes` into an engine of `shards` shards; checks that it works afterwards
/// (a write and a read) and that its index is no larger than its memory.
fn restore_bytes(name: &str, shards: usize, bytes: &[u8]) -> (Engine, Result<u64, String>) {
    let path = scratch(name);
    std::fs::write(&path, bytes).unwrap();
    let (e, r) = Engine::warm_restore(config(shards), &path);
    let r = r.map(|r| r.items).map_err(|err| err.to_string());
    assert!(
        !matches!(&r, Err(m) if m.contains("panicked")),
        "{name}: {r:?}"
    );
    let opts = StoreOptions::new(StoreMode::Set, 0, Exptime::NEVER);
    e.store(b"after-the-restore", b"ok", &opts).unwrap();
    let got = e.get(b"after-the-restore", &GetOptions::default());
    assert_eq!(&got.unwrap().unwrap().value[..], b"ok");
    let st = e.stats();
    assert!(st.index_bytes <= st.limit_maxbytes, "{name}: {st:?}");
    if r.is_err() {
        assert_eq!(st.counters.curr_items, 1, "{name}: restores nothing");
    }
    (e, r)
}

fn three() -> Vec<u8> {
    [
        record(b"a", b"the first", 10),
        record(b"bb", b"the second", 11),
        record(b"ccc", b"the third", 12),
    ]
    .concat()
}

#[test]
fn a_crafted_file_with_valid_records_restores_them() {
    let (e, r) = restore_bytes("valid", 1, &file(&[(3, three())], |_| {}));
    assert_eq!(r, Ok(3));
    let got = e.get(b"ccc", &GetOptions::default()).unwrap().unwrap();
    assert_eq!(&got.value[..], b"the third");
}

#[test]
fn a_huge_index_capacity_is_not_allocated() {
    for capacity in [u64::MAX, 1 << 40, 1 << 33] {
        let bytes = file(&[(3, three())], |h| h.sections[0].index_capacity = capacity);
        let (_, r) = restore_bytes("capacity", 1, &bytes);
        assert_eq!(r, Ok(3), "index capacity {capacity}");
    }
}

/// A record of one byte whose head says its value is `vlen` bytes long.
fn value_of_length(vlen: u32) -> Vec<u8> {
    let mut r = record(b"k", b"v", 1);
    r[2..6].copy_from_slice(&vlen.to_le_bytes());
    file(&[(1, r)], |_| {})
}

#[test]
fn counts_and_sizes_that_do_not_fit_the_file_restore_nothing() {
    let body = three();
    let one = |edit: fn(&mut FileHeader)| file(&[(3, body.clone())], edit);
    let two = |edit: fn(&mut FileHeader)| file(&[(3, body.clone()), (0, Vec::new())], edit);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "more items than bytes",
            one(|h| (h.sections[0].items, h.items) = (u64::MAX, u64::MAX)),
            "claims more items",
        ),
        (
            // Half of 2^64 each: the sum wraps to the 0 the header says.
            "item counts that overflow",
            two(|h| {
                h.sections[0].items = 1 << 63;
                h.sections[1].items = 1 << 63;
                h.items = 0;
            }),
            "claims more items",
        ),
        (
            "data bytes that overflow",
            one(|h| h.data_bytes = u64::MAX - 10),
            "truncated",
        ),
        (
            "a section longer than the file",
            one(|h| h.sections[0].len = u64::MAX),
            "truncated",
        ),
        (
            "sections that overflow",
            two(|h| {
                h.sections[0].len = u64::MAX - 20;
                h.sections[1].offset = h.sections[0].offset.wrapping_add(u64::MAX - 20);
            }),
            "misplaced",
        ),
        (
            "one item too many",
            one(|h| (h.sections[0].items, h.items) = (4, 4)),
            "runs past the end",
        ),
        (
            "one item too few",
            one(|h| (h.sections[0].items, h.items) = (2, 2)),
            "bytes after the last record",
        ),
        (
            "counts that do not add up",
            one(|h| h.items = 2),
            "do not add up",
        ),
        (
            "a write sequence past any shard's",
            one(|h| h.sections[0].seq = u64::MAX),
            "write sequence",
        ),
        (
            "a record's sequence past any shard's",
            file(&[(1, record(b"k", b"v", u64::MAX))], |_| {}),
            "no save writes",
        ),
        (
            "an empty key",
            file(&[(1, record(b"", b"v", 1))], |_| {}),
            "no save writes",
        ),
        (
            "a value longer than -I",
            value_of_length(u32::MAX),
            "no save writes",
        ),
        (
            "a value past the section",
            value_of_length(1000),
            "runs past the end",
        ),
    ];
    for (what, bytes, reason) in cases {
        let shards = u32_at(&bytes, 12) as usize;
        let (_, r) = restore_bytes("counts", shards, &bytes);
        let err = r.expect_err(what);
        assert!(err.contains(reason), "{what}: {err}");
    }
}

#[test]
fn a_file_cut_anywhere_restores_nothing() {
    let bytes = file(&[(3, three())], |_| {});
    for cut in 0..bytes.len() {
        let (_, r) = restore_bytes("cut", 1, &bytes[..cut]);
        assert!(r.is_err(), "cut at {cut}: {r:?}");
    }
}

/// A file saved by an engine of two shards: mixed value sizes (one out of line), TTLs,
/// flags, an explicit CAS.
fn saved() -> Vec<u8> {
    let e = Engine::with_hash_seed(config(2), SEED);
    for i in 0..40usize {
        let mut opts = StoreOptions::new(StoreMode::Set, i as u32 % 3, Exptime::NEVER);
        if i % 4 == 1 {
            opts.exptime = Exptime(1000);
        }
        if i == 7 {
            opts.new_cas = Some(1234);
        }
        let len = if i == 5 { 40_000 } else { i * 13 };
        e.store(format!("key{i}").as_bytes(), &vec![i as u8; len], &opts)
            .unwrap();
    }
    let path = scratch("saved");
    e.warm_save(&path).unwrap();
    std::fs::read(&path).unwrap()
}

/// Sets the header's and every in-bounds section's checksum to match their bytes, so that
/// a mutation reaches the checks behind them.
fn fix_checksums(b: &mut [u8]) {
    if b.len() < FIXED {
        return;
    }
    let shards = u32_at(b, 12) as usize;
    if !(1..=4096).contains(&shards) || header_len(shards) > b.len() {
        return;
    }
    for i in 0..shards {
        let at = FIXED + i * SECTION;
        let (off, len) = (u64_at(b, at), u64_at(b, at + 8));
        if let Some(end) = off.checked_add(len).filter(|&end| end <= b.len() as u64) {
            let crc = crc32fast::hash(&b[off as usize..end as usize]);
            b[at + 48..at + 52].copy_from_slice(&crc.to_le_bytes());
        }
    }
    let body = header_len(shards) - 4;
    let crc = crc32fast::hash(&b[..body]);
    b[body..body + 4].copy_from_slice(&crc.to_le_bytes());
}

#[derive(Debug, Clone)]
enum Mutation {
    /// A byte anywhere, xor'd.
    Flip(usize, u8),
    /// A little-endian u64 at a header field or anywhere, set to an extreme value.
    Word(usize, u64),
    Truncate(usize),
    Extend(Vec<u8>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let word = prop_oneof![
        Just(0u64),
        Just(1),
        Just(u64::MAX),
        Just(1 << 63),
        Just(1 << 32),
        Just(1 << 40),
        any::<u64>(),
    ];
    // The header's u64 fields, the first section's, or anywhere.
    let place = prop_oneof![
        (2usize..8).prop_map(|i| i * 8),
        (0usize..6).prop_map(|i| FIXED + i * 8),
        any::<usize>(),
    ];
    prop_oneof![
        4 => (any::<usize>(), 1u8..=255).prop_map(|(i, x)| Mutation::Flip(i, x)),
        4 => (place, word).prop_map(|(i, v)| Mutation::Word(i, v)),
        1 => any::<usize>().prop_map(Mutation::Truncate),
        1 => proptest::collection::vec(any::<u8>(), 1..64).prop_map(Mutation::Extend),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(160))]

    #[test]
    fn a_mutated_file_restores_what_is_valid_or_nothing(
        muts in proptest::collection::vec(mutation(), 1..3),
        fix in any::<bool>(),
    ) {
        let good = saved();
        let mut b = good.clone();
        for m in &muts {
            match m {
                Mutation::Flip(i, x) if !b.is_empty() => {
                    let n = b.len();
                    b[i % n] ^= x;
                }
                Mutation::Word(i, v) if b.len() >= 8 => {
                    let at = if *i < header_len(2) { *i } else { i % (b.len() - 7) };
                    let at = at.min(b.len() - 8);
                    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
                }
                Mutation::Truncate(n) => {
                    let n = n % (b.len() + 1);
                    b.truncate(n);
                }
                Mutation::Extend(more) => b.extend_from_slice(more),
                _ => {}
            }
        }
        if fix {
            fix_checksums(&mut b);
        }
        let (_, r) = restore_bytes("mutated", 2, &b);
        if let Ok(items) = r {
            prop_assert!(items <= 40, "{items} items from a file of 40");
        }
    }
}
