//! Engine-specific behaviour: memory, eviction, expiry reclamation, statistics. The shared
//! command semantics are checked by memkit-testkit's conformance suite (tests/conformance.rs).
//!
//! Every behaviour here but one runs under both eviction policies (the `s3fifo` and `sieve`
//! modules at the end); `keys_read_twice_outlast_keys_read_once` is S3-FIFO's own, and
//! `sieve_*` SIEVE's.

use std::sync::Arc;

use memkit_engine::{Engine, EngineConfig, EvictionPolicy, Prefetch};
use memkit_types::{
    ArithOptions, ArithOutcome, Error, Exptime, GetOptions, ManualClock, StoreMode, StoreOptions,
    StoreOutcome,
};

fn engine(p: EvictionPolicy, mb: usize) -> (Engine, ManualClock) {
    let clock = ManualClock::default();
    let cfg = EngineConfig::with_memory(mb << 20)
        .clock(Arc::new(clock.clone()))
        .eviction(p);
    (Engine::new(cfg), clock)
}

fn set(e: &Engine, k: &[u8], v: &[u8], ttl: i64) -> memkit_types::Result<memkit_types::Stored> {
    e.store(k, v, &StoreOptions::new(StoreMode::Set, 0, Exptime(ttl)))
}

fn get(e: &Engine, k: &[u8]) -> Option<Vec<u8>> {
    e.get(k, &GetOptions::default())
        .unwrap()
        .map(|i| i.value.to_vec())
}

fn basic_set_get_overwrite_delete(p: EvictionPolicy) {
    let (e, _) = engine(p, 8);
    set(&e, b"a", b"1", 0).unwrap();
    assert_eq!(get(&e, b"a").as_deref(), Some(&b"1"[..]));
    set(&e, b"a", b"22", 0).unwrap();
    assert_eq!(get(&e, b"a").as_deref(), Some(&b"22"[..]));
    assert_eq!(e.stats().counters.curr_items, 1);
    assert_eq!(
        e.delete(b"a", &Default::default()).unwrap(),
        memkit_types::DeleteOutcome::Deleted
    );
    assert_eq!(get(&e, b"a"), None);
    assert_eq!(e.stats().counters.curr_items, 0);
    assert_eq!(e.stats().counters.bytes, 0);
}

fn large_values_live_out_of_line_and_come_back_exact(p: EvictionPolicy) {
    let (e, _) = engine(p, 16);
    let big: Vec<u8> = (0..900_000u32).map(|i| (i * 7) as u8).collect();
    set(&e, b"big", &big, 0).unwrap();
    assert_eq!(get(&e, b"big").unwrap(), big);
    let appended = e.store(
        b"big",
        b"tail",
        &StoreOptions::new(StoreMode::Append, 0, Exptime::NEVER),
    );
    assert_eq!(appended.unwrap().outcome, StoreOutcome::Stored);
    let got = get(&e, b"big").unwrap();
    assert_eq!(&got[..big.len()], &big[..]);
    assert_eq!(&got[big.len()..], b"tail");
}

fn item_size_limit_matches_memcached_formula(p: EvictionPolicy) {
    let (e, _) = engine(p, 16);
    // memcached -I 1m, key of 1 byte, flags 0: 48 + 8 + (1+1) + (v+2) <= 1048576.
    let max = 1_048_576 - 48 - 8 - 2 - 2;
    assert!(set(&e, b"k", &vec![b'x'; max], 0).is_ok());
    set(&e, b"k", b"small", 0).unwrap();
    assert_eq!(set(&e, b"k", &vec![b'x'; max + 1], 0), Err(Error::TooLarge));
    assert_eq!(
        get(&e, b"k"),
        None,
        "a failed set drops the old value, as memcached does"
    );
}

fn eviction_keeps_memory_within_budget_and_counts(p: EvictionPolicy) {
    let (e, _) = engine(p, 4);
    let v = vec![b'v'; 100];
    for i in 0..200_000u32 {
        set(&e, format!("key:{i}").as_bytes(), &v, 0).unwrap();
    }
    let s = e.stats();
    assert!(
        s.mapped_bytes <= s.limit_maxbytes,
        "{} > {}",
        s.mapped_bytes,
        s.limit_maxbytes
    );
    assert!(s.counters.evictions > 0);
    assert_eq!(s.counters.curr_items + s.counters.evictions, 200_000);
    // Recently written keys survive; the first ones are gone.
    assert!(get(&e, b"key:199999").is_some());
    assert!(get(&e, b"key:0").is_none());
}

