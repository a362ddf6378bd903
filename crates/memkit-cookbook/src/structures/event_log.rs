//! The event log: a ring buffer of time-chunk keys (seed 000/002 "Лог событий").
//!
//! See `docs/cookbook/event-log.md`.
//!
//! An event stamped `t` belongs to chunk `c = t / chunk_secs` and is appended to the key
//! `events:<name>:<c>` by `append`-or-`add` (one round trip usually). The ring is one of
//! *lifetimes*, not of key names: a chunk's key lives until its chunk falls out of the last
//! `num_chunks`, `(c + num_chunks) · chunk_secs - now` seconds, plus
//! [`MAX_CLOCK_SKEW_SECS`](super::MAX_CLOCK_SKEW_SECS) + 1. Because the key is named by the
//! absolute chunk number, no two chunks ever share a key: an event can never be appended to
//! an older chunk's key that is about to expire, whatever the producers' clocks say and
//! whenever memcached's once-a-second clock expires it. The margin only keeps the last chunk
//! readable while a producer's clock ran ahead when it created the key. So the log always
//! holds at least the last `(num_chunks - 1) · chunk_secs` seconds, and at most
//! `num_chunks + ⌈margin / chunk_secs⌉` chunk keys are alive. Events are typed: any `serde`
//! type that says when it happened ([`Event`]), stored one JSON record per line.
//!
//! [`EventLog::fetch`] reads the chunks that can hold `[first, last]` with one multi-get.
//! Chunk numbers are absolute integers (`t / chunk_secs`), so each key is read once. (The
//! seed wrapped `firstKey..lastKey` modulo the ring: when both fell in the same slot it read
//! *every* key, the first one twice, returning its events twice — and it relied on Python 2's
//! integer `/`.) [`Poller`] is the
//! seed's `lastSeen` pattern without its duplicates: it remembers what it returned at the
//! `lastSeen` second and skips exactly that next time.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! use std::sync::Arc;
//! use memkit_cookbook::{Event, EventLog};
//! use memkit_engine::{Embedded, EngineConfig};
//! use memkit_types::ManualClock;
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
//! struct Login { at: u64, user: String }
//! impl Event for Login { fn when(&self) -> u64 { self.at } }
//!
//! let clock = ManualClock::new(1_700_000_000);
//! let mc = Embedded::new(EngineConfig::with_memory(64 << 20).clock(Arc::new(clock.clone())));
//! let log: EventLog<_, Login> = EventLog::new(mc, "logins", 10, 10, Arc::new(clock.clone()));
//! let mut poller = log.poller();
//! log.put(&Login { at: 1_700_000_000, user: "ann".into() }).await?;
//! assert_eq!(poller.poll().await?.len(), 1);
//! clock.advance(25);
//! log.put(&Login { at: 1_700_000_025, user: "bob".into() }).await?;
//! let new = poller.poll().await?;           // only what we have not seen
//! assert_eq!(new[0].user, "bob");
//! assert_eq!(log.fetch(None, None).await?.len(), 2);
//! # Ok::<(), memkit_cookbook::Error>(()) }).unwrap();
//! ```

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::Arc;

use memkit_types::{Clock, Exptime, Memcache};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{EXPIRY_MARGIN_SECS, append_or_add};
use crate::codec::{decode, encode_line};
use crate::{Error, Result};

/// An event: a serde type that knows when it happened (Unix seconds).
pub trait Event: Serialize + DeserializeOwned {
    /// When the event happened, in Unix seconds.
    fn when(&self) -> u64;
}

/// A ring buffer of `num_chunks` keys, each collecting `chunk_secs` seconds of events.
#[derive(Debug)]
pub struct EventLog<M, E> {
    mc: M,
    name: String,
    chunk_secs: u64,
    num_chunks: u64,
    clock: Arc<dyn Clock>,
    _event: PhantomData<fn() -> E>,
}

impl<M: Clone, E> Clone for EventLog<M, E> {
    fn clone(&self) -> Self {
        EventLog {
            mc: self.mc.clone(),
            name: self.name.clone(),
            chunk_secs: self.chunk_secs,
            num_chunks: self.num_chunks,
            clock: self.clock.clone(),
            _event: PhantomData,
        }
    }
}

