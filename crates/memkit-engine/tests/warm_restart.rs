//! Warm restart, the engine's side: `Engine::warm_save` then `Engine::warm_restore` on a
//! clock moved forward by the time the server was down. Every live item comes back with its
//! value, flags, CAS, remaining TTL (less the gap) and meta bits; a damaged, truncated,
//! foreign or mismatched file gives an empty, working engine and a reason; the file is used
//! once.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use memkit_engine::{Engine, EngineConfig, EvictionPolicy, WarmError};
use memkit_testkit::tempdir;
use memkit_types::{
    Clock, DeleteOptions, Exptime, GetOptions, ManualClock, StoreMode, StoreOptions, Ttl,
};

fn config(mb: usize, clock: &ManualClock) -> EngineConfig {
    EngineConfig::with_memory(mb << 20).clock(Arc::new(clock.clone()))
}

/// What a reader sees of an item.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    value: Vec<u8>,
    flags: u32,
    cas: u64,
    ttl: Ttl,
    stale: bool,
    fetched: bool,
}

/// A read that changes nothing (`mg ... u`): no fetched mark, no policy bump.
fn peek(e: &Engine, key: &[u8]) -> Option<Seen> {
    let opts = GetOptions {
        meta: true,
        no_bump: true,
        ..Default::default()
    };
    e.get(key, &opts).unwrap().map(|i| Seen {
        value: i.value.to_vec(),
        flags: i.flags,
        cas: i.cas,
        ttl: i.ttl.unwrap(),
        stale: i.stale,
        fetched: i.fetched.unwrap(),
    })
}

/// A value of `len` bytes of every byte value, `\r\n` and NULs included.
fn value(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i * 31 + j * 7) as u8).collect()
}

/// Fills `e` with `n` keys of mixed shapes, then rewrites, deletes, reads and invalidates
/// some, so the segments hold dead copies, moved items and every meta bit.
fn fill(e: &Engine, clock: &ManualClock, n: usize) {
    let now = clock.now_secs();
    for i in 0..n {
        let key = format!("key:{i}:{}", "x".repeat(i % 40));
        // Every 97th value is large enough to live out of line.
        let len = if i % 97 == 0 {
            20_000 + i % 5000
        } else {
            i % 300
        };
        let exptime = match i % 4 {
            0 => Exptime::NEVER,
            1 => Exptime(50),
            2 => Exptime(1000),
            _ => Exptime((now + 5000) as i64),
        };
        let flags = if i % 3 == 0 {
            0
        } else {
            (i as u32).wrapping_mul(2_654_435_761)
        };
        let mut opts = StoreOptions::new(StoreMode::Set, flags, exptime);
        if i % 50 == 0 {
            opts.new_cas = Some(1_000_000_000_000 + i as u64);
        }
        e.store(key.as_bytes(), &value(i, len), &opts).unwrap();
    }
    for i in (0..n).step_by(7) {
        let key = format!("key:{i}:{}", "x".repeat(i % 40));
        match i % 5 {
            0 => {
                e.delete(key.as_bytes(), &DeleteOptions::default()).unwrap();
            }
            1 => {
                let opts = StoreOptions::new(StoreMode::Append, 0, Exptime::NEVER);
                e.store(key.as_bytes(), b"+tail", &opts).unwrap();
            }
            2 => {
                e.get(key.as_bytes(), &GetOptions::default()).unwrap();
            }
            3 => {
                let opts = DeleteOptions {
                    invalidate: true,
                    ..Default::default()
                };
                e.delete(key.as_bytes(), &opts).unwrap();
            }
            _ => {
                e.touch(key.as_bytes(), Exptime(3000)).unwrap();
            }
        }
    }
}

fn snapshot(e: &Engine, n: usize) -> HashMap<Vec<u8>, Option<Seen>> {
    (0..n)
        .map(|i| {
            let key = format!("key:{i}:{}", "x".repeat(i % 40)).into_bytes();
            let seen = peek(e, &key);
            (key, seen)
        })
        .collect()
}

#[test]
fn every_live_item_comes_back_with_its_cas_flags_ttl_and_bits() {
    for policy in [EvictionPolicy::S3Fifo, EvictionPolicy::Sieve] {
        for clear in [false, true] {
            round_trip(policy, clear);
        }
    }
}

