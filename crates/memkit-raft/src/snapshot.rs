//! Snapshots: the store's live items, with their CAS values and absolute expiries, plus the
//! log clock and a pending delayed flush, as one file in the node's directory, which is
//! also, byte for byte, what is sent to a peer (openraft streams it in chunks).
//!
//! Taken from a frozen view of the persistent store ([`Frozen`], a fjall snapshot at the
//! last applied entry) while entries go on being applied, not from the engine, whose RAM
//! is only a cache. Why a file of our own rather than fjall's files: a snapshot must move
//! between nodes whose stores differ in everything but their items (write stamps, flush
//! marks and compaction are each node's). Items come back with their CAS and their expiry
//! as an absolute time, so the restored store answers every later entry as the original one
//! would. What a snapshot does not carry: the meta protocol's stale marks and win tokens
//! (an item marked stale by `md ... I` comes back not stale) and access bits (fetched,
//! last access).
//!
//! The file (integers little-endian):
//!
//! ```text
//! magic      8 bytes  "MKRAFTSN"
//! version    u32      1
//! header_len u32
//! header     postcard ([`crate::codec`]): a [`Header`] (openraft's metadata, the log
//!            clock, the pending flush)
//! items      each: key_len u16, value_len u32, flags u32, cas u64, has_expiry u8,
//!            exptime_unix u64 (0 when none), the key, the value
//! count      u64      the number of items
//! crc32      u32      CRC-32 (zlib's) of every byte before it
//! ```
//!
//! Items are hand-framed rather than postcard-encoded: a million of them are written and
//! read one at a time through a 1 MiB buffer, with no allocation per item, so neither
//! taking nor installing a snapshot holds a second copy of the items in memory (the engine
//! being filled is the only one). A file is checked whole (length, checksum, magic,
//! version) before a single item is stored: a truncated or damaged file is refused, never
//! half-loaded.
//!
//! In the node's directory: `snapshot`, the current one; `snapshot.tmp`, one being taken;
//! `snapshot.recv`, one being received. Each is synced before it is renamed to `snapshot`,
//! and a snapshot never replaces one that covers more of the log ([`Files::publish`]).

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write as _};
use std::path::{Path, PathBuf};

use memkit_engine::Engine;
use memkit_persist::DiskStore;
use memkit_persist::batch::Frozen;
use memkit_types::Clock;
use openraft::{AnyError, RaftSnapshotBuilder, Snapshot, StorageIOError};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::codec;
use crate::types::{ExptimeUnix, LogId, SnapshotMeta, StorageError, TypeConfig};

/// A snapshot file's first bytes.
pub const MAGIC: [u8; 8] = *b"MKRAFTSN";
/// The file format's version.
pub const VERSION: u32 = 1;

/// Magic, version, header length.
const PREFIX: usize = 8 + 4 + 4;
/// Item count, checksum.
const TRAILER: usize = 8 + 4;
/// An item's fixed part: key_len, value_len, flags, cas, has_expiry, exptime.
const ITEM_HEAD: usize = 2 + 4 + 4 + 8 + 1 + 8;
/// The write and read buffers.
const BUF: usize = 1 << 20;
/// Bytes of items written to the store in one batch while a snapshot is installed.
const INSTALL_BATCH: usize = 4 << 20;

/// What precedes a snapshot's items.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// openraft's metadata: last log id, membership, snapshot id.
    pub meta: SnapshotMeta,
    /// The log clock (Unix milliseconds) at the snapshot's last entry.
    pub clock_ms: u64,
    /// The engine's mark of the last delayed flush, Unix seconds, if any.
    pub pending_flush: Option<u64>,
}

/// One item of a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// The key.
    pub key: &'a [u8],
    /// The value.
    pub value: &'a [u8],
    /// Client flags.
    pub flags: u32,
    /// The CAS (derived from the log when it was written).
    pub cas: u64,
    /// Absolute expiry.
    pub exptime_unix: ExptimeUnix,
}

