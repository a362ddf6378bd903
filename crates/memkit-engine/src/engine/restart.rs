//! Warm restart (`memkitd -e FILE`): the cache written to a file at a graceful stop and read
//! back by the next start with the same settings, items with their values, flags, CAS,
//! expiry times and meta bits.
//!
//! memcached 1.5.18+ keeps its item memory in the mmapped file itself. The engine's item
//! memory is anonymous segments and out-of-line blocks, so it is written out once, at the
//! stop, instead: nothing touches the file while the server runs. A crash therefore leaves
//! no snapshot, and a start that finds one removes it as soon as it has it open, so no later
//! start can come back to an older cache.
//!
//! File layout (little endian):
//!
//! ```text
//! magic "memkitWR" | version:u32 | shards:u32 | memory_limit:u64 | item_size_max:u64
//!   | hash_seed:u64 | saved_at_unix:u64 | items:u64 | data_bytes:u64
//!   | per shard: offset, len, items, seq, flush_at_unix, index_capacity:u64, crc32:u32
//!   | crc32 of everything above
//!   | the shards' sections of records, back to back (`shard::restart`)
//! ```
//!
//! Shards are written and read by parallel threads (one per core), each over its own
//! sections; the file is written as `FILE.tmp`, synced, and renamed over `FILE`.
//!
//! The cache and its file are each about as large as `-m`, and at a stop or start both
//! exist at once. Taking that much memory anew is the expensive part on a VM whose free
//! memory goes back to the host (about 4 s a GiB, against 1 s for pages just freed), so each
//! side hands memory over to the other as it goes: a stop that ends the process empties
//! each shard as soon as its section is written ([`Engine::warm_save_and_clear`]), and the
//! restore reads the file mapped and gives its pages back behind itself (`restart/mapped.rs`:
//! the engine's only `unsafe`, a shared mapping whose released pages nothing reads again).

use std::fs::{self, File, OpenOptions};
use std::hash::BuildHasher;
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::{Engine, EngineConfig};
use crate::shard::restart::{MAX_SEQ, RECORD_HEAD, RecordHead, ShardState};

mod mapped;
use mapped::{Cursor, Mapped};

const MAGIC: &[u8; 8] = b"memkitWR";
/// Bumped whenever the layout or the meaning of a field changes: a file of another version
/// is never read.
const VERSION: u32 = 2;
const FIXED: usize = 64;
const SECTION: usize = 52;
/// Buffered bytes per writer and reader thread.
const CHUNK: usize = 1 << 20;

/// What [`Engine::warm_save`] wrote.
#[derive(Debug, Clone, Copy)]
pub struct WarmSaved {
    /// Items written.
    pub items: u64,
    /// Size of the file.
    pub bytes: u64,
    /// Time taken, sync and rename included.
    pub elapsed: Duration,
}

/// What [`Engine::warm_restore`] brought back.
#[derive(Debug, Clone, Copy)]
pub struct WarmRestored {
    /// Items restored.
    pub items: u64,
    /// Items that expired while the server was down (left out).
    pub expired: u64,
    /// Items that did not fit (`-M` and a budget they no longer fit in).
    pub dropped: u64,
    /// Size of the file.
    pub bytes: u64,
    /// Seconds between the save and this start.
    pub gap_secs: u64,
    /// Time taken.
    pub elapsed: Duration,
}

/// Why a warm restart starts empty. `Display` completes "FILE ...".
#[derive(Debug)]
pub enum WarmError {
    /// No file: a first start, or the last stop was not a graceful one.
    Missing,
    /// The file could not be read, or could not be removed after opening (then it is not
    /// used: a later start could bring it back after newer writes).
    Io(String),
    /// Another format version, or saved under other settings (`-m`, `-I`).
    Incompatible(String),
    /// Truncated or damaged.
    Corrupt(String),
}