fn raising_the_memory_limit_at_run_time_lets_the_store_grow(p: EvictionPolicy) {
    // `cache_memlimit` from 2 to 64 MiB: one shard that planned for 2 MiB of segments must
    // take 32x as many (its index makes room for the wider segment ids).
    let (e, _) = engine(p, 2);
    let v = vec![b'v'; 100];
    let fill = |from: u32, to: u32| {
        for i in from..to {
            set(&e, format!("key:{i}").as_bytes(), &v, 0).unwrap();
        }
    };
    fill(0, 50_000);
    let small = e.stats().counters.curr_items;
    assert!(small < 20_000, "2 MiB held {small} items");
    e.set_memory_limit(64 << 20);
    fill(50_000, 1_000_000);
    let s = e.stats();
    assert!(
        s.counters.curr_items > 25 * small,
        "{} items at 64 MiB, {small} at 2 MiB",
        s.counters.curr_items
    );
    assert!(s.mapped_bytes <= s.limit_maxbytes);
    for i in (1_000_000 - 20_000..1_000_000).step_by(97) {
        assert_eq!(
            get(&e, format!("key:{i}").as_bytes()),
            Some(v.clone()),
            "key:{i}"
        );
    }
}

/// Warming the cache for a lookup is no lookup: it counts nothing, and keys only warmed are
/// evicted by a scan as keys never read are, where read keys survive it (the worker loop warms
/// every request's first key, and must not skew eviction toward what was merely asked for).
fn warming_a_key_is_not_reading_it(p: EvictionPolicy) {
    let (e, _) = engine(p, 4);
    for what in [Prefetch::Bucket, Prefetch::Record] {
        e.prefetch(b"nothing:stored:yet", what);
    }
    let v = vec![b'v'; 100];
    let (read, warmed) = (|i: u32| format!("read:{i}"), |i: u32| format!("warmed:{i}"));
    for i in 0..500u32 {
        set(&e, read(i).as_bytes(), &v, 0).unwrap();
        set(&e, warmed(i).as_bytes(), &v, 0).unwrap();
    }
    let before = e.stats().counters;
    for _ in 0..3 {
        for i in 0..500u32 {
            for what in [Prefetch::Bucket, Prefetch::Record] {
                e.prefetch(warmed(i).as_bytes(), what);
                e.prefetch(format!("absent:{i}").as_bytes(), what);
            }
        }
    }
    assert_eq!(e.stats().counters, before, "a warm counted as a command");
    for round in 0..20u32 {
        for i in 0..500u32 {
            assert!(get(&e, read(i).as_bytes()).is_some(), "read:{i} lost");
            for what in [Prefetch::Bucket, Prefetch::Record] {
                e.prefetch(warmed(i).as_bytes(), what);
            }
        }
        for j in 0..2000u32 {
            set(&e, format!("scan:{round}:{j}").as_bytes(), &v, 0).unwrap();
        }
    }
    let kept = (0..500u32).filter(|&i| get(&e, warmed(i).as_bytes()).is_some());
    assert_eq!(kept.count(), 0, "keys only warmed outlived a scan");
}

fn frequently_read_keys_survive_a_scan(p: EvictionPolicy) {
    let (e, _) = engine(p, 4);
    let v = vec![b'v'; 100];
    for i in 0..1000u32 {
        set(&e, format!("hot:{i}").as_bytes(), &v, 0).unwrap();
    }
    for round in 0..50u32 {
        for i in 0..1000u32 {
            assert!(
                get(&e, format!("hot:{i}").as_bytes()).is_some(),
                "hot:{i} lost in round {round}"
            );
        }
        for j in 0..2000u32 {
            set(&e, format!("scan:{round}:{j}").as_bytes(), &v, 0).unwrap();
        }
    }
}