pub(crate) fn read_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::read_snapshot(None, AnyError::new(&e)).into()
}

fn write_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::write_snapshot(None, AnyError::new(&e)).into()
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("snapshot file: {what}"))
}

/// Writes a snapshot file: the header, then items one by one, then the trailer.
#[derive(Debug)]
pub struct Writer {
    file: File,
    buf: Vec<u8>,
    crc: crc32fast::Hasher,
    count: u64,
}

impl Writer {
    /// Creates (or truncates) `path` and writes the header.
    pub fn create(path: &Path, header: &Header) -> io::Result<Writer> {
        let body = codec::to_vec(header).map_err(io::Error::other)?;
        let len = u32::try_from(body.len()).map_err(|_| bad("header too large"))?;
        let mut w = Writer {
            file: File::create(path)?,
            buf: Vec::with_capacity(BUF + BUF / 4),
            crc: crc32fast::Hasher::new(),
            count: 0,
        };
        w.buf.extend_from_slice(&MAGIC);
        w.buf.extend_from_slice(&VERSION.to_le_bytes());
        w.buf.extend_from_slice(&len.to_le_bytes());
        w.buf.extend_from_slice(&body);
        Ok(w)
    }

    fn spill(&mut self) -> io::Result<()> {
        self.crc.update(&self.buf);
        self.file.write_all(&self.buf)?;
        self.buf.clear();
        Ok(())
    }

    /// Appends one item.
    pub fn push(&mut self, r: &Record<'_>) -> io::Result<()> {
        let key_len = u16::try_from(r.key.len()).map_err(|_| bad("key too long"))?;
        let value_len = u32::try_from(r.value.len()).map_err(|_| bad("value too large"))?;
        let b = &mut self.buf;
        b.extend_from_slice(&key_len.to_le_bytes());
        b.extend_from_slice(&value_len.to_le_bytes());
        b.extend_from_slice(&r.flags.to_le_bytes());
        b.extend_from_slice(&r.cas.to_le_bytes());
        b.push(u8::from(r.exptime_unix.is_some()));
        b.extend_from_slice(&r.exptime_unix.unwrap_or(0).to_le_bytes());
        b.extend_from_slice(r.key);
        b.extend_from_slice(r.value);
        self.count += 1;
        if self.buf.len() >= BUF {
            self.spill()?;
        }
        Ok(())
    }

    /// Writes the trailer and returns the file, written but not synced (the caller syncs
    /// it before it counts on it, outside whatever it holds while items are listed).
    pub fn finish(mut self) -> io::Result<File> {
        self.buf.extend_from_slice(&self.count.to_le_bytes());
        self.crc.update(&self.buf);
        let crc = std::mem::take(&mut self.crc).finalize();
        self.buf.extend_from_slice(&crc.to_le_bytes());
        self.file.write_all(&self.buf)?;
        Ok(self.file)
    }
}

/// Writes every item of `frozen` live at the log clock of `header` to `path`.
pub fn write_frozen(path: &Path, header: &Header, frozen: &Frozen) -> io::Result<File> {
    let mut w = Writer::create(path, header)?;
    for item in frozen.live(header.clock_ms / 1000) {
        let (key, item) = item?;
        w.push(&Record {
            key: &key,
            value: &item.value,
            flags: item.flags,
            cas: item.cas,
            exptime_unix: item.exptime_unix,
        })?;
    }
    w.finish()
}

/// Checks a whole snapshot file: its length, checksum, magic and version, and that its
/// header decodes. Returns the header.
pub fn verify(file: &mut File) -> io::Result<Header> {
    let len = file.seek(SeekFrom::End(0))?;
    if len < (PREFIX + TRAILER) as u64 {
        return Err(bad("truncated"));
    }
    file.seek(SeekFrom::Start(0))?;
    let mut crc = crc32fast::Hasher::new();
    let mut left = len - 4;
    let mut buf = vec![0; BUF];
    while left > 0 {
        let n = left.min(BUF as u64) as usize;
        file.read_exact(&mut buf[..n])?;
        crc.update(&buf[..n]);
        left -= n as u64;
    }
    let mut stored = [0; 4];
    file.read_exact(&mut stored)?;
    if crc.finalize() != u32::from_le_bytes(stored) {
        return Err(bad("checksum mismatch (truncated or damaged)"));
    }
    let (header, _) = Reader::open(file)?;
    Ok(header)
}