/// With `clear`, [`Engine::warm_save_and_clear`], which leaves the saved engine empty.
fn round_trip(policy: EvictionPolicy, clear: bool) {
    const N: usize = 20_000;
    let clock = ManualClock::default();
    let dir = tempdir("warm");
    let path = dir.path().join("cache");
    let cfg = || EngineConfig {
        eviction: policy,
        ..config(64, &clock)
    };
    let before = {
        let e = Engine::new(cfg());
        fill(&e, &clock, N);
        let before = snapshot(&e, N);
        let saved = match clear {
            false => e.warm_save(&path).unwrap(),
            true => e.warm_save_and_clear(&path).unwrap(),
        };
        let live = before.values().filter(|s| s.is_some()).count() as u64;
        assert_eq!(saved.items, live);
        assert_eq!(saved.bytes, std::fs::metadata(&path).unwrap().len());
        if clear {
            assert_cleared(&e, &before);
        } else {
            assert_eq!(e.stats().counters.curr_items, live);
        }
        before
    };
    clock.advance(100);
    let (e, r) = Engine::warm_restore(cfg(), &path);
    let r = r.unwrap();
    assert!(!path.exists(), "a snapshot is used once");
    let mut max_cas = 0;
    let (mut back, mut expired) = (0, 0);
    for (key, was) in &before {
        let Some(was) = was else {
            assert_eq!(peek(&e, key), None, "{key:?} was not live");
            continue;
        };
        match was.ttl {
            Ttl::Secs(s) if s <= 100 => {
                assert_eq!(peek(&e, key), None, "{key:?} expired during the gap");
                expired += 1;
            }
            ttl => {
                let mut want = was.clone();
                if let Ttl::Secs(s) = ttl {
                    want.ttl = Ttl::Secs(s - 100);
                }
                assert_eq!(peek(&e, key).as_ref(), Some(&want), "{key:?}");
                max_cas = max_cas.max(want.cas);
                back += 1;
            }
        }
    }
    assert_eq!((r.items, r.expired, r.dropped), (back, expired, 0));
    assert!(back > N as u64 / 2 && expired > 0 && r.gap_secs == 100);
    assert_eq!(e.stats().counters.curr_items, back);
    assert_eq!(
        e.stats().counters.total_items,
        0,
        "a restore is not a store"
    );
    // New writes get CAS values above every restored (derived) one, in every shard.
    let derived_max = before
        .values()
        .flatten()
        .map(|s| s.cas)
        .filter(|&c| c < 1_000_000_000_000)
        .max()
        .unwrap();
    for i in 0..64 {
        let opts = StoreOptions::new(StoreMode::Set, 0, Exptime::NEVER);
        let cas = e
            .store(format!("new:{i}").as_bytes(), b"v", &opts)
            .unwrap()
            .cas;
        assert!(cas > derived_max, "{cas} <= {derived_max}");
    }
    let (_, again) = Engine::warm_restore(cfg(), &path);
    assert!(matches!(again, Err(WarmError::Missing)), "{again:?}");
    // The restored shards keep working, past their memory limit: writes and evictions.
    let opts = StoreOptions::new(StoreMode::Set, 0, Exptime::NEVER);
    let big = value(7, 2000);
    for i in 0..50_000 {
        e.store(format!("more:{i}").as_bytes(), &big, &opts)
            .unwrap();
    }
    assert!(e.stats().counters.evictions > 0, "{policy:?}");
    assert_eq!(peek(&e, b"more:49999").unwrap().value, big);
}

/// Empty, its memory given back, and still working: a key written again gets a CAS above
/// the one it had (CAS values rise per shard).
fn assert_cleared(e: &Engine, before: &HashMap<Vec<u8>, Option<Seen>>) {
    let stats = e.stats();
    assert_eq!(stats.counters.curr_items, 0);
    assert_eq!(stats.segments, 0, "no segment left mapped");
    assert!(before.keys().all(|k| peek(e, k).is_none()));
    let opts = StoreOptions::new(StoreMode::Set, 0, Exptime::NEVER);
    let derived = before
        .iter()
        .filter_map(|(k, s)| Some((k, s.as_ref()?.cas)))
        .filter(|&(_, c)| c < 1_000_000_000_000);
    for (key, old) in derived.take(200) {
        let cas = e.store(key, b"v", &opts).unwrap().cas;
        assert!(cas > old, "{cas} <= {old}");
        e.delete(key, &DeleteOptions::default()).unwrap();
    }
}

#[test]
fn a_pending_delayed_flush_survives_the_restart() {
    let clock = ManualClock::default();
    let dir = tempdir("warm");
    let path = dir.path().join("cache");
    let e = Engine::new(config(8, &clock));
    let opts = StoreOptions::new(StoreMode::Set, 0, Exptime::NEVER);
    e.store(b"a", b"1", &opts).unwrap();
    e.flush_all(60);
    e.warm_save(&path).unwrap();
    clock.advance(10);
    let (e, r) = Engine::warm_restore(config(8, &clock), &path);
    assert_eq!(r.unwrap().items, 1);
    assert!(peek(&e, b"a").is_some());
    clock.advance(60);
    assert_eq!(peek(&e, b"a"), None, "flushed when the delay ran out");
}