impl std::fmt::Display for WarmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WarmError::Missing => {
                f.write_str("does not exist (first start, or the last stop was not graceful)")
            }
            WarmError::Io(m) | WarmError::Incompatible(m) => f.write_str(m),
            WarmError::Corrupt(m) => write!(f, "is corrupted: {m}"),
        }
    }
}

impl std::error::Error for WarmError {}

/// One shard's section, as the header describes it.
#[derive(Debug, Clone, Copy, Default)]
struct Section {
    offset: u64,
    len: u64,
    items: u64,
    seq: u64,
    flush_at_unix: u64,
    index_capacity: u64,
    crc: u32,
}

#[derive(Debug, Clone)]
struct FileHeader {
    memory_limit: u64,
    item_size_max: u64,
    hash_seed: u64,
    saved_at_unix: u64,
    items: u64,
    data_bytes: u64,
    sections: Vec<Section>,
}

fn header_len(shards: usize) -> usize {
    FIXED + shards * SECTION + 4
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(b[i..i + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[i..i + 8].try_into().unwrap())
}

impl FileHeader {
    fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(header_len(self.sections.len()));
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&VERSION.to_le_bytes());
        b.extend_from_slice(&(self.sections.len() as u32).to_le_bytes());
        for v in [
            self.memory_limit,
            self.item_size_max,
            self.hash_seed,
            self.saved_at_unix,
            self.items,
            self.data_bytes,
        ] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        for s in &self.sections {
            for v in [
                s.offset,
                s.len,
                s.items,
                s.seq,
                s.flush_at_unix,
                s.index_capacity,
            ] {
                b.extend_from_slice(&v.to_le_bytes());
            }
            b.extend_from_slice(&s.crc.to_le_bytes());
        }
        let crc = crc32fast::hash(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    /// Reads and checks the header of a file of `file_len` bytes.
    fn read(file: &File, file_len: u64) -> Result<FileHeader, WarmError> {
        let truncated = || WarmError::Corrupt(format!("truncated ({file_len} bytes)"));
        let mut fixed = [0u8; FIXED];
        file.read_exact_at(&mut fixed, 0).map_err(|_| truncated())?;
        if &fixed[..8] != MAGIC {
            return Err(WarmError::Incompatible(
                "is not a memkitd warm restart file".into(),
            ));
        }
        let version = u32_at(&fixed, 8);
        if version != VERSION {
            return Err(WarmError::Incompatible(format!(
                "was written in format version {version} (this memkitd reads {VERSION})"
            )));
        }
        let shards = u32_at(&fixed, 12) as usize;
        if !(1..=4096).contains(&shards) || header_len(shards) as u64 > file_len {
            return Err(truncated());
        }
        let mut b = fixed.to_vec();
        b.resize(header_len(shards), 0);
        file.read_exact_at(&mut b[FIXED..], FIXED as u64)
            .map_err(|_| truncated())?;
        let body = header_len(shards) - 4;
        if crc32fast::hash(&b[..body]) != u32_at(&b, body) {
            return Err(WarmError::Corrupt("header checksum does not match".into()));
        }
        let sections = (0..shards)
            .map(|i| {
                let at = FIXED + i * SECTION;
                Section {
                    offset: u64_at(&b, at),
                    len: u64_at(&b, at + 8),
                    items: u64_at(&b, at + 16),
                    seq: u64_at(&b, at + 24),
                    flush_at_unix: u64_at(&b, at + 32),
                    index_capacity: u64_at(&b, at + 40),
                    crc: u32_at(&b, at + 48),
                }
            })
            .collect();
        Ok(FileHeader {
            memory_limit: u64_at(&b, 16),
            item_size_max: u64_at(&b, 24),
            hash_seed: u64_at(&b, 32),
            saved_at_unix: u64_at(&b, 40),
            items: u64_at(&b, 48),
            data_bytes: u64_at(&b, 56),
            sections,
        })
    }

    /// The sections must tile the file after the header, and the file must end there; every
    /// count must fit the bytes it describes. Checked before anything is allocated from the
    /// file's numbers: the header's checksum says nothing of a file made to pass it.
    fn check_layout(&self, file_len: u64) -> Result<(), WarmError> {
        let corrupt = |m: String| Err(WarmError::Corrupt(m));
        let mut at = header_len(self.sections.len()) as u64;
        let mut items = 0u64;
        for (i, s) in self.sections.iter().enumerate() {
            if s.offset != at {
                return corrupt(format!("shard {i} is misplaced"));
            }
            at = at.saturating_add(s.len);
            // The shortest record is its head and a one-byte key.
            if s.items > s.len / (RECORD_HEAD as u64 + 1) {
                return corrupt(format!("shard {i} claims more items than its bytes hold"));
            }
            if s.seq > MAX_SEQ {
                return corrupt(format!("shard {i} has a write sequence no shard reaches"));
            }
            items = items.saturating_add(s.items);
        }
        let want = at;
        if items != self.items {
            return corrupt("item counts do not add up".into());
        }
        let data_end = self
            .data_bytes
            .checked_add(header_len(self.sections.len()) as u64);
        if file_len != want || data_end != Some(want) {
            return corrupt(format!("truncated ({file_len} of {want} bytes)"));
        }
        Ok(())
    }
}

/// `-m` as memkitd's flag spells it: MiB when whole.
fn megabytes(bytes: u64) -> String {
    match bytes % (1 << 20) {
        0 => format!("-m {}", bytes >> 20),
        _ => format!("a memory limit of {bytes} bytes"),
    }
}

/// `FILE.tmp`, where a save is written before it is renamed over `FILE`.
fn tmp_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".tmp");
    PathBuf::from(p)
}

