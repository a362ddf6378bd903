//! The flash tier under the engine (`memkit_engine::flash`): values eviction lets go are
//! read back from a real flash file, intact or not at all; deletes, overwrites and expiry
//! need no read; a corrupted file gives misses and counts them; recaches bring values
//! back; a warm restart keeps what is on flash.

use std::os::unix::fs::FileExt;
use std::sync::Arc;

use memkit_engine::memkit_flash::{FileSpec, FlashConfig, FlashStore};
use memkit_engine::{Engine, EngineConfig, FlashTier, Got};
use memkit_testkit::tempdir;
use memkit_types::{
    ArithMode, ArithOptions, ArithOutcome, DeleteOptions, Exptime, GetOptions, ManualClock,
    StoreMode, StoreOptions, StoreOutcome,
};

const VALUE: usize = 4096;

fn flash_config(dir: &std::path::Path, mb: u64) -> FlashConfig {
    FlashConfig {
        files: vec![FileSpec {
            path: dir.join("flash"),
            size: mb << 20,
        }],
        page_size: 1 << 20,
        wbuf_size: 256 << 10,
        wbufs: 64,
        io_threads: 1,
        compact_under: 2,
        max_frag: 0.8,
        drop_unread: false,
    }
}

/// An engine of `ram_mb` over a flash file of `flash_mb`, on a manual clock.
fn engine(
    dir: &std::path::Path,
    ram_mb: usize,
    flash_mb: u64,
    tier: impl FnOnce(&mut FlashTier),
) -> (Arc<Engine>, ManualClock) {
    let store = FlashStore::open(flash_config(dir, flash_mb)).expect("flash file");
    let mut t = FlashTier::new(store);
    tier(&mut t);
    let clock = ManualClock::new(1_000_000);
    let cfg = EngineConfig {
        flash: Some(t),
        ..EngineConfig::with_memory(ram_mb << 20).clock(Arc::new(clock.clone()))
    };
    let e = Arc::new(Engine::new(cfg));
    e.attach_flash();
    (e, clock)
}

fn value_for(i: usize) -> Vec<u8> {
    let mut v = vec![0u8; VALUE];
    for (j, b) in v.iter_mut().enumerate() {
        *b = (i.wrapping_mul(31).wrapping_add(j * 7) % 251) as u8;
    }
    v
}

fn key(i: usize) -> Vec<u8> {
    format!("key:{i}").into_bytes()
}

fn set(e: &Engine, k: &[u8], v: &[u8]) {
    let r = e.store(k, v, &StoreOptions::default()).unwrap();
    assert_eq!(r.outcome, StoreOutcome::Stored);
}

fn get(e: &Engine, k: &[u8]) -> Option<Vec<u8>> {
    e.get(k, &GetOptions::default())
        .unwrap()
        .map(|i| i.value.to_vec())
}

/// Fills `n` values of 4 KB, far more than RAM holds.
fn fill(e: &Engine, n: usize) {
    for i in 0..n {
        set(e, &key(i), &value_for(i));
    }
}

/// The first key whose value is on flash now.
fn on_flash(e: &Engine, n: usize) -> usize {
    let opts = GetOptions {
        no_bump: true,
        ..Default::default()
    };
    (0..n)
        .find(|&i| {
            matches!(
                e.get_or_flash(&key(i), &opts, |_| ()),
                Ok(Some(Got::Flash(_)))
            )
        })
        .expect("some value on flash")
}

#[test]
fn a_fill_far_past_ram_reads_back_intact_from_flash() {
    let dir = tempdir("flash-fill");
    let (e, _) = engine(dir.path(), 2, 64, |_| {});
    let n = 4000; // 16 MB of values over 2 MiB of RAM
    fill(&e, n);
    let mut hits = 0;
    for i in 0..n {
        if let Some(v) = get(&e, &key(i)) {
            assert_eq!(v, value_for(i), "key {i} read back other bytes");
            hits += 1;
        }
    }
    let s = e.stats();
    assert!(hits * 100 >= n * 95, "{hits} of {n} readable");
    assert!(s.counters.evicted_to_extstore as usize >= n / 2, "{s:?}");
    assert!(s.counters.get_extstore as usize >= n / 2);
    assert_eq!(s.counters.badcrc_from_extstore, 0);
    assert!(s.flash_items > 0);
    assert!(
        s.mapped_bytes <= 3 << 20,
        "RAM stays near its limit: {}",
        s.mapped_bytes
    );
}