impl<M: Memcache, E: Event> EventLog<M, E> {
    /// The log `name` with `num_chunks` keys (at least 2) of `chunk_secs` seconds (the seed's
    /// `timeChunk`, `numChunks`; both default to 10 there). Choose `chunk_secs` so one chunk
    /// stays well under the item size limit (the seed suggests 10–20 KB).
    ///
    /// # Panics
    /// If `chunk_secs == 0`, `num_chunks < 2`, or the ring (plus the expiry margin) spans more
    /// than 30 days, the longest relative TTL.
    pub fn new(mc: M, name: &str, chunk_secs: u64, num_chunks: u64, clock: Arc<dyn Clock>) -> Self {
        assert!(
            chunk_secs >= 1 && num_chunks >= 2,
            "need >= 2 chunks of >= 1 s"
        );
        assert!(
            chunk_secs * num_chunks + EXPIRY_MARGIN_SECS <= 30 * 86_400,
            "ring above 30 days"
        );
        EventLog {
            mc,
            name: name.to_owned(),
            chunk_secs,
            num_chunks,
            clock,
            _event: PhantomData,
        }
    }

    /// The seconds of history the log is guaranteed to hold: `(num_chunks - 1) · chunk_secs`.
    pub fn capacity_secs(&self) -> u64 {
        (self.num_chunks - 1) * self.chunk_secs
    }

    /// The key of absolute chunk `chunk` (`t / chunk_secs`).
    pub fn chunk_key(&self, chunk: u64) -> Vec<u8> {
        crate::codec::key("events", &format!("{}:{chunk}", self.name))
    }

    /// The absolute chunk numbers [`fetch`](Self::fetch)`(first, last)` reads at `now`,
    /// oldest first. Empty when the range is empty or entirely older than the log.
    pub fn chunks_for(&self, first: Option<u64>, last: Option<u64>, now: u64) -> Vec<u64> {
        let (first, last) = self.bounds(first, last, now);
        if first > last {
            return Vec::new();
        }
        let oldest = (now / self.chunk_secs).saturating_sub(self.num_chunks - 1);
        let lo = (first / self.chunk_secs).max(oldest);
        let hi = last / self.chunk_secs;
        (lo..=hi).collect()
    }

    fn bounds(&self, first: Option<u64>, last: Option<u64>, now: u64) -> (u64, u64) {
        // Up to the end of the current chunk: an event stamped a little ahead of our clock
        // (another host's) is still returned.
        let horizon = (now / self.chunk_secs + 1) * self.chunk_secs - 1;
        (first.unwrap_or(0), last.unwrap_or(horizon).min(horizon))
    }

    /// Appends `event` to its chunk. One round trip usually (`append`), two or three when it
    /// opens a chunk. Refuses events whose chunk has already been recycled (older than the
    /// log) or lies in a later chunk than the current one (the producer's clock is ahead).
    pub async fn put(&self, event: &E) -> Result<()> {
        let when = event.when();
        let now = self.clock.now_secs();
        let chunk = when / self.chunk_secs;
        if chunk > now / self.chunk_secs {
            return Err(Error::Invalid(format!(
                "event at {when} is in a later chunk than now ({now})"
            )));
        }
        let expires_at = (chunk + self.num_chunks) * self.chunk_secs;
        if expires_at <= now {
            return Err(Error::Invalid(format!(
                "event at {when} is older than the log (now {now})"
            )));
        }
        let line = encode_line(event)?;
        let ttl = Exptime::secs((expires_at - now + EXPIRY_MARGIN_SECS) as u32);
        append_or_add(&self.mc, &self.chunk_key(chunk), &line, ttl).await
    }

    /// The events stamped in `[first, last]` (defaults: the whole log, up to now), ordered
    /// by time (events of the same second in the order they were appended). One multi-get.
    pub async fn fetch(&self, first: Option<u64>, last: Option<u64>) -> Result<Vec<E>> {
        self.fetch_raw(first, last)
            .await?
            .into_iter()
            .map(|(_, line)| decode(&line))
            .collect()
    }