fn threads_for(shards: usize) -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, shards)
}

/// A buffered writer at a file offset (positioned writes: the threads share one file).
struct AtWriter<'a> {
    file: &'a File,
    pos: u64,
    buf: Vec<u8>,
    crc: crc32fast::Hasher,
    written: u64,
}

impl<'a> AtWriter<'a> {
    fn new(file: &'a File, pos: u64) -> Self {
        AtWriter {
            file,
            pos,
            buf: Vec::with_capacity(CHUNK),
            crc: crc32fast::Hasher::new(),
            written: 0,
        }
    }

    fn drain(&mut self) -> io::Result<()> {
        // Checksummed a chunk at a time: crc32fast's fast path wants long runs, not the
        // records' few dozen bytes.
        self.crc.update(&self.buf);
        self.file.write_all_at(&self.buf, self.pos)?;
        self.pos += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }

    /// Writes what is buffered; returns the bytes written and their checksum.
    fn finish(mut self) -> io::Result<(u64, u32)> {
        self.drain()?;
        Ok((self.written, self.crc.finalize()))
    }
}

impl Write for AtWriter<'_> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.written += data.len() as u64;
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK {
            self.drain()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.drain()
    }
}

/// The state the save threads share.
struct Dump<'a> {
    engine: &'a Engine,
    file: &'a File,
    threads: usize,
    now: u32,
    lens: Mutex<Vec<u64>>,
    barrier: Barrier,
    /// Empty each shard once its section is written ([`Engine::warm_save_and_clear`]).
    clear: bool,
}

