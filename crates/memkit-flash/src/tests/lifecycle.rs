//! Failing writes, submitted batches, warm restart, shutdown.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use super::{KIB, TempDir, append, key, value};
use crate::{FlashLoc, FlashStore, ReadError};

#[test]
fn a_failed_write_stales_its_page_and_pauses_appends() {
    let dir = TempDir::new("writefail");
    let store = FlashStore::open(dir.cfg(&[1024 * KIB])).unwrap();
    let before = append(&store, b"before", b"written fine");
    store.flush().unwrap();
    store.fail_next_writes(1);
    let locs: Vec<FlashLoc> = (0..5).map(|i| append(&store, &key(i), &[3; 500])).collect();
    store.flush().unwrap();
    let s = store.stats();
    assert_eq!(s.write_errors, 1);
    assert_eq!(
        s.objects_evicted, 6,
        "the page's earlier record goes too: {s:?}"
    );
    for (i, at) in locs.iter().enumerate() {
        assert!(matches!(store.read(*at, &key(i)), Err(ReadError::Stale)));
    }
    assert!(matches!(
        store.read(before, b"before"),
        Err(ReadError::Stale)
    ));
    assert!(
        store.append(b"during", b"refused").is_none(),
        "degraded for a second"
    );
    assert_eq!(s.pages_used, 0, "the page went back to the free list");
    std::thread::sleep(Duration::from_millis(1050));
    let after = store
        .append(b"after", b"accepted again")
        .expect("the pause is over");
    store.flush().unwrap();
    assert_eq!(store.read(after, b"after").unwrap(), b"accepted again");
    assert_eq!(store.stats().write_errors, 1);
}

#[test]
fn submitted_batches_complete_in_order_once() {
    let dir = TempDir::new("submit");
    let store = FlashStore::open(dir.cfg(&[1024 * KIB])).unwrap();
    let locs: Vec<FlashLoc> = (0..200)
        .map(|i| append(&store, &key(i), &value(i, 2, 3000)))
        .collect();
    let (tx, rx) = mpsc::channel();
    for b in 0..20 {
        let mut reads: Vec<(FlashLoc, Vec<u8>)> =
            (b * 10..b * 10 + 10).map(|i| (locs[i], key(i))).collect();
        reads[3].1 = b"not this key".to_vec();
        reads[5].0.version += 1;
        let tx = tx.clone();
        store.submit(reads, Box::new(move |res| tx.send((b, res)).unwrap()));
    }
    let mut seen = [false; 20];
    for _ in 0..20 {
        let (b, res) = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert!(!seen[b], "batch {b} completed twice");
        seen[b] = true;
        assert_eq!(res.len(), 10);
        for (j, r) in res.into_iter().enumerate() {
            let i = b * 10 + j;
            match j {
                3 => assert!(matches!(r, Err(ReadError::BadCrc))),
                5 => assert!(matches!(r, Err(ReadError::Stale))),
                _ => assert_eq!(r.unwrap(), value(i, 2, 3000), "batch {b} read {j}"),
            }
        }
    }
    assert!(super::eventually(|| store.stats().io_queue == 0));
    // A panicking completion does not take the reader down.
    store.submit(vec![], Box::new(|_| panic!("completion panics")));
    let tx2 = tx.clone();
    store.submit(
        vec![(locs[0], key(0))],
        Box::new(move |r| tx2.send((0, r)).unwrap()),
    );
    assert!(rx.recv_timeout(Duration::from_secs(5)).unwrap().1[0].is_ok());
}