#[test]
fn deletes_overwrites_and_expiry_need_no_read_and_free_the_flash_bytes() {
    let dir = tempdir("flash-dead");
    let (e, clock) = engine(dir.path(), 2, 64, |_| {});
    // Items with a TTL, then enough others to push them to flash.
    for i in 0..100 {
        let opts = StoreOptions {
            exptime: Exptime(100),
            ..Default::default()
        };
        e.store(&key(i), &value_for(i), &opts).unwrap();
    }
    fill_from(&e, 100, 2000);
    let expiring = (0..100).filter(|&i| is_on_flash(&e, i)).count();
    assert!(expiring > 50, "{expiring} of the TTL items on flash");
    let store = e.flash_store().unwrap().clone();
    // The store's live objects are the engine's stubs, one for one.
    assert_eq!(store.stats().objects_used, e.stats().flash_items);
    let k = (100..2000).find(|&i| is_on_flash(&e, i)).unwrap();
    let k2 = (k + 1..2000).find(|&i| is_on_flash(&e, i)).unwrap();
    // (`is_on_flash` counts as a flash read: the count starts after it.)
    let reads = e.stats().counters.get_extstore;
    set(&e, &key(k), b"small now");
    assert_eq!(get(&e, &key(k)).as_deref(), Some(&b"small now"[..]));
    e.delete(&key(k2), &DeleteOptions::default()).unwrap();
    assert_eq!(get(&e, &key(k2)), None);
    clock.advance(101);
    for i in 0..100 {
        assert_eq!(get(&e, &key(i)), None, "key {i} expired");
    }
    assert_eq!(
        e.stats().counters.get_extstore,
        reads,
        "no value was read from flash"
    );
    e.reclaim_expired(usize::MAX);
    assert_eq!(store.stats().objects_used, e.stats().flash_items);
}

fn fill_from(e: &Engine, from: usize, to: usize) {
    for i in from..to {
        set(e, &key(i), &value_for(i));
    }
}

fn is_on_flash(e: &Engine, i: usize) -> bool {
    is_on_flash_key(e, &key(i))
}

/// Whether `k`'s value is on flash (asking counts nothing and changes nothing).
fn is_on_flash_key(e: &Engine, k: &[u8]) -> bool {
    e.flash_value(k).is_some()
}

#[test]
fn append_and_incr_bring_a_value_on_flash_back_to_ram_first() {
    let dir = tempdir("flash-append");
    let (e, _) = engine(dir.path(), 2, 64, |t| t.recache_rate = 0);
    // A counter padded past `ext_item_size` (memcached's incr reads the leading digits).
    let mut counter = b"41".to_vec();
    counter.resize(VALUE, b' ');
    set(&e, b"counter", &counter);
    fill(&e, 2000);
    assert!(is_on_flash_key(&e, b"counter"), "the counter went to flash");
    let k = on_flash(&e, 2000);
    let opts = StoreOptions {
        mode: StoreMode::Append,
        ..Default::default()
    };
    let r = e.store(&key(k), b"tail", &opts).unwrap();
    assert_eq!(r.outcome, StoreOutcome::Stored);
    let mut want = value_for(k);
    want.extend_from_slice(b"tail");
    assert_eq!(get(&e, &key(k)), Some(want));
    let incr = ArithOptions {
        mode: ArithMode::Incr,
        delta: 1,
        ..Default::default()
    };
    match e.arithmetic(b"counter", &incr).unwrap() {
        ArithOutcome::Value { value, .. } => assert_eq!(value, 42),
        other => panic!("{other:?}"),
    }
    assert!(e.stats().counters.recache_from_extstore >= 2);
}

