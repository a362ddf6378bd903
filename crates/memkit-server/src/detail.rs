//! `stats detail on|off|dump`: memcached's per-prefix statistics.
//!
//! A key's prefix is what comes before the first `-D` delimiter (default `:`); a key
//! without one (or with a NUL byte before it) is not counted, as in memcached. Every get,
//! store and delete the executor runs is counted while detail is on, whatever its encoding
//! (memcached 1.6.18 leaves out meta commands); while it is off the executor pays one
//! relaxed load.
//!
//! memcached's table grows without bound, one entry per distinct prefix ever seen. Here it
//! holds at most [`MAX_PREFIXES`] prefixes (about 3 MiB with 250-byte prefixes); commands on
//! a prefix first seen once it is full are not counted per prefix but in
//! `memkit_detail_untracked` (`stats`), so a dump never silently under-reports.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use parking_lot::Mutex;

/// Most prefixes kept (memcached: unbounded).
pub const MAX_PREFIXES: usize = 8192;

/// Locks the table is split over, so that cores counting different prefixes rarely meet.
const STRIPES: usize = 16;

#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    get: u64,
    hit: u64,
    set: u64,
    del: u64,
}

/// What a command did to a key, for its prefix's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// A read, and whether it found the item.
    Get(bool),
    /// A store of any mode.
    Set,
    /// A delete.
    Delete,
}

/// The prefix table and the on/off switch.
#[derive(Debug)]
pub struct Detail {
    on: AtomicBool,
    delimiter: u8,
    hasher: RandomState,
    stripes: [Mutex<HashMap<Box<[u8]>, Counts>>; STRIPES],
    /// Prefixes held, over all stripes (bounded by [`MAX_PREFIXES`]).
    held: AtomicU64,
    untracked: AtomicU64,
}

impl Detail {
    /// A table for keys split at `delimiter`; `on` as `-D` leaves it (memcached turns
    /// detail on when `-D` is given).
    pub fn new(delimiter: u8, on: bool) -> Detail {
        Detail {
            on: AtomicBool::new(on),
            delimiter,
            hasher: RandomState::new(),
            stripes: std::array::from_fn(|_| Mutex::new(HashMap::new())),
            held: AtomicU64::new(0),
            untracked: AtomicU64::new(0),
        }
    }

    /// Whether commands are being counted (`detail_enabled` in `stats settings`).
    #[inline]
    pub fn enabled(&self) -> bool {
        self.on.load(Relaxed)
    }

    /// `stats detail on` / `off`: counting stops or resumes; the counts stay.
    pub fn set_enabled(&self, on: bool) {
        self.on.store(on, Relaxed);
    }

    /// The delimiter (`stat_key_prefix` in `stats settings`).
    pub fn delimiter(&self) -> u8 {
        self.delimiter
    }

    /// Counts `op` on `key` if detail is on.
    #[inline]
    pub fn record(&self, key: &[u8], op: Op) {
        if self.enabled() {
            self.count(key, op);
        }
    }

    fn count(&self, key: &[u8], op: Op) {
        // memcached scans up to the first delimiter and gives up at a NUL.
        let Some(len) = key
            .iter()
            .take_while(|&&b| b != 0)
            .position(|&b| b == self.delimiter)
        else {
            return;
        };
        let prefix = &key[..len];
        let stripe = self.hasher.hash_one(prefix) as usize % STRIPES;
        let mut table = self.stripes[stripe].lock();
        let c = match table.get_mut(prefix) {
            Some(c) => c,
            None => {
                // Reserve a place first; give it back if the table is full.
                if self.held.fetch_add(1, Relaxed) >= MAX_PREFIXES as u64 {
                    self.held.fetch_sub(1, Relaxed);
                    self.untracked.fetch_add(1, Relaxed);
                    return;
                }
                table.entry(prefix.into()).or_default()
            }
        };
        match op {
            Op::Get(hit) => {
                c.get += 1;
                c.hit += u64::from(hit);
            }
            Op::Set => c.set += 1,
            Op::Delete => c.del += 1,
        }
    }

    /// Commands not counted per prefix because the table was full (`memkit_detail_untracked`).
    pub fn untracked(&self) -> u64 {
        self.untracked.load(Relaxed)
    }

    /// `stats reset`: every prefix forgotten, as memcached's `stats_prefix_clear`.
    pub fn clear(&self) {
        for s in &self.stripes {
            let mut t = s.lock();
            self.held.fetch_sub(t.len() as u64, Relaxed);
            t.clear();
        }
        self.untracked.store(0, Relaxed);
    }

    /// `stats detail dump`: memcached's `PREFIX <p> get <n> hit <n> set <n> del <n>` lines,
    /// then `END` (the order is the table's, as memcached's is its hash table's).
    pub fn dump(&self, out: &mut Vec<u8>) {
        use std::io::Write;
        for s in &self.stripes {
            for (p, c) in s.lock().iter() {
                out.extend_from_slice(b"PREFIX ");
                out.extend_from_slice(p);
                let _ = write!(
                    out,
                    " get {} hit {} set {} del {}\r\n",
                    c.get, c.hit, c.set, c.del
                );
            }
        }
        out.extend_from_slice(b"END\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dump(d: &Detail) -> Vec<String> {
        let mut out = Vec::new();
        d.dump(&mut out);
        let mut lines: Vec<String> = String::from_utf8(out)
            .unwrap()
            .split("\r\n")
            .map(str::to_owned)
            .collect();
        lines.sort();
        lines
    }

    #[test]
    fn prefixes_as_memcached_splits_them() {
        let d = Detail::new(b':', true);
        d.record(b"user:1", Op::Get(true));
        d.record(b"user:2", Op::Get(false));
        d.record(b"user:3:x", Op::Set);
        d.record(b":lead", Op::Delete);
        d.record(b"plain", Op::Set);
        d.record(b"nul\0:x", Op::Set);
        assert_eq!(
            dump(&d),
            [
                "",
                "END",
                "PREFIX  get 0 hit 0 set 0 del 1",
                "PREFIX user get 2 hit 1 set 1 del 0",
            ]
        );
        d.set_enabled(false);
        d.record(b"user:1", Op::Set);
        assert!(dump(&d).contains(&"PREFIX user get 2 hit 1 set 1 del 0".to_owned()));
        d.clear();
        assert_eq!(dump(&d), ["", "END"]);
    }

    #[test]
    fn bounded() {
        let d = Detail::new(b'/', true);
        for i in 0..MAX_PREFIXES + 10 {
            d.record(format!("p{i}/k").as_bytes(), Op::Set);
        }
        // Known prefixes keep counting once the table is full.
        d.record(b"p0/k", Op::Set);
        assert_eq!(dump(&d).len(), MAX_PREFIXES + 2);
        assert!(dump(&d).contains(&"PREFIX p0 get 0 hit 0 set 2 del 0".to_owned()));
        assert_eq!(d.untracked(), 10);
        d.clear();
        d.record(b"new/k", Op::Set);
        assert_eq!(dump(&d).len(), 3);
        assert_eq!(d.untracked(), 0);
    }
}