#[test]
fn save_state_and_restore_keep_every_location() {
    let dir = TempDir::new("restore");
    let cfg = dir.cfg(&[1024 * KIB, 512 * KIB]);
    let store = FlashStore::open(cfg.clone()).unwrap();
    // Enough to evict: versions differ between pages.
    let locs: Vec<FlashLoc> = (0..1400)
        .map(|i| append(&store, &key(i), &value(i, 3, 3000)))
        .collect();
    for at in locs.iter().step_by(3) {
        store.release(*at);
    }
    let state = store.save_state().unwrap();
    let live: Vec<usize> = (0..locs.len())
        .filter(|&i| store.is_live(locs[i]))
        .collect();
    assert!(!live.is_empty() && live.len() < locs.len());
    let (stats, pages) = (store.stats(), store.page_stats());
    drop(store);

    let restored = FlashStore::restore(cfg.clone(), &state).unwrap();
    for &i in &live {
        assert_eq!(
            restored.read(locs[i], &key(i)).unwrap(),
            value(i, 3, 3000),
            "record {i}"
        );
    }
    let s = restored.stats();
    assert_eq!(
        (s.bytes_used, s.objects_used),
        (stats.bytes_used, stats.objects_used)
    );
    for (a, b) in restored.page_stats().iter().zip(&pages) {
        assert_eq!((a.bytes, a.objects, a.free), (b.bytes, b.objects, b.free));
    }
    let fresh = append(&restored, b"new", b"after the restart");
    restored.flush().unwrap();
    assert_eq!(restored.read(fresh, b"new").unwrap(), b"after the restart");
    drop(restored);

    let refused = |cfg, state: &[u8]| FlashStore::restore(cfg, state).unwrap_err();
    let mut other = cfg.clone();
    other.files[1].size = 320 * KIB;
    let e = refused(other, &state);
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
    assert!(e.to_string().contains("configured"), "{e}");
    let mut other = cfg.clone();
    other.page_size = 128 * KIB;
    assert_eq!(
        refused(other, &state).kind(),
        std::io::ErrorKind::InvalidData
    );
    let mut other = cfg.clone();
    other.files.swap(0, 1);
    assert_eq!(
        refused(other, &state).kind(),
        std::io::ErrorKind::InvalidData
    );
    let mut bad = state.clone();
    bad[20] ^= 1;
    assert_eq!(
        refused(cfg.clone(), &bad).kind(),
        std::io::ErrorKind::InvalidData
    );
    assert_eq!(
        refused(cfg.clone(), &state[..10]).kind(),
        std::io::ErrorKind::InvalidData
    );
    assert_eq!(
        refused(cfg.clone(), &[]).kind(),
        std::io::ErrorKind::InvalidData
    );

    // A cold start forgets everything.
    let cold = FlashStore::open(cfg).unwrap();
    let i = live[0];
    assert!(cold.read(locs[i], &key(i)).is_err());
}

#[test]
fn shutdown_writes_buffers_joins_threads_and_is_idempotent() {
    let dir = TempDir::new("shutdown");
    let store = FlashStore::open(dir.cfg(&[1024 * KIB])).unwrap();
    let at = store.append(b"k", b"buffered only").unwrap();
    store.shutdown();
    assert!(store.threads.lock().is_empty());
    store.shutdown();
    assert!(store.append(b"k2", b"v").is_none());
    let mut on_file = vec![0; at.len as usize];
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(dir.0.join("f0")).unwrap();
    file.read_exact_at(&mut on_file, super::file_pos(at, super::PAGE))
        .unwrap();
    assert!(
        on_file.ends_with(b"buffered only"),
        "the buffer was written at shutdown"
    );
    assert_eq!(store.read(at, b"k").unwrap(), b"buffered only");
    store.flush().unwrap();
    // Batches submitted after shutdown still complete (on the caller's thread).
    let (tx, rx) = mpsc::channel();
    store.submit(
        vec![(at, b"k".to_vec())],
        Box::new(move |r| tx.send(r).unwrap()),
    );
    assert!(rx.try_recv().unwrap()[0].is_ok());
}

#[test]
fn the_last_handle_may_drop_on_a_reader_thread() {
    let dir = TempDir::new("lastdrop");
    let store = FlashStore::open(dir.cfg(&[1024 * KIB])).unwrap();
    let at = append(&store, b"k", b"v");
    let weak = Arc::downgrade(&store);
    let (tx, rx) = mpsc::channel();
    let keep = Arc::clone(&store);
    store.submit(
        vec![(at, b"k".to_vec())],
        Box::new(move |r| {
            std::thread::sleep(Duration::from_millis(20));
            drop(keep);
            tx.send(r).unwrap();
        }),
    );
    drop(store);
    assert!(rx.recv_timeout(Duration::from_secs(5)).unwrap()[0].is_ok());
    assert!(
        super::eventually(|| weak.upgrade().is_none()),
        "nothing keeps the store alive"
    );
}