#[test]
fn a_corrupted_flash_file_gives_misses_and_counts_them_never_wrong_bytes() {
    let dir = tempdir("flash-crc");
    let (e, _) = engine(dir.path(), 2, 64, |_| {});
    let n = 3000;
    fill(&e, n);
    let store = e.flash_store().unwrap().clone();
    store.flush().unwrap();
    // Flip a byte every 1,000 in the file's first 8 MiB.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.path().join("flash"))
        .unwrap();
    for off in (0..8u64 << 20).step_by(1000) {
        let mut b = [0u8; 1];
        f.read_exact_at(&mut b, off).unwrap();
        f.write_all_at(&[b[0] ^ 0x5a], off).unwrap();
    }
    let mut wrong = 0;
    for i in 0..n {
        if let Some(v) = get(&e, &key(i)) {
            wrong += usize::from(v != value_for(i));
        }
    }
    let s = e.stats().counters;
    assert_eq!(wrong, 0, "a corrupted value was served");
    assert!(s.badcrc_from_extstore > 0, "{s:?}");
    assert!(s.miss_from_extstore >= s.badcrc_from_extstore);
    // The stubs of the bad values are gone: reading again costs no flash read.
    let reads = s.get_extstore;
    let bad = s.badcrc_from_extstore;
    for i in 0..n {
        let _ = get(&e, &key(i));
    }
    let s = e.stats().counters;
    assert_eq!(s.badcrc_from_extstore, bad, "a bad value is found bad once");
    assert!(
        s.get_extstore > reads,
        "the good ones are still read from flash"
    );
}

#[test]
fn recache_brings_a_read_value_back_to_ram() {
    let dir = tempdir("flash-recache");
    let (e, _) = engine(dir.path(), 2, 64, |t| t.recache_rate = 1);
    fill(&e, 2000);
    let k = on_flash(&e, 2000);
    assert_eq!(get(&e, &key(k)), Some(value_for(k)));
    assert!(!is_on_flash(&e, k), "back in RAM");
    assert_eq!(get(&e, &key(k)), Some(value_for(k)));
    assert!(e.stats().counters.recache_from_extstore >= 1);
}

#[test]
fn a_warm_restart_keeps_what_is_on_flash() {
    let dir = tempdir("flash-warm");
    let file = dir.path().join("memory_file");
    let n = 2000;
    let state = {
        let (e, _) = engine(dir.path(), 2, 64, |_| {});
        fill(&e, n);
        assert!(e.stats().flash_items > 0);
        e.warm_save(&file).unwrap();
        let state = e.flash_store().unwrap().save_state().unwrap();
        e.flash_store().unwrap().shutdown();
        state
    };
    let store = FlashStore::restore(flash_config(dir.path(), 64), &state).unwrap();
    let cfg = EngineConfig {
        flash: Some(FlashTier::new(store)),
        ..EngineConfig::with_memory(2 << 20)
    };
    let (e, outcome) = Engine::warm_restore(cfg, &file);
    let r = outcome.unwrap();
    let e = Arc::new(e);
    e.attach_flash();
    assert!(e.stats().flash_items > 0, "{r:?}");
    let mut hits = 0;
    for i in 0..n {
        if let Some(v) = get(&e, &key(i)) {
            assert_eq!(v, value_for(i));
            hits += 1;
        }
    }
    assert!(hits * 100 >= n * 95, "{hits} of {n} back after the restart");
}

#[test]
fn with_no_eviction_every_stored_value_stays_readable_through_flash() {
    let dir = tempdir("flash-noevict");
    let store = FlashStore::open(flash_config(dir.path(), 64)).expect("flash file");
    let tier = FlashTier {
        item_age: 0,
        ..FlashTier::new(store)
    };
    let cfg = EngineConfig {
        flash: Some(tier),
        evict: false,
        ..EngineConfig::with_memory(2 << 20)
    };
    let e = Arc::new(Engine::new(cfg));
    e.attach_flash();
    // Stubs fill RAM long after the values would have: stores are refused then, as `-M`
    // refuses them, and nothing stored is ever dropped.
    let mut stored = Vec::new();
    for i in 0..12_000 {
        match e.store(&key(i), &value_for(i), &StoreOptions::default()) {
            Ok(r) if r.outcome == StoreOutcome::Stored => stored.push(i),
            Ok(r) => panic!("{r:?}"),
            Err(_) => {}
        }
    }
    assert!(stored.len() > 2000, "{} stored", stored.len());
    for &i in &stored {
        assert_eq!(
            get(&e, &key(i)),
            Some(value_for(i)),
            "key {i} lost under -M"
        );
    }
    assert_eq!(e.stats().counters.evictions, 0);
}