#[test]
fn keys_read_twice_outlast_keys_read_once() {
    // S3-FIFO's 2-bit counter: a key read twice since it was written keeps a lap of main
    // after its promotion; a key read once has spent its only access getting there.
    let (e, _) = engine(EvictionPolicy::S3Fifo, 4);
    let v = vec![b'v'; 100];
    let keys = |p: &'static str| (0..10_000u32).map(move |i| format!("{p}:{i}").into_bytes());
    for (a, b) in keys("a").zip(keys("b")) {
        set(&e, &a, &v, 0).unwrap();
        set(&e, &b, &v, 0).unwrap();
    }
    assert_eq!(e.stats().counters.evictions, 0, "both sets fit in 4 MiB");
    for k in keys("a") {
        assert!(get(&e, &k).is_some());
        assert!(get(&e, &k).is_some());
    }
    for k in keys("b") {
        assert!(get(&e, &k).is_some());
    }
    let peek = GetOptions {
        no_bump: true,
        ..GetOptions::default()
    };
    let alive = |p: &'static str| {
        keys(p)
            .filter(|k| e.get(k, &peek).unwrap().is_some())
            .count()
    };
    // Keys read once each, like the b keys, fill main until it goes round once.
    let mut i = 0u32;
    while alive("b") > 1_000 {
        for _ in 0..1_000 {
            let k = format!("fill:{i}");
            set(&e, k.as_bytes(), &v, 0).unwrap();
            get(&e, k.as_bytes());
            i += 1;
        }
        assert!(i < 200_000, "the keys read once were never evicted");
    }
    let (a, b) = (alive("a"), alive("b"));
    assert!(
        a >= 9_000,
        "read twice: {a} of 10000 left when read once: {b}"
    );
}

fn no_evict_mode_refuses_with_out_of_memory(p: EvictionPolicy) {
    let clock = ManualClock::default();
    let cfg = EngineConfig {
        evict: false,
        ..EngineConfig::with_memory(2 << 20)
    }
    .clock(Arc::new(clock))
    .eviction(p);
    let e = Engine::new(cfg);
    let v = vec![b'v'; 1000];
    let mut stored = 0;
    let mut oom = false;
    for i in 0..10_000u32 {
        match set(&e, format!("k{i}").as_bytes(), &v, 0) {
            Ok(_) => stored += 1,
            Err(Error::OutOfMemory) => {
                oom = true;
                break;
            }
            Err(other) => panic!("{other}"),
        }
    }
    assert!(oom && stored > 1000, "stored {stored}");
    for i in 0..stored {
        assert!(
            get(&e, format!("k{i}").as_bytes()).is_some(),
            "k{i} was evicted in -M mode"
        );
    }
    // Deleting makes room again once the dead bytes are compacted away.
    for i in 0..stored {
        e.delete(format!("k{i}").as_bytes(), &Default::default())
            .unwrap();
    }
    set(&e, b"again", &v, 0).unwrap();
}

fn expired_items_are_reclaimed_without_being_read(p: EvictionPolicy) {
    let (e, clock) = engine(p, 4);
    let v = vec![b'v'; 100];
    for i in 0..20_000u32 {
        set(&e, format!("t{i}").as_bytes(), &v, 10).unwrap();
    }
    let before = e.stats();
    assert_eq!(before.counters.curr_items, 20_000);
    clock.advance(11);
    let reclaimed = e.reclaim_expired(usize::MAX);
    assert_eq!(reclaimed, 20_000);
    let after = e.stats();
    assert_eq!(after.counters.curr_items, 0);
    assert_eq!(after.counters.expired_unfetched, 20_000);
    assert!(after.segments < before.segments, "empty segments are freed");
}

fn incr_pads_like_memcached_and_vivifies(p: EvictionPolicy) {
    let (e, _) = engine(p, 4);
    set(&e, b"n", b"10", 0).unwrap();
    let r = e.arithmetic(b"n", &ArithOptions::decr(1)).unwrap();
    assert_eq!(r.value(), Some(9));
    assert_eq!(get(&e, b"n").as_deref(), Some(&b"9 "[..]));
    let r = e.arithmetic(b"n", &ArithOptions::incr(u64::MAX)).unwrap();
    assert_eq!(r.value(), Some(8), "wraps at 2^64");
    let viv = ArithOptions {
        vivify: Some((5, Exptime::NEVER)),
        ..ArithOptions::incr(1)
    };
    assert_eq!(e.arithmetic(b"fresh", &viv).unwrap().value(), Some(5));
    assert_eq!(e.arithmetic(b"fresh", &viv).unwrap().value(), Some(6));
    set(&e, b"s", b"abc", 0).unwrap();
    assert_eq!(
        e.arithmetic(b"s", &ArithOptions::incr(1)).unwrap(),
        ArithOutcome::NonNumeric
    );
}

