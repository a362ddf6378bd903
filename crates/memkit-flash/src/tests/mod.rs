//! The store's behaviour, on real files in a temporary directory.

mod compaction;
mod lifecycle;

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::time::{Duration, Instant};

use crate::{FileSpec, FlashConfig, FlashLoc, FlashStore, ReadError};

pub(crate) const KIB: u64 = 1024;
pub(crate) const PAGE: u64 = 64 * KIB;

/// A directory of its own under the system's temp dir, removed on drop.
pub(crate) struct TempDir(pub(crate) PathBuf);

impl TempDir {
    pub(crate) fn new(name: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let unique = format!(
            "memkit-flash-{name}-{}-{nanos}-{}",
            std::process::id(),
            N.fetch_add(1, Relaxed)
        );
        let dir = std::env::temp_dir().join(unique);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    /// A config of files of these sizes, 64 KiB pages, 16 KiB buffers.
    pub(crate) fn cfg(&self, sizes: &[u64]) -> FlashConfig {
        let files = (sizes.iter().enumerate())
            .map(|(i, &size)| FileSpec {
                path: self.0.join(format!("f{i}")),
                size,
            })
            .collect();
        FlashConfig {
            files,
            page_size: PAGE,
            wbuf_size: 16 * KIB as usize,
            wbufs: 64,
            io_threads: 2,
            compact_under: 1,
            max_frag: 0.8,
            drop_unread: false,
        }
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub(crate) fn key(i: usize) -> Vec<u8> {
    format!("key:{i}").into_bytes()
}

/// A value of a size and contents that depend on `i` (and `salt`).
pub(crate) fn value(i: usize, salt: u8, max: usize) -> Vec<u8> {
    let len = (i * 7919) % max;
    (0..len)
        .map(|j| (j as u8).wrapping_mul(31).wrapping_add(i as u8) ^ salt)
        .collect()
}

/// Appends, waiting for the writer when it lags (the tests want every record stored).
pub(crate) fn append(store: &FlashStore, k: &[u8], v: &[u8]) -> FlashLoc {
    for _ in 0..100 {
        if let Some(at) = store.append(k, v) {
            return at;
        }
        store.flush().unwrap();
    }
    panic!("append refused");
}

/// Polls `cond` for up to 5 s.
pub(crate) fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

/// Where a location's record is in a one-file store.
pub(crate) fn file_pos(at: FlashLoc, page_size: u64) -> u64 {
    u64::from(at.page) * page_size + u64::from(at.offset)
}

#[test]
fn roundtrip_thousands_of_records_over_many_pages_and_two_files() {
    let dir = TempDir::new("roundtrip");
    let store = FlashStore::open(dir.cfg(&[2048 * KIB, 3072 * KIB])).unwrap();
    assert_eq!(store.page_stats().len(), 80);
    let locs: Vec<FlashLoc> = (0..3000)
        .map(|i| append(&store, &key(i), &value(i, 0, 3000)))
        .collect();
    // Before the flush some are in buffers, some on the file: all read back.
    for (i, at) in locs.iter().enumerate() {
        assert_eq!(
            store.read(*at, &key(i)).unwrap(),
            value(i, 0, 3000),
            "record {i}"
        );
    }
    store.flush().unwrap();
    for (i, at) in locs.iter().enumerate().rev() {
        assert_eq!(
            store.read(*at, &key(i)).unwrap(),
            value(i, 0, 3000),
            "record {i}"
        );
        assert!(store.is_live(*at));
        assert_eq!(
            at.len as usize,
            FlashStore::record_len(key(i).len(), value(i, 0, 3000).len())
        );
    }
    let pages: std::collections::HashSet<u32> = locs.iter().map(|l| l.page).collect();
    assert!(pages.len() > 40, "{} pages", pages.len());
    assert!(pages.iter().any(|&p| p >= 32), "the second file is used");
    let s = store.stats();
    assert_eq!(s.objects_written, 3000);
    assert_eq!(s.objects_read, 6000);
    assert_eq!(s.objects_used, 3000);
    assert_eq!(
        s.bytes_used,
        locs.iter().map(|l| u64::from(l.len)).sum::<u64>()
    );
    assert_eq!(s.bytes_written, s.bytes_used);
    assert_eq!(s.page_evictions, 0);
}

#[test]
fn reads_are_served_from_buffers_until_written() {
    let dir = TempDir::new("buffers");
    let mut cfg = dir.cfg(&[1024 * KIB]);
    cfg.wbufs = 2;
    let store = FlashStore::open(cfg).unwrap();
    store.inner.stall.store(true, SeqCst);
    // 1000-byte records: 16 per buffer. Two buffers queued, one current.
    let mut locs = Vec::new();
    while let Some(at) = store.append(&key(locs.len()), &[locs.len() as u8; 990]) {
        locs.push(at);
        assert!(locs.len() < 100, "the writer lags: append must refuse");
    }
    assert!(locs.len() > 32, "{} appended", locs.len());
    assert_eq!(store.inner.ws.lock().queued.len(), 2);
    let file = File::open(dir.0.join("f0")).unwrap();
    let on_file = |at: FlashLoc| {
        let mut b = vec![0; at.len as usize];
        file.read_exact_at(&mut b, file_pos(at, PAGE)).unwrap();
        b.iter().any(|&x| x != 0)
    };
    for (i, at) in locs.iter().enumerate() {
        assert!(!on_file(*at), "record {i} is not written yet");
        assert_eq!(store.read(*at, &key(i)).unwrap(), vec![i as u8; 990]);
    }
    store.inner.stall.store(false, SeqCst);
    store.flush().unwrap();
    for (i, at) in locs.iter().enumerate() {
        assert!(on_file(*at), "record {i} is written");
        assert_eq!(store.read(*at, &key(i)).unwrap(), vec![i as u8; 990]);
    }
    assert!(store.append(b"k", b"v").is_some(), "room again");
}

#[test]
fn corrupt_bytes_and_other_keys_are_bad_crc() {
    let dir = TempDir::new("crc");
    let store = FlashStore::open(dir.cfg(&[1024 * KIB])).unwrap();
    let a = append(&store, b"alpha", b"the value of alpha");
    let b = append(&store, b"beta", b"the value of beta");
    store.flush().unwrap();
    assert!(matches!(store.read(a, b"beta"), Err(ReadError::BadCrc)));
    assert!(matches!(store.read(a, b"alphb"), Err(ReadError::BadCrc)));
    let longer = FlashLoc {
        len: a.len + 1,
        ..a
    };
    assert!(matches!(
        store.read(longer, b"alpha"),
        Err(ReadError::BadCrc)
    ));
    let shifted = FlashLoc {
        offset: a.offset + 1,
        ..a
    };
    assert!(matches!(
        store.read(shifted, b"alpha"),
        Err(ReadError::BadCrc)
    ));
    let nowhere = FlashLoc { page: 1000, ..a };
    assert!(matches!(
        store.read(nowhere, b"alpha"),
        Err(ReadError::BadCrc)
    ));
    let past_page = FlashLoc {
        offset: PAGE as u32 - 4,
        ..a
    };
    assert!(matches!(
        store.read(past_page, b"alpha"),
        Err(ReadError::BadCrc)
    ));

    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.0.join("f0"))
        .unwrap();
    let pos = file_pos(a, PAGE) + 12;
    let mut byte = [0];
    File::open(dir.0.join("f0"))
        .unwrap()
        .read_exact_at(&mut byte, pos)
        .unwrap();
    file.write_all_at(&[byte[0] ^ 1], pos).unwrap();
    assert!(matches!(store.read(a, b"alpha"), Err(ReadError::BadCrc)));
    assert_eq!(store.read(b, b"beta").unwrap(), b"the value of beta");
}

#[test]
fn a_full_store_evicts_its_oldest_page() {
    let dir = TempDir::new("evict");
    // Four pages; no owner, so nothing is compacted.
    let store = FlashStore::open(dir.cfg(&[256 * KIB])).unwrap();
    let locs: Vec<FlashLoc> = (0..400)
        .map(|i| append(&store, &key(i), &[7; 1000]))
        .collect();
    store.flush().unwrap();
    let s = store.stats();
    assert!(s.page_evictions >= 2, "{s:?}");
    assert!(s.objects_evicted >= 100, "{s:?}");
    assert!(s.bytes_evicted >= 100 * 1000, "{s:?}");
    assert_eq!(s.pages_free, 0);
    assert!(matches!(
        store.read(locs[0], &key(0)),
        Err(ReadError::Stale)
    ));
    assert!(!store.is_live(locs[0]));
    assert_eq!(store.read(locs[399], &key(399)).unwrap(), vec![7; 1000]);
    let live = locs.iter().filter(|l| store.is_live(**l)).count() as u64;
    assert_eq!(live, s.objects_used);
    assert_eq!(s.objects_used + s.objects_evicted, 400);
}

#[test]
fn records_larger_than_a_buffer_or_with_long_keys_are_refused() {
    let dir = TempDir::new("large");
    let store = FlashStore::open(dir.cfg(&[1024 * KIB])).unwrap();
    assert!(store.append(b"k", &vec![0; 16 * 1024 - 9]).is_none());
    assert!(store.append(b"k", &vec![0; 16 * 1024 - 10]).is_some());
    assert!(store.append(&[b'k'; 256], b"v").is_none());
    assert!(store.append(&[b'k'; 255], b"v").is_some());
}

#[test]
fn release_and_stats_account_live_bytes_and_fragmentation() {
    let dir = TempDir::new("release");
    let store = FlashStore::open(dir.cfg(&[1024 * KIB])).unwrap();
    let s = store.stats();
    assert_eq!((s.pages_free, s.pages_used, s.bytes_fragmented), (16, 0, 0));
    assert_eq!(s.limit_maxbytes, 1024 * KIB);
    let locs: Vec<FlashLoc> = (0..10)
        .map(|i| append(&store, &key(i), &[1; 100]))
        .collect();
    let len = u64::from(locs[0].len);
    let s = store.stats();
    assert_eq!((s.pages_free, s.pages_used), (15, 1));
    assert_eq!((s.objects_used, s.bytes_used), (10, 10 * len));
    assert_eq!(s.bytes_fragmented, PAGE - 10 * len);
    for at in &locs[..3] {
        store.release(*at);
    }
    let s = store.stats();
    assert_eq!((s.objects_used, s.bytes_used), (7, 7 * len));
    assert_eq!(s.bytes_fragmented, PAGE - 7 * len);
    let p = &store.page_stats()[locs[0].page as usize];
    assert_eq!(
        (p.bytes, p.objects, p.free, p.version),
        (7 * len, 7, false, locs[0].version)
    );
    assert!(store.page_stats().iter().filter(|p| p.free).count() == 15);
    // Released locations still read: the cache decides what it points at.
    assert_eq!(store.read(locs[0], &key(0)).unwrap(), vec![1; 100]);
}

#[test]
fn the_page_size_follows_the_smallest_file() {
    let dir = TempDir::new("pagesize");
    let mut cfg = dir.cfg(&[1024 * KIB, 512 * KIB]);
    cfg.page_size = 64 << 20;
    let store = FlashStore::open(cfg).unwrap();
    // A quarter of 512 KiB: 8 + 4 pages of 128 KiB.
    assert_eq!(store.page_stats().len(), 12);
    assert_eq!(store.stats().limit_maxbytes, 1536 * KIB);
    let mut cfg = dir.cfg(&[32 * KIB]);
    cfg.files[0].path = dir.0.join("tiny");
    assert_eq!(
        FlashStore::open(cfg).unwrap_err().kind(),
        std::io::ErrorKind::InvalidInput
    );
    assert!(FlashStore::open(FlashConfig::default()).is_err());
}

#[test]
fn concurrent_appends_and_reads_never_return_wrong_bytes() {
    let dir = TempDir::new("concurrent");
    let mut cfg = dir.cfg(&[512 * KIB]);
    cfg.wbufs = 2;
    let store = FlashStore::open(cfg).unwrap();
    let threads: Vec<_> = (0..4u8)
        .map(|t| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                let mut mine = Vec::new();
                let (mut ok, mut missed) = (0, 0);
                for i in 0..2000 {
                    let k = format!("t{t}:{i}").into_bytes();
                    if let Some(at) = store.append(&k, &value(i, t, 2000)) {
                        mine.push((i, k, at));
                    }
                    if mine.is_empty() {
                        continue;
                    }
                    let (j, k, at) = &mine[(i * 13) % mine.len()];
                    match store.read(*at, k) {
                        Ok(v) => {
                            assert_eq!(v, value(*j, t, 2000));
                            ok += 1;
                        }
                        Err(ReadError::Stale) => missed += 1,
                        Err(e) => panic!("{e:?}"),
                    }
                }
                (ok, missed)
            })
        })
        .collect();
    for t in threads {
        let (ok, _missed) = t.join().unwrap();
        assert!(ok > 100);
    }
    assert!(store.stats().page_evictions > 0);
}