impl Dump<'_> {
    /// Thread `t`'s shards (every `threads`-th): locked (in ascending order, like every
    /// holder of several shard locks), their items listed, and once every thread knows its
    /// sizes and so every section's offset, written.
    fn part(&self, t: usize) -> io::Result<Vec<(usize, Section)>> {
        let e = self.engine;
        let n = e.shards.len();
        let mine: Vec<usize> = (t..n).step_by(self.threads).collect();
        let mut guards: Vec<_> = mine.iter().map(|&i| e.shards[i].0.lock()).collect();
        let lists: Vec<_> = guards.iter_mut().map(|g| g.warm_items(self.now)).collect();
        {
            let mut lens = self.lens.lock();
            for (&i, (_, bytes)) in mine.iter().zip(&lists) {
                lens[i] = *bytes;
            }
        }
        // Nothing before this can fail: every thread reaches it.
        self.barrier.wait();
        let lens = self.lens.lock().clone();
        let mut out = Vec::with_capacity(mine.len());
        let budget = e.memory_limit.load(std::sync::atomic::Ordering::Relaxed) / n;
        for ((&i, shard), (locs, bytes)) in mine.iter().zip(&mut guards).zip(&lists) {
            let offset = header_len(n) as u64 + lens[..i].iter().sum::<u64>();
            let mut w = AtWriter::new(self.file, offset);
            shard.warm_write(locs, e.epoch, &mut w)?;
            let (len, crc) = w.finish()?;
            if len != *bytes {
                return Err(io::Error::other(format!(
                    "shard {i}: wrote {len} bytes, listed {bytes}"
                )));
            }
            let st = shard.warm_state();
            out.push((
                i,
                Section {
                    offset,
                    len,
                    items: locs.len() as u64,
                    seq: st.seq,
                    flush_at_unix: st.flush_at.map_or(0, |at| e.epoch + u64::from(at)),
                    index_capacity: st.index_capacity as u64,
                    crc,
                },
            ));
            if self.clear {
                shard.warm_clear(budget);
            }
        }
        Ok(out)
    }
}

/// Counts of one restore thread.
#[derive(Debug, Default, Clone, Copy)]
struct Loaded {
    items: u64,
    expired: u64,
    dropped: u64,
}

/// Records read per batch: their index buckets are fetched together before they are put in.
const BATCH: usize = 32;
/// The state the restore threads share.
struct Load<'a> {
    engine: &'a Engine,
    map: &'a Mapped,
    header: &'a FileHeader,
    threads: usize,
}

impl Load<'_> {
    fn part(&self, t: usize) -> Result<Loaded, WarmError> {
        let mut total = Loaded::default();
        for i in (t..self.engine.shards.len()).step_by(self.threads) {
            self.shard(i, &mut total).map_err(|e| match e {
                WarmError::Corrupt(m) => WarmError::Corrupt(format!("shard {i}: {m}")),
                other => other,
            })?;
        }
        Ok(total)
    }

    /// Loads shard `i`'s section, checking every record and, at the end, the checksum.
    fn shard(&self, i: usize, total: &mut Loaded) -> Result<(), WarmError> {
        let e = self.engine;
        let sec = &self.header.sections[i];
        let st = ShardState {
            seq: sec.seq,
            flush_at: (sec.flush_at_unix != 0).then(|| {
                sec.flush_at_unix
                    .saturating_sub(e.epoch)
                    .clamp(1, u64::from(u32::MAX - 1)) as u32
            }),
            index_capacity: sec.index_capacity as usize,
        };
        let corrupt = |m: &str| WarmError::Corrupt(m.to_string());
        let mut shard = e.shards[i].0.lock();
        shard.warm_presize(&st, sec.items as usize);
        let (now, now_unix) = (e.now(), e.clock.now_secs());
        let mut cur = Cursor::new(self.map, sec.offset, sec.len);
        let mut batch: Vec<(RecordHead, u64, u32, u64)> = Vec::with_capacity(BATCH);
        let mut left = sec.items;
        while left > 0 {
            batch.clear();
            while batch.len() < BATCH && left > 0 {
                left -= 1;
                let (rec, key_at) = cur.next(e.item_size_max)?;
                let h = e.hasher.hash_one(self.map.bytes(key_at, rec.klen));
                if ((h >> 32) & e.shard_mask) as usize != i {
                    return Err(corrupt("a key in another shard's section"));
                }
                let exptime = match rec.exptime_unix {
                    0 => 0,
                    d if d <= now_unix => {
                        total.expired += 1;
                        continue;
                    }
                    d => (d - e.epoch).min(u64::from(u32::MAX - 1)) as u32,
                };
                batch.push((rec, h, exptime, key_at));
            }
            batch.iter().for_each(|b| shard.index.prefetch(b.1));
            for (rec, h, exptime, key_at) in &batch {
                let (key, value) = self
                    .map
                    .bytes(*key_at, rec.klen + rec.stored_len())
                    .split_at(rec.klen);
                match shard.warm_install(*h, rec, *exptime, key, value, now) {
                    Ok(()) => total.items += 1,
                    Err(_) => total.dropped += 1,
                }
            }
            cur.checkpoint(false);
        }
        if cur.pos != cur.end {
            return Err(corrupt("bytes after the last record"));
        }
        cur.checkpoint(true);
        if cur.crc.finalize() != sec.crc {
            return Err(corrupt("checksum does not match"));
        }
        shard.warm_finish(&st, cur.max_seq, now);
        Ok(())
    }
}