    /// `(when, JSON line)` pairs, as `fetch` filters and orders them.
    async fn fetch_raw(
        &self,
        first: Option<u64>,
        last: Option<u64>,
    ) -> Result<Vec<(u64, Vec<u8>)>> {
        let now = self.clock.now_secs();
        let chunks = self.chunks_for(first, last, now);
        if chunks.is_empty() {
            return Ok(Vec::new());
        }
        let (first, last) = self.bounds(first, last, now);
        let keys: Vec<Vec<u8>> = chunks.iter().map(|&c| self.chunk_key(c)).collect();
        let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
        let items = self.mc.get_multi(&refs, &Default::default()).await?;
        let mut out = Vec::new();
        for (&chunk, item) in chunks.iter().zip(items) {
            let Some(item) = item else { continue };
            for line in item.value.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                let e: E = decode(line)?;
                let t = e.when();
                // A chunk key holds only its own chunk; the check keeps a hand-written or
                // corrupt record out of the answer.
                if t / self.chunk_secs == chunk && (first..=last).contains(&t) {
                    out.push((t, line.to_vec()));
                }
            }
        }
        out.sort_by_key(|(t, _)| *t);
        Ok(out)
    }

    /// A [`Poller`] that starts with everything the log holds and re-reads the last second
    /// it saw (lag 0): events must arrive in timestamp order.
    pub fn poller(&self) -> Poller<'_, M, E> {
        self.poller_with_lag(0)
    }

    /// A [`Poller`] that tolerates events arriving up to `lag` seconds out of timestamp
    /// order (a producer stamped its event, then was delayed before appending it): every
    /// poll re-reads the last `lag + 1` seconds and skips what it already returned.
    pub fn poller_with_lag(&self, lag: u64) -> Poller<'_, M, E> {
        Poller {
            log: self,
            lag,
            last_seen: None,
            seen: HashMap::new(),
        }
    }
}

/// The seed's `lastSeen` polling pattern: each [`poll`](Poller::poll) returns the events not
/// returned before. It fetches from `lastSeen - lag` (`>=`, so events appended later in that
/// second are not missed) and skips exactly the records it already returned in that window.
///
/// An event whose timestamp is more than `lag` seconds older than the newest one already
/// polled when it is appended is not returned — choose the lag from how late producers can
/// be ([`EventLog::poller_with_lag`]).
#[derive(Debug)]
pub struct Poller<'a, M, E> {
    log: &'a EventLog<M, E>,
    lag: u64,
    last_seen: Option<u64>,
    /// The records returned so far whose time is within `lag` of `last_seen`, with counts.
    seen: HashMap<Vec<u8>, usize>,
}

impl<M: Memcache, E: Event> Poller<'_, M, E> {
    /// The newest timestamp returned so far.
    pub fn last_seen(&self) -> Option<u64> {
        self.last_seen
    }

    /// The events that appeared since the previous poll. One multi-get.
    pub async fn poll(&mut self) -> Result<Vec<E>> {
        let from = self.last_seen.map(|t| t.saturating_sub(self.lag));
        let all = self.log.fetch_raw(from, None).await?;
        if all.is_empty() {
            return Ok(Vec::new());
        }
        let mut skip = std::mem::take(&mut self.seen);
        let mut fresh = Vec::new();
        for (_, line) in &all {
            if let Some(n) = skip.get_mut(line)
                && *n > 0
            {
                *n -= 1;
                continue;
            }
            fresh.push(decode(line)?);
        }
        let newest = all
            .iter()
            .map(|(t, _)| *t)
            .max()
            .into_iter()
            .chain(self.last_seen)
            .max();
        self.last_seen = newest;
        let keep_from = newest.unwrap_or(0).saturating_sub(self.lag);
        for (t, line) in &all {
            if *t >= keep_from {
                *self.seen.entry(line.clone()).or_default() += 1;
            }
        }
        Ok(fresh)
    }
}
