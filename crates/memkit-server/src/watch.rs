//! `watch`: memcached's live event stream (fetchers, mutations, evictions).
//!
//! Events are built only while some connection watches their kind: `emit` checks one atomic
//! first, so the hot path pays a relaxed load when nobody is watching. Lines are broadcast
//! to watchers; a watcher that falls behind loses lines (memcached drops them too) and is
//! told how many.
//!
//! `stats` reports the stream as memcached's logger does: `log_worker_written` lines built,
//! `log_worker_dropped` lines built when the last watcher had just left, `log_watcher_sent`
//! lines handed to a watcher, `log_watcher_skipped` lines a lagging watcher lost (of any
//! kind: the channel does not say which), `log_watchers` connections watching.
//!
//! [`HotKeys`] samples the same fetches for the page on the metrics address (its hot
//! keys), off unless someone looks.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};

use memkit_types::{Result, StoreOutcome, Stored};
use parking_lot::Mutex;
use tokio::sync::broadcast;

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
    counts_of: Counts,
    started: std::time::Instant,
    started_unix: f64,
    /// The page's hot keys (`--dashboard-keys`): fetches sampled while someone looks.
    pub hot: HotKeys,
}

impl Default for Watchers {
    fn default() -> Self {
        let (tx, _) = broadcast::channel(4096);
        Watchers {
            tx,
            mask: AtomicU8::new(0),
            counts: Mutex::new([0; 3]),
            gid: AtomicU64::new(0),
            counts_of: Counts::default(),
            started: std::time::Instant::now(),
            started_unix: {
                use memkit_types::Clock;
                memkit_types::SystemClock.now_millis() as f64 / 1000.0
            },
            hot: HotKeys::default(),
        }
    }
}

/// The stream's counters (`stats reset` zeroes them).
#[derive(Debug, Default)]
struct Counts {
    written: AtomicU64,
    dropped: AtomicU64,
    sent: AtomicU64,
    skipped: AtomicU64,
}

/// The stream's figures for `stats`, memcached's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct WatchStats {
    pub log_worker_dropped: u64,
    pub log_worker_written: u64,
    pub log_watcher_skipped: u64,
    pub log_watcher_sent: u64,
    pub log_watchers: u64,
}

/// What a watcher reads next.
#[derive(Debug)]
pub enum Next {
    /// A line of a kind it watches.
    Line(Arc<str>),
    /// It fell behind and this many lines went past it.
    Skipped(u64),
    /// The server is going away.
    Closed,
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

    /// The figures `stats` reports.
    pub fn stats(&self) -> WatchStats {
        let c = &self.counts_of;
        WatchStats {
            log_worker_dropped: c.dropped.load(Ordering::Relaxed),
            log_worker_written: c.written.load(Ordering::Relaxed),
            log_watcher_skipped: c.skipped.load(Ordering::Relaxed),
            log_watcher_sent: c.sent.load(Ordering::Relaxed),
            // Every receiver is a subscription: the channel's first one was dropped.
            log_watchers: self.tx.receiver_count() as u64,
        }
    }

