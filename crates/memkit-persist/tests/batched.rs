//! Batched mode (memkit-raft's state machine): a change reaches the store only with the
//! commit that follows it, atomically with the owner's metadata; until then commands see it
//! (from RAM, or from the pending set once RAM lost it); a frozen view keeps the committed
//! state of its moment; `replace_all` swaps every item and the flush state.

use std::path::Path;

use memkit_engine::{Embedded, EngineConfig, Record};
use memkit_persist::{Durability, PersistOptions, Persistent};
use memkit_types::{Blocking, Clock, Exptime};

fn open(dir: &Path, memory: usize) -> Persistent {
    let opts = PersistOptions {
        durability: Durability::None,
        batched: true,
        ..PersistOptions::new(dir)
    };
    memkit_persist::open(&opts, EngineConfig::with_memory(memory)).unwrap()
}

fn client(p: &Persistent) -> Blocking<Embedded> {
    Blocking(Embedded::from(p.engine.clone()))
}

fn value(i: usize) -> Vec<u8> {
    format!("{i:08}").repeat(512).into_bytes()
}

#[test]
fn a_change_reaches_the_store_only_with_its_commit_and_the_owners_metadata() {
    let guard = memkit_testkit::tempdir::in_memory("batched");
    let dir = guard.path().join("store");
    let p = open(&dir, 16 << 20);
    client(&p)
        .set(b"uncommitted", b"1", 0, Exptime::NEVER)
        .unwrap();
    assert!(p.store.is_batched());
    drop(p);
    let p = open(&dir, 16 << 20);
    assert_eq!(client(&p).get(b"uncommitted").unwrap(), None);
    client(&p)
        .set(b"committed", b"2", 0, Exptime::NEVER)
        .unwrap();
    client(&p).incr(b"committed", 5).unwrap();
    p.store
        .commit(&[(b"applied".as_slice(), b"7".as_slice())])
        .unwrap();
    // After the commit: a change made now is again the next commit's.
    client(&p).set(b"after", b"3", 0, Exptime::NEVER).unwrap();
    drop(p);
    let p = open(&dir, 16 << 20);
    let c = client(&p);
    assert_eq!(c.get(b"committed").unwrap().unwrap().value.as_ref(), b"7");
    assert_eq!(c.get(b"after").unwrap(), None);
    assert_eq!(
        p.store.meta_value(b"applied").unwrap().as_deref(),
        Some(&b"7"[..])
    );
}

#[test]
fn items_ram_lost_before_their_commit_are_read_from_the_pending_set() {
    let guard = memkit_testkit::tempdir::in_memory("batched-evict");
    let p = open(&guard.path().join("store"), 16 << 20);
    let c = client(&p);
    // 4 KiB values, four times the engine's RAM, none committed.
    let n = 16_000;
    for i in 0..n {
        c.set(format!("k{i}").as_bytes(), &value(i), 0, Exptime::NEVER)
            .unwrap();
    }
    assert!(p.engine.stats().counters.evictions > 0, "RAM never filled");
    for i in (0..n).step_by(7) {
        let got = c.get(format!("k{i}").as_bytes()).unwrap().expect("lost");
        assert_eq!(got.value.as_ref(), value(i));
    }
    // A delete of an evicted item is pending too, and wins over its pending version.
    c.delete(b"k3").unwrap();
    assert_eq!(c.get(b"k3").unwrap(), None);
    p.store.commit(&[]).unwrap();
    assert_eq!(c.get(b"k3").unwrap(), None);
    assert_eq!(c.get(b"k10").unwrap().unwrap().value.as_ref(), value(10));
}

#[test]
fn a_frozen_view_keeps_the_committed_state_of_its_moment() {
    let guard = memkit_testkit::tempdir::in_memory("batched-frozen");
    let p = open(&guard.path().join("store"), 16 << 20);
    let c = client(&p);
    c.set(b"a", b"old", 3, Exptime::NEVER).unwrap();
    c.set(b"gone", b"x", 0, Exptime::NEVER).unwrap();
    c.set(b"uncommitted-at-freeze", b"x", 0, Exptime::NEVER)
        .unwrap();
    p.store.commit(&[]).unwrap();
    c.set(b"later", b"x", 0, Exptime::NEVER).unwrap();
    let frozen = p.store.freeze().unwrap();
    c.set(b"a", b"new", 0, Exptime::NEVER).unwrap();
    c.delete(b"gone").unwrap();
    p.store.commit(&[]).unwrap();
    let now = p.engine.clock().now_secs();
    let seen: Vec<_> = frozen
        .live(now)
        .map(|r| {
            let (k, item) = r.unwrap();
            (k.to_vec(), item.value, item.flags)
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            (b"a".to_vec(), b"old".to_vec(), 3),
            (b"gone".to_vec(), b"x".to_vec(), 0),
            (b"uncommitted-at-freeze".to_vec(), b"x".to_vec(), 0),
        ]
    );
}

#[test]
fn replace_all_swaps_every_item_and_keeps_only_the_flush_to_come() {
    let guard = memkit_testkit::tempdir::in_memory("batched-replace");
    let p = open(&guard.path().join("store"), 16 << 20);
    let c = client(&p);
    c.set(b"old", b"x", 0, Exptime::NEVER).unwrap();
    p.store.commit(&[]).unwrap();
    let now = p.engine.clock().now_secs();
    let records: Vec<_> = (0..1000usize)
        .map(|i| {
            let key = format!("new{i}").into_bytes();
            let rec = p.store.encode(&Record {
                key: &key,
                value: &value(i),
                flags: i as u32,
                exptime_unix: None,
                cas: 1000 + i as u64,
                stale: false,
                win_sent: false,
            });
            Ok((key, rec))
        })
        .collect();
    p.engine.clear();
    let n = p
        .store
        .replace_all(&mut records.into_iter(), Some(now + 2), 64 << 10)
        .unwrap();
    p.engine.restore_pending_flush(now + 2);
    assert_eq!(n, 1000);
    assert_eq!(c.get(b"old").unwrap(), None);
    let got = c.get(b"new5").unwrap().unwrap();
    assert_eq!(
        (got.value.as_ref(), got.flags, got.cas),
        (&value(5)[..], 5, 1005)
    );
    // The flush to come voids what was installed once it comes (disk and RAM agree).
    std::thread::sleep(std::time::Duration::from_millis(3100));
    assert_eq!(c.get(b"new5").unwrap(), None);
    assert_eq!(c.get(b"new6").unwrap(), None);
}