/// Reads a snapshot file's items in order, through one buffer.
#[derive(Debug)]
pub struct Reader<'f> {
    src: BufReader<&'f mut File>,
    /// Bytes of items left before the trailer.
    left: u64,
    count: u64,
    key: Vec<u8>,
    value: Vec<u8>,
}

impl<'f> Reader<'f> {
    /// Reads `file`'s header from its start; the items follow. Checks what it reads, not the
    /// checksum: [`verify`] the file first.
    pub fn open(file: &'f mut File) -> io::Result<(Header, Reader<'f>)> {
        let len = file.seek(SeekFrom::End(0))?;
        file.seek(SeekFrom::Start(0))?;
        let mut src = BufReader::with_capacity(BUF, file);
        let mut prefix = [0; PREFIX];
        src.read_exact(&mut prefix).map_err(|_| bad("truncated"))?;
        if prefix[..8] != MAGIC {
            return Err(bad("not a memkit-raft snapshot (bad magic)"));
        }
        let version = u32::from_le_bytes(prefix[8..12].try_into().expect("4 bytes"));
        if version != VERSION {
            return Err(bad(&format!(
                "version {version}, this build reads {VERSION}"
            )));
        }
        let header_len = u32::from_le_bytes(prefix[12..16].try_into().expect("4 bytes"));
        let items_at = (PREFIX as u64 + u64::from(header_len)) + TRAILER as u64;
        let left = len.checked_sub(items_at).ok_or_else(|| bad("truncated"))?;
        let mut body = vec![0; header_len as usize];
        src.read_exact(&mut body)?;
        let header = codec::from_slice(&body).map_err(|e| bad(&format!("header: {e}")))?;
        let r = Reader {
            src,
            left,
            count: 0,
            key: Vec::new(),
            value: Vec::new(),
        };
        Ok((header, r))
    }

    /// The next item, or `None` after the last (once the item count has been checked).
    pub fn next_item(&mut self) -> io::Result<Option<Record<'_>>> {
        if self.left == 0 {
            let mut count = [0; 8];
            self.src.read_exact(&mut count)?;
            if u64::from_le_bytes(count) != self.count {
                return Err(bad("item count mismatch"));
            }
            return Ok(None);
        }
        let mut h = [0; ITEM_HEAD];
        self.src.read_exact(&mut h)?;
        let le64 = |at: usize| u64::from_le_bytes(h[at..at + 8].try_into().expect("8 bytes"));
        let key_len = u16::from_le_bytes([h[0], h[1]]) as usize;
        let value_len = u32::from_le_bytes(h[2..6].try_into().expect("4 bytes")) as usize;
        let flags = u32::from_le_bytes(h[6..10].try_into().expect("4 bytes"));
        let cas = le64(10);
        let exptime_unix = (h[18] != 0).then(|| le64(19));
        let size = (ITEM_HEAD + key_len + value_len) as u64;
        self.left = self
            .left
            .checked_sub(size)
            .ok_or_else(|| bad("item overruns"))?;
        self.key.resize(key_len, 0);
        self.src.read_exact(&mut self.key)?;
        self.value.resize(value_len, 0);
        self.src.read_exact(&mut self.value)?;
        self.count += 1;
        Ok(Some(Record {
            key: &self.key,
            value: &self.value,
            flags,
            cas,
            exptime_unix,
        }))
    }
}