fn flush_all_is_immediate_or_delayed(p: EvictionPolicy) {
    let (e, clock) = engine(p, 4);
    set(&e, b"a", b"1", 0).unwrap();
    e.flush_all(0);
    assert_eq!(get(&e, b"a"), None);
    set(&e, b"b", b"2", 0).unwrap();
    assert!(get(&e, b"b").is_some(), "items stored after a flush live");
    // memcached's delayed flush lands one second early (`oldest_live = now + delay - 1`).
    e.flush_all(5);
    clock.advance(3);
    assert!(get(&e, b"b").is_some());
    clock.advance(1);
    assert_eq!(get(&e, b"b"), None);
    // Items linked during the flush second itself are flushed too; later ones live.
    set(&e, b"c", b"3", 0).unwrap();
    assert_eq!(get(&e, b"c"), None);
    clock.advance(1);
    set(&e, b"c", b"3", 0).unwrap();
    assert!(get(&e, b"c").is_some());
}

fn concurrent_incr_cas_append_are_exact(p: EvictionPolicy) {
    let (e, _) = engine(p, 16);
    let e = Arc::new(e);
    set(&e, b"ctr", b"0", 0).unwrap();
    set(&e, b"cas", b"0", 0).unwrap();
    set(&e, b"log", b"", 0).unwrap();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let e = e.clone();
            std::thread::spawn(move || {
                for i in 0..5000u32 {
                    e.arithmetic(b"ctr", &ArithOptions::incr(1)).unwrap();
                    // A CAS loop: read, add one, write back if unchanged.
                    loop {
                        let it = e.get(b"cas", &GetOptions::default()).unwrap().unwrap();
                        let n: u64 = std::str::from_utf8(&it.value)
                            .unwrap()
                            .trim()
                            .parse()
                            .unwrap();
                        let opts = StoreOptions {
                            cas: Some(it.cas),
                            ..StoreOptions::new(StoreMode::Set, 0, Exptime::NEVER)
                        };
                        if e.store(b"cas", (n + 1).to_string().as_bytes(), &opts)
                            .unwrap()
                            .outcome
                            == StoreOutcome::Stored
                        {
                            break;
                        }
                    }
                    if i < 500 {
                        let rec = format!("{t}:{i};");
                        e.store(
                            b"log",
                            rec.as_bytes(),
                            &StoreOptions::new(StoreMode::Append, 0, Exptime::NEVER),
                        )
                        .unwrap();
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(get(&e, b"ctr").as_deref(), Some(&b"20000"[..]));
    assert_eq!(get(&e, b"cas").as_deref(), Some(&b"20000"[..]));
    let log = String::from_utf8(get(&e, b"log").unwrap()).unwrap();
    let mut recs: Vec<&str> = log.split(';').filter(|s| !s.is_empty()).collect();
    assert_eq!(recs.len(), 2000);
    recs.sort();
    recs.dedup();
    assert_eq!(recs.len(), 2000, "no record lost or duplicated");
}

fn overwrites_never_evict_live_data_that_fits(p: EvictionPolicy) {
    // 100k keys of ~120 bytes (12 MiB live) in 64 MiB, overwritten over and over: the dead
    // copies fill the segments, but compaction, not eviction, must take them back.
    let (e, _) = engine(p, 64);
    let v = vec![b'v'; 100];
    let key = |i: u32| format!("key:{i:016}");
    for i in 0..100_000u32 {
        set(&e, key(i).as_bytes(), &v, 0).unwrap();
    }
    let mut x = 0x9e37_79b9u32;
    for _ in 0..1_500_000 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        set(&e, key(x % 100_000).as_bytes(), &v, 0).unwrap();
    }
    let s = e.stats();
    assert_eq!(
        s.counters.evictions, 0,
        "live data fits: nothing may be evicted"
    );
    assert_eq!(s.counters.curr_items, 100_000);
    assert!(s.mapped_bytes <= s.limit_maxbytes);
    for i in (0..100_000u32).step_by(97) {
        assert!(get(&e, key(i).as_bytes()).is_some());
    }
}

fn flushed_items_are_reclaimed_even_without_expiry_times(p: EvictionPolicy) {
    // Segments holding no expiring items are skipped by the expiry walk, unless a flush
    // happened since they were last walked.
    let (e, _) = engine(p, 4);
    for i in 0..5000u32 {
        set(&e, format!("f{i}").as_bytes(), b"value", 0).unwrap();
    }
    assert_eq!(e.reclaim_expired(usize::MAX), 0, "nothing is dead yet");
    e.flush_all(0);
    assert_eq!(e.reclaim_expired(usize::MAX), 5000);
    assert_eq!(e.stats().counters.curr_items, 0);
}

#[test]
fn sieve_drops_the_oldest_unvisited_first_and_keeps_what_was_read_through_a_scan() {
    // One shard of 4 MiB in 16 KiB segments: the hand's order is the order of writes.
    let cfg = EngineConfig {
        shards: Some(1),
        ..EngineConfig::with_memory(4 << 20)
    }
    .clock(Arc::new(ManualClock::default()))
    .eviction(EvictionPolicy::Sieve);
    let e = Engine::new(cfg);
    let v = vec![b'v'; 100];
    let a = |i: u32| format!("a:{i:05}").into_bytes();
    let b = |j: u32| format!("b:{j:06}").into_bytes();
    for i in 0..20_000 {
        set(&e, &a(i), &v, 0).unwrap();
    }
    assert_eq!(e.stats().counters.evictions, 0, "20k items fit in 4 MiB");
    let read = |i: u32| i < 10_000 && i.is_multiple_of(2);
    for i in (0..20_000).filter(|&i| read(i)) {
        assert!(get(&e, &a(i)).is_some());
    }
    let peek = GetOptions {
        no_bump: true,
        ..GetOptions::default()
    };
    let alive = |k: &[u8]| e.get(k, &peek).unwrap().is_some();
    let mut j = 0;
    while e.stats().counters.evictions < 3_000 {
        set(&e, &b(j), &v, 0).unwrap();
        j += 1;
    }
    // The hand went from the oldest: what it dropped is a prefix of the unread keys in
    // write order, and nothing read is gone.
    let unread: Vec<bool> = (0..20_000)
        .filter(|&i| !read(i))
        .map(|i| alive(&a(i)))
        .collect();
    let gone = unread.iter().take_while(|&&x| !x).count();
    assert_eq!(gone as u64, e.stats().counters.evictions);
    assert!(
        unread[gone..].iter().all(|&x| x),
        "an unread key out of order"
    );
    assert!((0..20_000).filter(|&i| read(i)).all(|i| alive(&a(i))));
    assert!((0..j).all(|j| alive(&b(j))));
    // A scan of keys never read (twice the cache) takes every unread key, and none of
    // those read before: their pass kept them behind the hand, which the scan never
    // passes again.
    for _ in 0..70_000 {
        set(&e, &b(j), &v, 0).unwrap();
        j += 1;
    }
    assert!((0..20_000).filter(|&i| !read(i)).all(|i| !alive(&a(i))));
    assert!((0..20_000).filter(|&i| read(i)).all(|i| alive(&a(i))));
    assert!(!alive(&b(0)));
}

/// Runs each behaviour above under one policy, as `#[test]`s of their own.
macro_rules! under {
    ($policy:ident: $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                super::$name(memkit_engine::EvictionPolicy::$policy);
            }
        )*
    };
}

macro_rules! behaviours {
    ($policy:ident) => {
        under!($policy: basic_set_get_overwrite_delete,
            large_values_live_out_of_line_and_come_back_exact,
            item_size_limit_matches_memcached_formula,
            eviction_keeps_memory_within_budget_and_counts,
            raising_the_memory_limit_at_run_time_lets_the_store_grow,
            frequently_read_keys_survive_a_scan,
            warming_a_key_is_not_reading_it,
            no_evict_mode_refuses_with_out_of_memory,
            expired_items_are_reclaimed_without_being_read,
            incr_pads_like_memcached_and_vivifies,
            flush_all_is_immediate_or_delayed,
            concurrent_incr_cas_append_are_exact,
            overwrites_never_evict_live_data_that_fits,
            flushed_items_are_reclaimed_even_without_expiry_times);
    };
}

mod s3fifo {
    behaviours!(S3Fifo);
}

mod sieve {
    behaviours!(Sieve);
}

#[test]
fn clear_drops_every_item_and_keeps_the_counters() {
    let (e, _clock) = engine(EvictionPolicy::default(), 8);
    for i in 0..1000 {
        let key = format!("k{i}");
        e.store(key.as_bytes(), b"value", &StoreOptions::default())
            .unwrap();
    }
    assert!(e.get(b"k1", &GetOptions::default()).unwrap().is_some());
    e.clear();
    let s = e.stats();
    assert_eq!((s.counters.curr_items, s.counters.bytes), (0, 0));
    assert_eq!(s.counters.cmd_set, 1000, "counters carry over");
    assert_eq!(e.get(b"k1", &GetOptions::default()).unwrap(), None);
    // The engine goes on as an empty one: the whole budget is there again.
    for i in 0..1000 {
        let key = format!("n{i}");
        e.store(key.as_bytes(), b"value", &StoreOptions::default())
            .unwrap();
    }
    assert_eq!(e.stats().counters.curr_items, 1000);
}

/// A replicated node's read: the engine's clock (the log's) stands still, the reader's has
/// moved on. What is dead only at the reader's time is a miss for that read, and stays in
/// the engine for the writes to come; TTLs are counted from the reader's time.
#[test]
fn a_read_at_a_later_time_judges_there_and_removes_nothing() {
    use memkit_types::{Clock, ReplicaRead, Ttl};
    let (e, clock) = engine(EvictionPolicy::default(), 8);
    set(&e, b"short", b"1", 10).unwrap();
    set(&e, b"long", b"2", 100).unwrap();
    let later = |secs: u64| GetOptions {
        meta: true,
        replica: Some(ReplicaRead {
            at_unix: clock.now_secs() + secs,
            touched_from: None,
        }),
        ..Default::default()
    };
    let ttl = |o: &GetOptions, k: &[u8]| e.get(k, o).unwrap().map(|i| i.ttl.unwrap());
    assert_eq!(ttl(&later(4), b"short"), Some(Ttl::Secs(6)));
    assert_eq!(
        ttl(&later(10), b"short"),
        None,
        "expired at the reader's time"
    );
    assert_eq!(ttl(&later(10), b"long"), Some(Ttl::Secs(90)));
    assert_eq!(e.stats().counters.get_expired, 1);
    // An earlier time than the engine's changes nothing.
    let earlier = GetOptions {
        replica: Some(ReplicaRead {
            at_unix: 1,
            touched_from: None,
        }),
        ..later(0)
    };
    assert_eq!(ttl(&earlier, b"short"), Some(Ttl::Secs(10)));
    // Still there for the engine's own clock: an append at its time finds it.
    let append = StoreOptions::new(StoreMode::Append, 0, Exptime(0));
    let r = e.store(b"short", b"+", &append).unwrap();
    assert_eq!(r.outcome, StoreOutcome::Stored);
    // A delayed flush due by the reader's time (a second early, as memcached's) hides
    // every item from that read only.
    e.flush_all(5);
    assert_eq!(ttl(&later(3), b"long"), Some(Ttl::Secs(97)));
    assert_eq!(ttl(&later(4), b"long"), None);
    assert_eq!(get(&e, b"long").as_deref(), Some(&b"2"[..]));
    clock.advance(4);
    assert_eq!(
        get(&e, b"long"),
        None,
        "and from every read once the engine gets there"
    );
}

/// A replicated `gat`'s read, after its touch went through the log: it counts nothing (the
/// touch counted it as memcached counts a `gat`) and reports the TTL the touch found.
#[test]
fn a_read_after_its_own_touch_counts_nothing_and_reports_the_ttl_before() {
    use memkit_types::{Clock, ReplicaRead};
    let (e, clock) = engine(EvictionPolicy::default(), 8);
    set(&e, b"k", b"v", 100).unwrap();
    let before = e.stats().counters;
    let opts = GetOptions {
        meta: true,
        replica: Some(ReplicaRead {
            at_unix: clock.now_secs(),
            touched_from: Some(Some(clock.now_secs() + 40)),
        }),
        ..Default::default()
    };
    let mut seen = None;
    e.get_view(b"k", &opts, |v| seen = Some((v.ttl, v.ttl_before)))
        .unwrap();
    use memkit_types::Ttl;
    assert_eq!(seen, Some((Ttl::Secs(100), Ttl::Secs(40))));
    assert_eq!(e.get(b"nope", &opts).unwrap(), None);
    let after = e.stats().counters;
    assert_eq!(
        (
            after.cmd_get,
            after.get_hits,
            after.get_misses,
            after.cmd_touch
        ),
        (
            before.cmd_get,
            before.get_hits,
            before.get_misses,
            before.cmd_touch
        )
    );
}