/// Saves a small cache and returns the file's bytes (a restore consumes the file).
fn saved_bytes(clock: &ManualClock, path: &Path) -> Vec<u8> {
    let e = Engine::new(config(16, clock));
    fill(&e, clock, 3000);
    e.warm_save(path).unwrap();
    std::fs::read(path).unwrap()
}

fn restore_from(clock: &ManualClock, path: &Path, bytes: &[u8], mb: usize) -> Result<u64, String> {
    std::fs::write(path, bytes).unwrap();
    let (e, r) = Engine::warm_restore(config(mb, clock), path);
    assert!(!path.exists(), "removed whatever it held");
    match r {
        Ok(r) => Ok(r.items),
        Err(err) => {
            // Empty and working.
            assert_eq!(e.stats().counters.curr_items, 0);
            let opts = StoreOptions::new(StoreMode::Set, 0, Exptime::NEVER);
            e.store(b"after", b"ok", &opts).unwrap();
            assert_eq!(peek(&e, b"after").unwrap().value, b"ok");
            Err(err.to_string())
        }
    }
}

#[test]
fn damaged_foreign_or_mismatched_files_start_empty() {
    let clock = ManualClock::default();
    let dir = tempdir("warm");
    let path = dir.path().join("cache");
    let good = saved_bytes(&clock, &path);
    assert!(restore_from(&clock, &path, &good, 16).unwrap() > 0);
    let mut cases: Vec<(&str, Vec<u8>, &str)> = Vec::new();
    cases.push(("empty", Vec::new(), "truncated"));
    cases.push(("header only", good[..100].to_vec(), "truncated"));
    cases.push((
        "one byte short",
        good[..good.len() - 1].to_vec(),
        "truncated",
    ));
    let mut longer = good.clone();
    longer.push(0);
    cases.push(("one byte more", longer, "truncated"));
    for (what, at) in [
        ("flipped in the header", 20),
        ("flipped in the shard table", 70),
        ("flipped in the records", good.len() / 2),
        ("flipped at the end", good.len() - 1),
    ] {
        let mut b = good.clone();
        b[at] ^= 0x40;
        cases.push((what, b, "corrupted"));
    }
    let mut magic = good.clone();
    magic[..8].copy_from_slice(b"notours!");
    cases.push((
        "another format",
        magic,
        "is not a memkitd warm restart file",
    ));
    let mut version = good.clone();
    version[8] = 9;
    cases.push(("another version", version, "format version 9"));
    for (what, bytes, reason) in cases {
        let err = restore_from(&clock, &path, &bytes, 16).expect_err(what);
        assert!(err.contains(reason), "{what}: {err}");
    }
    let err = restore_from(&clock, &path, &good, 32).unwrap_err();
    assert_eq!(err, "was saved with -m 16 (now -m 32)");
    std::fs::write(&path, &good).unwrap();
    let cfg = EngineConfig {
        item_size_max: 2 << 20,
        ..config(16, &clock)
    };
    let (_, r) = Engine::warm_restore(cfg, &path);
    assert!(r.unwrap_err().to_string().contains("-I"));
}

#[test]
fn a_cut_short_save_leaves_nothing_to_restore() {
    let clock = ManualClock::default();
    let dir = tempdir("warm");
    let path = dir.path().join("cache");
    // A save interrupted before its rename leaves FILE.tmp; it is never read.
    let good = saved_bytes(&clock, &path);
    std::fs::remove_file(&path).unwrap();
    let tmp = path.with_file_name("cache.tmp");
    std::fs::write(&tmp, &good).unwrap();
    let (_, r) = Engine::warm_restore(config(16, &clock), &path);
    assert!(matches!(r, Err(WarmError::Missing)), "{r:?}");
    assert!(!tmp.exists(), "the leftover is removed");
}

#[test]
fn the_file_is_readable_by_its_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let clock = ManualClock::default();
    let dir = tempdir("warm");
    let path = dir.path().join("cache");
    let e = Engine::new(config(8, &clock));
    let opts = StoreOptions::new(StoreMode::Set, 0, Exptime::NEVER);
    e.store(b"secret", b"value", &opts).unwrap();
    // A world-readable leftover of a save cut short is not reused.
    let tmp = path.with_file_name("cache.tmp");
    std::fs::write(&tmp, b"old").unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644)).unwrap();
    e.warm_save(&path).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{mode:o}");
    let (e, r) = Engine::warm_restore(config(8, &clock), &path);
    assert_eq!(r.unwrap().items, 1);
    assert_eq!(peek(&e, b"secret").unwrap().value, b"value");
}
