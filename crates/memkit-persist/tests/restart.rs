//! What survives a restart, and a data set larger than RAM.

use std::sync::Arc;

use memkit_engine::{Embedded, EngineConfig};
use memkit_persist::{Durability, PersistOptions, Persistent};
use memkit_testkit::tempdir::{TempDir, tempdir};
use memkit_types::{Blocking, Exptime, ManualClock, SystemClock};

fn open(dir: &TempDir, mem: usize, clock: Arc<dyn memkit_types::Clock>) -> Persistent {
    let opts = PersistOptions {
        durability: Durability::Sync,
        ..PersistOptions::new(dir.path().join("store"))
    };
    memkit_persist::open(&opts, EngineConfig::with_memory(mem).clock(clock)).unwrap()
}

#[test]
fn items_flags_expiry_and_cas_survive_a_reopen() {
    let dir = tempdir("persist-reopen");
    let clock = ManualClock::new(1_700_000_000);
    let (cas_a, last_cas);
    {
        let p = open(&dir, 64 << 20, Arc::new(clock.clone()));
        let c = Blocking(Embedded::from(p.engine.clone()));
        cas_a = c.set(b"a", b"hello", 7, Exptime::NEVER).unwrap();
        c.set(b"ttl", b"x", 0, Exptime(100)).unwrap();
        c.set(b"short", b"x", 0, Exptime(5)).unwrap();
        c.set(b"n", b"41", 0, Exptime::NEVER).unwrap();
        c.incr(b"n", 1).unwrap();
        c.append(b"a", b"!").unwrap();
        c.set(b"gone", b"x", 0, Exptime::NEVER).unwrap();
        c.delete(b"gone").unwrap();
        last_cas = c.get(b"a").unwrap().unwrap().cas;
        assert!(last_cas > cas_a);
        p.store.wait_durable_blocking().unwrap();
    }
    clock.advance(10);
    let p = open(&dir, 64 << 20, Arc::new(clock.clone()));
    assert!(p.recovery.cas_floor > last_cas);
    let c = Blocking(Embedded::from(p.engine.clone()));
    let a = c.get(b"a").unwrap().unwrap();
    assert_eq!(
        (&a.value[..], a.flags, a.cas),
        (&b"hello!"[..], 7, last_cas)
    );
    assert_eq!(c.get_value(b"n").unwrap().as_deref(), Some(&b"42"[..]));
    assert!(c.get(b"ttl").unwrap().is_some(), "90 s left");
    assert_eq!(c.get(b"short").unwrap(), None, "expired while down");
    assert_eq!(c.get(b"gone").unwrap(), None);
    let new = c.set(b"b", b"v", 0, Exptime::NEVER).unwrap();
    assert!(new > last_cas, "CAS keeps increasing across restarts");
    // A token from before the restart still works while the item is unchanged.
    assert_eq!(
        c.cas(b"a", b"new", 0, Exptime::NEVER, last_cas).unwrap(),
        memkit_types::StoreOutcome::Stored
    );
    c.flush_all(0).unwrap();
    drop((c, p));
    let p = open(&dir, 64 << 20, Arc::new(clock.clone()));
    let c = Blocking(Embedded::from(p.engine.clone()));
    assert_eq!(c.get(b"b").unwrap(), None, "flush_all survives a restart");
    c.set(b"after", b"1", 0, Exptime::NEVER).unwrap();
    assert!(c.get(b"after").unwrap().is_some());
}

#[test]
fn a_data_set_four_times_ram_reads_back_whole() {
    let dir = tempdir("persist-big");
    // 16 MiB budget (the engine gets 8 of it); 64 MiB of values.
    let p = open(&dir, 16 << 20, Arc::new(SystemClock));
    let c = Blocking(Embedded::from(p.engine.clone()));
    let value = |i: u32| format!("{i:0>1000}").into_bytes();
    let n = 64_000u32;
    for i in 0..n {
        c.set(format!("key:{i}").as_bytes(), &value(i), i, Exptime::NEVER)
            .unwrap();
    }
    assert!(p.engine.stats().counters.evictions > 0, "RAM did evict");
    for i in (0..n).step_by(7) {
        let it = c
            .get(format!("key:{i}").as_bytes())
            .unwrap()
            .expect("on disk");
        assert_eq!((&it.value[..], it.flags), (&value(i)[..], i));
    }
    // Read-modify-write commands see the disk version of an evicted key.
    assert!(c.append(b"key:1", b"+").unwrap());
    assert!(c.get_value(b"key:1").unwrap().unwrap().ends_with(b"1+"));
    assert!(p.store.stats().loads > 0);
}