    /// `stats reset`: the counters to zero (the number of watchers stays).
    pub fn reset(&self) {
        let c = &self.counts_of;
        for n in [&c.written, &c.dropped, &c.sent, &c.skipped] {
            n.store(0, Ordering::Relaxed);
        }
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

    /// Waits for the next line of a kind this subscriber watches, counting it as sent (or
    /// the lines it lagged behind as skipped).
    pub async fn next(&mut self) -> Next {
        let c = &self.owner.counts_of;
        loop {
            match self.rx.recv().await {
                Ok((kind, line)) if self.wants(kind) => {
                    c.sent.fetch_add(1, Ordering::Relaxed);
                    return Next::Line(line);
                }
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    c.skipped.fetch_add(n, Ordering::Relaxed);
                    return Next::Skipped(n);
                }
                Err(broadcast::error::RecvError::Closed) => return Next::Closed,
            }
        }
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

impl Watchers {
    /// Builds and broadcasts an event if anyone watches its kind.
    pub fn emit(&self, event: impl FnOnce() -> Event) {
        let w = self;
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
        w.counts_of.written.fetch_add(1, Ordering::Relaxed);
        if w.tx.send((e.kind, line.into())).is_err() {
            w.counts_of.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
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

/// One fetch in this many (on each thread) is counted by [`HotKeys`].
pub const HOT_SAMPLE: u64 = 16;
/// The most keys [`HotKeys`] keeps in an interval.
const HOT_CAPACITY: usize = 64;

/// The fetches `watch fetchers` would show, sampled into the hottest keys of an interval,
/// for the page on the metrics address. Off, a fetch pays one relaxed load; on (only while
/// someone looks at the page's hot keys), one fetch in [`HOT_SAMPLE`] per thread takes a
/// lock and counts its key among at most 64: the Space-Saving algorithm, whose count of a
/// key is at most its error above the truth, and whose hottest keys are found whatever the
/// order the fetches come in.
#[derive(Debug, Default)]
pub struct HotKeys {
    on: AtomicBool,
    table: Mutex<HashMap<Box<[u8]>, HotCount>>,
}

/// A key's sampled fetches in the current interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HotCount {
    /// Fetches sampled (an overestimate by at most `error`).
    pub samples: u64,
    /// Of them, hits.
    pub hits: u64,
    /// What the key inherited from the one it replaced in a full table.
    pub error: u64,
}

impl HotKeys {
    /// A fetch of `key`, found or not.
    #[inline]
    pub fn fetched(&self, key: &[u8], hit: bool) {
        if self.on.load(Ordering::Relaxed) {
            self.sample(key, hit);
        }
    }

    #[inline(never)]
    fn sample(&self, key: &[u8], hit: bool) {
        thread_local! {
            static TICK: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
        }
        let tick = TICK.with(|t| {
            t.set(t.get().wrapping_add(1));
            t.get()
        });
        if !tick.is_multiple_of(HOT_SAMPLE) {
            return;
        }
        let mut table = self.table.lock();
        if let Some(c) = table.get_mut(key) {
            c.samples += 1;
            c.hits += u64::from(hit);
            return;
        }
        let mut new = HotCount {
            samples: 1,
            hits: u64::from(hit),
            error: 0,
        };
        if table.len() >= HOT_CAPACITY {
            let coldest = table.iter().min_by_key(|(_, c)| c.samples);
            let Some((k, c)) = coldest.map(|(k, c)| (k.clone(), *c)) else {
                return;
            };
            table.remove(&k);
            new.samples += c.samples;
            new.error = c.samples;
        }
        table.insert(key.into(), new);
    }

    /// Starts or stops sampling; stopped, the counts are dropped.
    pub fn set_sampling(&self, on: bool) {
        self.on.store(on, Ordering::Relaxed);
        if !on {
            self.table.lock().clear();
        }
    }

    /// Whether fetches are being sampled.
    pub fn sampling(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// The keys sampled since the last call, most sampled first; a new interval starts.
    pub fn take(&self) -> Vec<(Box<[u8]>, HotCount)> {
        let mut keys: Vec<_> = std::mem::take(&mut *self.table.lock())
            .into_iter()
            .collect();
        keys.sort_by(|a, b| b.1.samples.cmp(&a.1.samples).then_with(|| a.0.cmp(&b.0)));
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Off, nothing is counted; on, one fetch in 16 of this thread is, the hottest key
    /// comes first, at most 64 keys are kept and a key that took a colder one's place
    /// carries that count as its error.
    #[test]
    fn hot_keys_sample_the_hottest_within_their_bound() {
        let hot = HotKeys::default();
        for _ in 0..1600 {
            hot.fetched(b"off", true);
        }
        assert!(hot.take().is_empty());
        hot.set_sampling(true);
        for i in 0..16 * 400u64 {
            hot.fetched(b"hot", i % 3 == 0);
        }
        for i in 0..16 * 200u64 {
            hot.fetched(format!("cold:{}", i / 16).as_bytes(), false);
        }
        let keys = hot.take();
        assert_eq!(keys.len(), HOT_CAPACITY);
        assert_eq!(&*keys[0].0, b"hot");
        assert_eq!(keys[0].1.samples, 400);
        assert_eq!(keys[0].1.error, 0);
        assert!((100..=170).contains(&keys[0].1.hits), "{:?}", keys[0].1);
        assert!(keys[1..].iter().all(|(_, c)| c.samples - c.error == 1));
        assert!(hot.take().is_empty(), "a new interval starts empty");
        hot.set_sampling(false);
        hot.fetched(b"hot", true);
        assert!(!hot.sampling() && hot.take().is_empty());
    }
}