impl Engine {
    /// Writes every live item to `path` for [`Engine::warm_restore`]: to `path.tmp`, synced,
    /// then renamed over `path`. Each shard stays locked while it is written (one thread a
    /// core, each over its own shards): meant for a server that has stopped serving.
    pub fn warm_save(&self, path: &Path) -> io::Result<WarmSaved> {
        self.save_to(path, false)
    }

    /// [`Engine::warm_save`] for a process about to exit: each shard is emptied, and its
    /// memory given back, as soon as its section is written, so the file's pages are largely
    /// the ones the cache just gave up rather than more memory (on a VM whose free memory
    /// goes back to the host, the difference between 1 and 4 s a GiB), and the exit has
    /// little left to unmap. The engine is empty afterwards (after a failed save, the shards
    /// written before the failure are); the CAS values it issues next are still above
    /// every earlier one.
    pub fn warm_save_and_clear(&self, path: &Path) -> io::Result<WarmSaved> {
        self.save_to(path, true)
    }

    fn save_to(&self, path: &Path, clear: bool) -> io::Result<WarmSaved> {
        let started = Instant::now();
        let tmp = tmp_path(path);
        // The file holds every value in the cache: readable by the server's user only, as
        // memcached's memory file is. A leftover FILE.tmp (a save cut short) is removed
        // rather than reused, so that the new one is created with that mode, not opened
        // with whatever mode, owner or link the old one had.
        let _ = fs::remove_file(&tmp);
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        let written = self.write_snapshot(&file, clear).and_then(|h| {
            file.sync_all()?;
            fs::rename(&tmp, path)?;
            // The rename itself is durable once the directory is synced (a disk file
            // system; on tmpfs this costs nothing).
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                File::open(dir)?.sync_all()?;
            }
            Ok(h)
        });
        let header = written.inspect_err(|_| {
            let _ = fs::remove_file(&tmp);
        })?;
        Ok(WarmSaved {
            items: header.items,
            bytes: header_len(header.sections.len()) as u64 + header.data_bytes,
            elapsed: started.elapsed(),
        })
    }

    fn write_snapshot(&self, file: &File, clear: bool) -> io::Result<FileHeader> {
        let n = self.shards.len();
        let threads = threads_for(n);
        let dump = Dump {
            engine: self,
            file,
            threads,
            now: self.now(),
            lens: Mutex::new(vec![0; n]),
            barrier: Barrier::new(threads),
            clear,
        };
        let parts: Vec<io::Result<Vec<(usize, Section)>>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let dump = &dump;
                    s.spawn(move || dump.part(t))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(io::Error::other("a save thread panicked")))
                })
                .collect()
        });
        let mut sections = vec![Section::default(); n];
        for part in parts {
            for (i, s) in part? {
                sections[i] = s;
            }
        }
        let header = FileHeader {
            memory_limit: self.memory_limit.load(std::sync::atomic::Ordering::Relaxed) as u64,
            item_size_max: self.item_size_max as u64,
            hash_seed: self.hash_seed,
            saved_at_unix: self.clock.now_secs(),
            items: sections.iter().map(|s| s.items).sum(),
            data_bytes: sections.iter().map(|s| s.len).sum(),
            sections,
        };
        file.write_all_at(&header.encode(), 0)?;
        Ok(header)
    }

    /// An engine for `cfg` holding what [`Engine::warm_save`] left in `path`, or, with the
    /// reason, an empty one: when there is no file, when it was saved under another memory
    /// limit or item size limit or by another format version, or when it is truncated or
    /// damaged. The file is removed once open, whatever it holds, so a snapshot is used at
    /// most once and never after newer writes.
    pub fn warm_restore(
        cfg: EngineConfig,
        path: &Path,
    ) -> (Engine, Result<WarmRestored, WarmError>) {
        match restore(cfg.clone(), path) {
            Ok((engine, r)) => (engine, Ok(r)),
            Err(e) => (Engine::new(cfg), Err(e)),
        }
    }
}