/// Replaces every item of `disk` with a snapshot file's (written in batches, with the
/// store's clock standing at the snapshot's `clock_ms`), empties `engine`'s RAM (which
/// then loads from the new items), and re-arms a delayed flush still to come. Returns the
/// header. [`verify`] the file first: this stops at the first bad item, the items before
/// it stored.
pub fn fill(file: &mut File, disk: &DiskStore, engine: &Engine) -> io::Result<Header> {
    let (header, mut items) = Reader::open(file)?;
    let now = engine.clock().now_secs();
    let pending_flush = header.pending_flush.filter(|&at| at >= now);
    let mut records = std::iter::from_fn(|| match items.next_item() {
        Ok(Some(it)) => {
            let rec = disk.encode(&memkit_engine::Record {
                key: it.key,
                value: it.value,
                flags: it.flags,
                exptime_unix: it.exptime_unix,
                cas: it.cas,
                stale: false,
                win_sent: false,
            });
            Some(Ok((it.key.to_vec(), rec)))
        }
        Ok(None) => None,
        Err(e) => Some(Err(e)),
    });
    disk.replace_all(&mut records, pending_flush, INSTALL_BATCH)?;
    // After the disk: a reader that loaded an old item meanwhile loses it here.
    engine.clear();
    // At or after the snapshot's second: every restored item counts as written before it,
    // as every live item was on the node that took the snapshot.
    if let Some(at) = pending_flush {
        engine.restore_pending_flush(at);
    }
    Ok(header)
}

/// A node's snapshot files.
#[derive(Debug)]
pub struct Files {
    dir: PathBuf,
    /// Held while a file replaces `snapshot`: a snapshot taken and one received, both
    /// finishing at once, must not let the older one win.
    publishing: Mutex<()>,
}

impl Files {
    /// The files in `dir`.
    pub fn new(dir: &Path) -> Files {
        Files {
            dir: dir.to_path_buf(),
            publishing: Mutex::new(()),
        }
    }

    /// The current snapshot.
    pub fn current_path(&self) -> PathBuf {
        self.dir.join("snapshot")
    }

    /// Where a snapshot is taken.
    pub fn tmp_path(&self) -> PathBuf {
        self.dir.join("snapshot.tmp")
    }

    /// Where a snapshot is received.
    pub fn recv_path(&self) -> PathBuf {
        self.dir.join("snapshot.recv")
    }

