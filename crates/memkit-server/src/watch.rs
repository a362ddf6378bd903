//! `watch`: memcached's live event stream (fetchers, mutations, evictions).
//!
//! Events are built only while some connection watches their kind: `emit` checks one atomic
//! first, so the hot path pays a relaxed load when nobody is watching. Lines are broadcast
//! to watchers; a watcher that falls behind loses lines (memcached drops them too) and is
//! told how many.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use memkit_types::{Result, StoreOutcome, Stored};
use parking_lot::Mutex;
use tokio::sync::broadcast;

use crate::server::Shared;

/// `watch fetchers`: `item_get` lines.
pub const FETCHERS: u8 = 1;
/// `watch mutations`: `item_store` lines.
pub const MUTATIONS: u8 = 2;
/// `watch evictions`: `eviction` lines.
pub const EVICTIONS: u8 = 4;

/// One log line and its kind.
#[derive(Debug, Clone)]
pub struct Event {
    kind: u8,
    line: String,
}

impl Event {
    /// A read: `size` is the value length on a hit.
    pub fn fetch(key: &[u8], size: Option<usize>, conn: u64) -> Event {
        let status = if size.is_some() { "found" } else { "not_found" };
        let line = format!(
            "type=item_get key={} status={status} clsid=0 cfd={conn} size={}",
            uriencode(key),
            size.unwrap_or(0)
        );
        Event {
            kind: FETCHERS,
            line,
        }
    }

    /// A store and its result.
    pub fn store(key: &[u8], r: &Result<Stored>, ttl: i32, size: usize, conn: u64) -> Event {
        let status = match r {
            Ok(s) => match s.outcome {
                StoreOutcome::Stored => "stored",
                StoreOutcome::NotStored => "not_stored",
                StoreOutcome::Exists => "exists",
                StoreOutcome::NotFound => "not_found",
            },
            Err(memkit_types::Error::TooLarge) => "too_large",
            Err(_) => "no_memory",
        };
        let line = format!(
            "type=item_store key={} status={status} ttl={} clsid=0 cfd={conn} size={size}",
            uriencode(key),
            ttl.max(0)
        );
        Event {
            kind: MUTATIONS,
            line,
        }
    }
}

impl Event {
    /// An eviction, in memcached's `type=eviction` format.
    pub fn eviction(e: &memkit_engine::Evicted<'_>) -> Event {
        let line = format!(
            "type=eviction key={} fetch={} ttl={} la={} clsid=0 size={}",
            uriencode(e.key),
            if e.fetched { "yes" } else { "no" },
            e.ttl.map_or(-1, i64::from),
            e.age,
            e.size
        );
        Event {
            kind: EVICTIONS,
            line,
        }
    }
}

/// The watchers of one server.
#[derive(Debug)]
pub struct Watchers {
    tx: broadcast::Sender<(u8, Arc<str>)>,
    /// Union of the kinds some connection watches.
    mask: AtomicU8,
    counts: Mutex<[usize; 3]>,
    gid: AtomicU64,
    started: std::time::Instant,
    started_unix: f64,
}

impl Default for Watchers {
    fn default() -> Self {
        let (tx, _) = broadcast::channel(4096);
        Watchers {
            tx,
            mask: AtomicU8::new(0),
            counts: Mutex::new([0; 3]),
            gid: AtomicU64::new(0),
            started: std::time::Instant::now(),
            started_unix: {
                use memkit_types::Clock;
                memkit_types::SystemClock.now_millis() as f64 / 1000.0
            },
        }
    }
}

/// A connection's subscription; dropping it unsubscribes.
#[derive(Debug)]
pub struct Subscription<'a> {
    owner: &'a Watchers,
    mask: u8,
    /// The broadcast receiver.
    pub rx: broadcast::Receiver<(u8, Arc<str>)>,
}

impl Watchers {
    /// Whether anyone watches events of `kind`.
    pub fn watching(&self, kind: u8) -> bool {
        self.mask.load(Ordering::Relaxed) & kind != 0
    }

    /// Subscribes to the kinds in `mask`.
    pub fn subscribe(&self, mask: u8) -> Subscription<'_> {
        let rx = self.tx.subscribe();
        let mut c = self.counts.lock();
        for (i, n) in c.iter_mut().enumerate() {
            if mask & (1 << i) != 0 {
                *n += 1;
            }
        }
        self.mask.store(mask_of(&c), Ordering::Relaxed);
        Subscription {
            owner: self,
            mask,
            rx,
        }
    }
}

impl Subscription<'_> {
    /// Whether an event of `kind` is for this subscriber.
    pub fn wants(&self, kind: u8) -> bool {
        self.mask & kind != 0
    }
}

impl Drop for Subscription<'_> {
    fn drop(&mut self) {
        let mut c = self.owner.counts.lock();
        for (i, n) in c.iter_mut().enumerate() {
            if self.mask & (1 << i) != 0 {
                *n -= 1;
            }
        }
        self.owner.mask.store(mask_of(&c), Ordering::Relaxed);
    }
}

fn mask_of(c: &[usize; 3]) -> u8 {
    c.iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .fold(0, |m, (i, _)| m | (1 << i))
}

/// Builds and broadcasts an event if anyone watches its kind.
pub fn emit(sh: &Shared, event: impl FnOnce() -> Event) {
    let w = &sh.watchers;
    if w.mask.load(Ordering::Relaxed) == 0 {
        return;
    }
    let e = event();
    if w.mask.load(Ordering::Relaxed) & e.kind == 0 {
        return;
    }
    let ts = w.started_unix + w.started.elapsed().as_secs_f64();
    let gid = w.gid.fetch_add(1, Ordering::Relaxed) + 1;
    let line = format!("ts={:.6} gid={gid} {}\n", ts, e.line);
    let _ = w.tx.send((e.kind, line.into()));
}

/// memcached's `uriencode`: unreserved bytes as they are, everything else as `%XX`.
pub fn uriencode(key: &[u8]) -> String {
    let mut s = String::with_capacity(key.len());
    for &b in key {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s
}