fn restore(cfg: EngineConfig, path: &Path) -> Result<(Engine, WarmRestored), WarmError> {
    let started = Instant::now();
    let _ = fs::remove_file(tmp_path(path)); // a save cut short
    // Read and write, so that pages can be given back as they are read (see `Mapped`).
    let open = |write: bool| OpenOptions::new().read(true).write(write).open(path);
    let (file, writable) = match open(true) {
        Ok(f) => (Ok(f), true),
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => (open(false), false),
        Err(e) => (Err(e), false),
    };
    let file = file.map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => WarmError::Missing,
        _ => WarmError::Io(format!("could not be opened: {e}")),
    })?;
    fs::remove_file(path).map_err(|e| WarmError::Io(format!("could not be removed: {e}")))?;
    let io = |e: io::Error| WarmError::Io(format!("could not be read: {e}"));
    let file_len = file.metadata().map_err(io)?.len();
    let header = FileHeader::read(&file, file_len)?;
    let limit = cfg.memory_limit.max(1 << 20) as u64;
    if header.memory_limit != limit {
        return Err(WarmError::Incompatible(format!(
            "was saved with {} (now {})",
            megabytes(header.memory_limit),
            megabytes(limit)
        )));
    }
    if header.item_size_max != cfg.item_size_max as u64 {
        return Err(WarmError::Incompatible(format!(
            "was saved with -I {} (now {})",
            header.item_size_max, cfg.item_size_max
        )));
    }
    let engine = Engine::with_hash_seed(cfg, header.hash_seed);
    if engine.shards.len() != header.sections.len() {
        return Err(WarmError::Incompatible(format!(
            "was saved with {} shards (now {})",
            header.sections.len(),
            engine.shards.len()
        )));
    }
    header.check_layout(file_len)?;
    let map = Mapped::open(&file, writable).map_err(io)?;
    let threads = threads_for(engine.shards.len());
    let load = Load {
        engine: &engine,
        map: &map,
        header: &header,
        threads,
    };
    let parts: Vec<Result<Loaded, WarmError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let load = &load;
                s.spawn(move || load.part(t))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(WarmError::Io("a restore thread panicked".into())))
            })
            .collect()
    });
    let mut total = Loaded::default();
    for p in parts {
        let p = p?;
        total.items += p.items;
        total.expired += p.expired;
        total.dropped += p.dropped;
    }
    // CAS values are unique per shard by construction; as in memcached, new ones also go
    // above every restored one, whichever shard it is in.
    let floor = engine.shards.iter().map(|s| s.0.lock().issued_cas()).max();
    for s in engine.shards.iter() {
        s.0.lock().raise_cas_floor(floor.unwrap_or(0));
    }
    let restored = WarmRestored {
        items: total.items,
        expired: total.expired,
        dropped: total.dropped,
        bytes: file_len,
        gap_secs: engine.clock.now_secs().saturating_sub(header.saved_at_unix),
        elapsed: started.elapsed(),
    };
    Ok((engine, restored))
}

#[cfg(test)]
mod tests;