    /// The current snapshot, open for reading, if there is one.
    pub fn open_current(&self) -> io::Result<Option<File>> {
        match File::open(self.current_path()) {
            Ok(f) => Ok(Some(f)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A new, empty file to receive a snapshot into (any earlier one removed first, so a
    /// handle still open on it writes elsewhere).
    pub fn create_recv(&self) -> io::Result<File> {
        let path = self.recv_path();
        match fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
    }

    /// Makes `from` (a synced snapshot file covering the log up to `last`) the current
    /// snapshot, unless the current one covers more; then `from` is removed. Returns whether
    /// it replaced it.
    pub fn publish(&self, from: &Path, last: Option<LogId>) -> io::Result<bool> {
        let _held = self.publishing.lock();
        let current = match self.open_current()? {
            Some(mut f) => Reader::open(&mut f).ok().map(|(h, _)| h.meta.last_log_id),
            None => None,
        };
        if current.is_some_and(|c| c > last) {
            fs::remove_file(from)?;
            return Ok(false);
        }
        fs::rename(from, self.current_path())?;
        File::open(&self.dir)?.sync_all()?;
        Ok(true)
    }
}

/// Builds a snapshot from the view the state machine froze: syncs the store (the log up to
/// the snapshot may be purged once it is built), writes the file ([`write_frozen`]), syncs
/// it and makes it the node's snapshot, off the state machine's task.
#[derive(Debug)]
pub struct SnapshotBuilder {
    files: std::sync::Arc<Files>,
    disk: std::sync::Arc<DiskStore>,
    header: Header,
    frozen: Option<memkit_types::Result<Frozen>>,
}

impl SnapshotBuilder {
    pub(crate) fn new(
        files: std::sync::Arc<Files>,
        disk: std::sync::Arc<DiskStore>,
        header: Header,
        frozen: memkit_types::Result<Frozen>,
    ) -> SnapshotBuilder {
        SnapshotBuilder {
            files,
            disk,
            header,
            frozen: Some(frozen),
        }
    }
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let frozen = self
            .frozen
            .take()
            .unwrap_or_else(|| Err(memkit_types::Error::Server("snapshot already built".into())))
            .map_err(write_err)?;
        let (files, disk, header) = (self.files.clone(), self.disk.clone(), self.header.clone());
        let last = header.meta.last_log_id;
        let file = tokio::task::spawn_blocking(move || -> io::Result<File> {
            disk.sync().map_err(io::Error::other)?;
            let mut file = write_frozen(&files.tmp_path(), &header, &frozen)?;
            drop(frozen);
            file.sync_all()?;
            // The handle reads this snapshot even if a newer one wins and it is removed.
            files.publish(&files.tmp_path(), last)?;
            file.seek(SeekFrom::Start(0))?;
            Ok(file)
        })
        .await
        .map_err(write_err)?
        .map_err(write_err)?;
        Ok(Snapshot {
            meta: self.header.meta.clone(),
            snapshot: Box::new(tokio::fs::File::from_std(file)),
        })
    }
}

#[cfg(test)]
mod tests {
    use memkit_engine::EngineConfig;
    use memkit_persist::{Durability, PersistOptions, Persistent};
    use memkit_types::{Exptime, StoreMode, StoreOptions, SystemClock};

    use super::*;

    /// A directory of its own, removed at the end.
    struct Tmp(PathBuf);

    impl Tmp {
        fn new(name: &str) -> Tmp {
            let p = std::env::temp_dir().join(format!(
                "memkit-raft-snap-{name}-{}-{}",
                std::process::id(),
                SystemClock.now_millis()
            ));
            fs::create_dir_all(&p).unwrap();
            Tmp(p)
        }
    }

    impl Drop for Tmp {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    /// A batched store (as the state machine's) in `tmp/name`.
    fn store(tmp: &Tmp, name: &str) -> Persistent {
        let opts = PersistOptions {
            durability: Durability::None,
            batched: true,
            ..PersistOptions::new(tmp.0.join(name))
        };
        memkit_persist::open(&opts, EngineConfig::with_memory(16 << 20)).unwrap()
    }

    fn header(index: u64) -> Header {
        Header {
            meta: SnapshotMeta {
                last_log_id: Some(LogId::new(openraft::CommittedLeaderId::new(2, 1), index)),
                snapshot_id: format!("2-{index}-5000"),
                ..Default::default()
            },
            clock_ms: 5_000,
            pending_flush: None,
        }
    }

    /// Every live item as (key, value, flags, cas, absolute expiry), sorted.
    type Dumped = Vec<(Vec<u8>, Vec<u8>, u32, u64, ExptimeUnix)>;

    fn dump(p: &Persistent) -> Dumped {
        let now = SystemClock.now_secs();
        let frozen = p.store.freeze().unwrap();
        frozen
            .live(now)
            .map(|r| {
                let (k, it) = r.unwrap();
                (k.to_vec(), it.value, it.flags, it.cas, it.exptime_unix)
            })
            .collect()
    }

    /// A store of 2000 items: binary values (one empty), flags, CAS values, expiries.
    fn filled(tmp: &Tmp) -> Persistent {
        let p = store(tmp, "filled");
        let e = &p.engine;
        let later = SystemClock.now_secs() + 1_000;
        for i in 0..2_000u64 {
            let value: Vec<u8> = (0..(i % 300)).map(|b| (b * 7 + i) as u8).collect();
            let opts = StoreOptions {
                mode: StoreMode::Set,
                flags: i as u32 * 3,
                exptime: if i % 2 == 0 {
                    Exptime::NEVER
                } else {
                    Exptime::at_unix(later + i)
                },
                new_cas: Some(10 + i),
                ..Default::default()
            };
            e.store(format!("key-{i}").as_bytes(), &value, &opts)
                .unwrap();
        }
        p.store.commit(&[]).unwrap();
        p
    }

    fn frozen(p: &Persistent) -> Frozen {
        p.store.freeze().unwrap()
    }

    #[test]
    fn items_survive_a_snapshot_file() {
        let tmp = Tmp::new("items");
        let (p, path) = (filled(&tmp), tmp.0.join("s"));
        write_frozen(&path, &header(42), &frozen(&p))
            .unwrap()
            .sync_all()
            .unwrap();
        let mut f = File::open(&path).unwrap();
        assert_eq!(verify(&mut f).unwrap(), header(42));
        let back = store(&tmp, "back");
        back.engine
            .store(b"not-in-the-snapshot", b"x", &StoreOptions::default())
            .unwrap();
        back.store.commit(&[]).unwrap();
        let header_back = fill(&mut f, &back.store, &back.engine).unwrap();
        assert_eq!(header_back, header(42));
        let want = dump(&p);
        assert_eq!(want.len(), 2_000);
        assert_eq!(dump(&back), want);
        // Hand-framed: 27 bytes an item besides its key and value.
        let payload: usize = want.iter().map(|(k, v, ..)| k.len() + v.len()).sum();
        let len = fs::metadata(&path).unwrap().len() as usize;
        assert!(
            len < payload + 2_000 * ITEM_HEAD + 4096,
            "{len} for {payload}"
        );
    }

    #[test]
    fn a_damaged_or_truncated_file_is_refused_whole() {
        let tmp = Tmp::new("damaged");
        let path = tmp.0.join("s");
        write_frozen(&path, &header(7), &frozen(&filled(&tmp))).unwrap();
        let good = fs::read(&path).unwrap();
        let cut = |n: usize| good[..n].to_vec();
        let mut flipped = good.clone();
        flipped[good.len() / 2] ^= 1;
        let mut version = good.clone();
        version[8] = 2;
        let cases = [
            cut(0),
            cut(12),
            cut(PREFIX + TRAILER),
            cut(good.len() / 2),
            cut(good.len() - TRAILER),
            cut(good.len() - 1),
            flipped,
            version,
        ];
        for bytes in cases {
            fs::write(&path, &bytes).unwrap();
            let mut f = File::open(&path).unwrap();
            assert!(verify(&mut f).is_err(), "{} bytes accepted", bytes.len());
        }
        // Not a snapshot of this format at all: the JSON files of earlier versions began
        // with a length.
        fs::write(&path, [&[0, 0, 0, 2][..], b"{}", &[0; 32]].concat()).unwrap();
        let err = verify(&mut File::open(&path).unwrap()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
    }

    #[test]
    fn an_older_snapshot_never_replaces_a_newer_one() {
        let tmp = Tmp::new("publish");
        let files = Files::new(&tmp.0);
        let e = frozen(&store(&tmp, "empty"));
        write_frozen(&files.tmp_path(), &header(20), &e).unwrap();
        assert!(
            files
                .publish(&files.tmp_path(), header(20).meta.last_log_id)
                .unwrap()
        );
        write_frozen(&files.recv_path(), &header(10), &e).unwrap();
        assert!(
            !files
                .publish(&files.recv_path(), header(10).meta.last_log_id)
                .unwrap()
        );
        assert!(!files.recv_path().exists(), "the older one is removed");
        let mut cur = files.open_current().unwrap().unwrap();
        assert_eq!(verify(&mut cur).unwrap(), header(20));
        write_frozen(&files.recv_path(), &header(30), &e).unwrap();
        assert!(
            files
                .publish(&files.recv_path(), header(30).meta.last_log_id)
                .unwrap()
        );
        let mut cur = files.open_current().unwrap().unwrap();
        assert_eq!(verify(&mut cur).unwrap(), header(30));
    }
}
