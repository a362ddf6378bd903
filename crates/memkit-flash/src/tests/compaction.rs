//! Compaction against a test owner: the cache's index as a map from key to location.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use super::{KIB, TempDir, append, eventually, key, value};
use crate::{FlashLoc, FlashStore, Owner, ReadError};

#[derive(Default)]
struct TestOwner {
    /// key -> (location, read since written)
    index: Mutex<HashMap<Vec<u8>, (FlashLoc, bool)>>,
}

impl Owner for TestOwner {
    fn wanted(&self, key: &[u8], at: FlashLoc) -> Option<bool> {
        let index = self.index.lock().unwrap();
        index
            .get(key)
            .filter(|(loc, _)| *loc == at)
            .map(|(_, read)| *read)
    }

    fn moved(&self, key: &[u8], from: FlashLoc, to: FlashLoc) -> bool {
        let mut index = self.index.lock().unwrap();
        match index.get_mut(key) {
            Some(entry) if entry.0 == from => {
                *entry = (to, false);
                true
            }
            _ => false,
        }
    }
}

/// 16 pages; fills about 12 of them, then deletes most keys (released, as the engine does).
fn fragmented(dir: &TempDir, drop_unread: bool) -> (Arc<FlashStore>, Arc<TestOwner>, usize) {
    let mut cfg = dir.cfg(&[1024 * KIB]);
    cfg.compact_under = 8;
    cfg.drop_unread = drop_unread;
    let store = FlashStore::open(cfg).unwrap();
    let owner = Arc::new(TestOwner::default());
    let n = 700;
    for i in 0..n {
        let at = append(&store, &key(i), &value(i, 1, 2000));
        // Every third key was read since written.
        owner.index.lock().unwrap().insert(key(i), (at, i % 3 == 0));
    }
    store.flush().unwrap();
    for i in (0..n).filter(|i| i % 5 != 0) {
        let (at, _) = owner.index.lock().unwrap().remove(&key(i)).unwrap();
        store.release(at);
    }
    (store, owner, n)
}

#[test]
fn compaction_moves_live_records_skips_dead_ones_and_frees_pages() {
    let dir = TempDir::new("compact");
    let (store, owner, n) = fragmented(&dir, false);
    let before = store.stats();
    assert!(before.pages_free < 8, "{before:?}");
    let old: HashMap<_, _> = owner.index.lock().unwrap().clone();
    let weak: Weak<dyn Owner> = Arc::downgrade(&owner) as Weak<dyn Owner>;
    store.set_owner(weak);
    assert!(
        eventually(|| store.stats().pages_free >= 8),
        "{:?}",
        store.stats()
    );
    let s = store.stats();
    assert!(s.compact_rescues > 0, "{s:?}");
    assert!(s.compact_skipped > 0, "{s:?}");
    assert_eq!(s.compact_lost, 0, "{s:?}");
    assert!(s.page_reclaims > 0, "{s:?}");
    assert!(
        s.bytes_written > before.bytes_written,
        "rescues are written again"
    );
    store.flush().unwrap();
    let index = owner.index.lock().unwrap();
    assert_eq!(index.len(), n.div_ceil(5));
    let mut moved = 0;
    for (k, (at, _)) in index.iter() {
        let i: usize = std::str::from_utf8(&k[4..]).unwrap().parse().unwrap();
        assert_eq!(store.read(*at, k).unwrap(), value(i, 1, 2000), "key {i}");
        if *at != old[k].0 {
            moved += 1;
            assert!(matches!(store.read(old[k].0, k), Err(ReadError::Stale)));
        }
    }
    assert_eq!(moved as u64, s.compact_rescues);
}

#[test]
fn drop_unread_loses_values_never_read() {
    let dir = TempDir::new("dropunread");
    let (store, owner, _) = fragmented(&dir, true);
    let old: HashMap<_, _> = owner.index.lock().unwrap().clone();
    store.set_owner(Arc::downgrade(&owner) as Weak<dyn Owner>);
    assert!(
        eventually(|| store.stats().pages_free >= 8),
        "{:?}",
        store.stats()
    );
    let s = store.stats();
    assert!(s.compact_lost > 0 && s.compact_rescues > 0, "{s:?}");
    let index = owner.index.lock().unwrap();
    let (mut lost, mut rescued) = (0, 0);
    for (k, (at, read)) in old.iter() {
        let now = index[k].0;
        if now != *at {
            assert!(read, "only values read are rescued");
            rescued += 1;
        } else if !store.is_live(*at) {
            assert!(!read, "only unread values are dropped");
            assert!(matches!(store.read(*at, k), Err(ReadError::Stale)));
            lost += 1;
        }
    }
    assert_eq!((lost, rescued), (s.compact_lost, s.compact_rescues));
}

#[test]
fn without_an_owner_only_empty_pages_are_reclaimed() {
    let dir = TempDir::new("noowner");
    let (store, owner, _) = fragmented(&dir, false);
    let used_before = store.stats().pages_used;
    std::thread::sleep(std::time::Duration::from_millis(250));
    assert_eq!(
        store.stats().page_reclaims,
        0,
        "fragmented pages are left to FIFO eviction"
    );
    // Release everything: every used page but the open one empties and is reclaimed.
    for (_, (at, _)) in owner.index.lock().unwrap().drain() {
        store.release(at);
    }
    assert!(
        eventually(|| store.stats().pages_used == 1),
        "{:?}",
        store.stats()
    );
    assert_eq!(store.stats().page_reclaims, used_before - 1);
    assert_eq!(store.stats().compact_rescues, 0);
}

#[test]
fn a_dropped_owner_stops_rescues_but_not_the_store() {
    let dir = TempDir::new("droppedowner");
    let (store, owner, _) = fragmented(&dir, false);
    store.set_owner(Arc::downgrade(&owner) as Weak<dyn Owner>);
    drop(owner);
    std::thread::sleep(std::time::Duration::from_millis(250));
    assert_eq!(store.stats().compact_rescues, 0);
    assert!(append(&store, b"k", b"v").len > 0);
}
