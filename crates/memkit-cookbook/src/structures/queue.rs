//! A FIFO queue and a LIFO stack on memcached primitives (beyond the seeds: a commenter on
//! seed 001 asked for "queues and stacks on memcached").
//!
//! See `docs/cookbook/queue.md`.
//!
//! **Queue** — keys `queue:<name>:tail`, `queue:<name>:head` (counters) and one key per
//! element `queue:<name>:<slot>`.
//! - *push*: `incr tail` (created on a miss) reserves slot `n` for this producer alone; read
//!   the head; `add` the element in slot `n`. If the slot is occupied (a tombstone, see below)
//!   take the next one. A slot at or below the head read after reserving it would never be
//!   claimed: the tail was lost and re-created below the head, so the producer tombstones the
//!   slot, moves the tail up to the head (one compare-and-swap) and reserves again.
//! - *pop*: multi-get head and tail; empty if `head >= tail`; else claim slot `head + 1` by
//!   incrementing head *with its CAS* (so head never passes tail and each slot is claimed
//!   once); then take the element: `gets`, then a `cas` that replaces it by a short-lived
//!   tombstone — whoever's `cas` wins returns it, so an element is delivered at most once
//!   even if a slot were claimed twice. A claimed slot whose producer has not written yet is
//!   polled for `hole_wait`; then the consumer `add`s a tombstone: if that succeeds the
//!   producer's `add` fails and it re-pushes to a new slot (nothing lost); if it fails, the
//!   element just arrived and is taken.
//! - *head lost* (evicted, flushed, server restarted): the consumer that finds it missing
//!   scans back from the tail for the highest tombstone (every consumed slot holds one for
//!   `tombstone_ttl`) and restarts the head there: no consumed element is replayed, no
//!   waiting one skipped. With no tombstone left it restarts just below the lowest waiting
//!   element (or at the tail), tombstoning the empty slots just under it, lowest first, so
//!   that a producer that reserved one and has not written yet pushes again; a slot written
//!   meanwhile stops it there and the head restarts just below that slot. Recovery never
//!   leaves a tombstone above a waiting element. *Tail lost*: every producer
//!   that reserves a slot at or below the head moves the tail up to the head; slots still
//!   holding elements are skipped by `add`, so they are delivered too.
//!
//! **Stack** — keys `stack:<name>:top` and `stack:<name>:<slot>`. *push*: `incr top`, `add`
//! the slot (next slot if occupied). *pop*: `gets top`; empty at 0; claim slot `top` by
//! decrementing top *with its CAS*; take the element as above but with `delete_cas` (slots
//! are reused as the top moves down and up, so consumed slots must not stay occupied). A
//! consumer that loses the take reads its slot again: a newer element may have landed there
//! above a top that has already moved below it, where no other consumer looks.
//! LIFO holds for pushes and pops that do not overlap in time; overlapping ones may
//! interleave.
//!
//! Guarantees while the keys live: every pushed element is popped exactly once; none is
//! lost or duplicated (a consumer that crashes after taking an element loses it:
//! at-most-once delivery). The sleeps use tokio's timer.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! use memkit_cookbook::{Queue, Stack};
//! use memkit_engine::Embedded;
//!
//! let mc = Embedded::with_defaults();
//! let jobs: Queue<_, String> = Queue::new(mc.clone(), "jobs");
//! jobs.push(&"a".to_string()).await?;
//! jobs.push(&"b".to_string()).await?;
//! assert_eq!(jobs.pop().await?, Some("a".to_string()));
//! assert_eq!(jobs.pop().await?, Some("b".to_string()));
//! assert_eq!(jobs.pop().await?, None);
//!
//! let undo: Stack<_, u32> = Stack::new(mc, "undo");
//! undo.push(&1).await?;
//! undo.push(&2).await?;
//! assert_eq!(undo.pop().await?, Some(2));
//! # Ok::<(), memkit_cookbook::Error>(()) }).unwrap();
//! ```

use std::marker::PhantomData;
use std::time::Duration;

use memkit_types::{
    ArithMode, ArithOptions, ArithOutcome, DeleteOutcome, Exptime, Memcache, StoreOutcome,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{incr_or_create, sleep, ttl_secs};
use crate::codec::{decode, encode, parse_u64};
use crate::{Error, Result};

/// How long an optimistic pop keeps losing CAS races before giving up.
const MAX_CLAIMS: u32 = 100_000;
/// How far back a head recovery scans for unconsumed elements.
const MAX_RECOVERY_SCAN: u64 = 1 << 16;
/// How many empty slots below the restarted head a recovery without tombstones closes with a
/// tombstone, for producers that reserved them and have not written yet.
const IN_FLIGHT: usize = 64;

const ITEM: u8 = b'I';
const TOMBSTONE: &[u8] = b"T";

/// Timing of a [`Queue`] or [`Stack`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueOptions {
    /// TTL of each element in seconds (0: never expires).
    pub item_ttl: u64,
    /// How long a consumer waits for a claimed slot's producer to write it before it
    /// tombstones the slot. Producers need two round trips between reserving and writing.
    pub hole_wait: Duration,
    /// TTL of a tombstone in seconds: it must outlive any producer stuck between its two
    /// commands.
    pub tombstone_ttl: u32,
}

impl Default for QueueOptions {
    fn default() -> Self {
        QueueOptions {
            item_ttl: 0,
            hole_wait: Duration::from_millis(500),
            tombstone_ttl: 300,
        }
    }
}

#[derive(Debug)]
struct Slots<M> {
    mc: M,
    prefix: String,
    opts: QueueOptions,
}

impl<M: Memcache> Slots<M> {
    fn slot_key(&self, n: u64) -> Vec<u8> {
        format!("{}:{n}", self.prefix).into_bytes()
    }

    fn counter_key(&self, which: &str) -> Vec<u8> {
        format!("{}:{which}", self.prefix).into_bytes()
    }

    /// Writes `body` to the slot; `false` if the slot is occupied.
    async fn put(&self, n: u64, body: &[u8]) -> Result<bool> {
        Ok(self
            .mc
            .add(&self.slot_key(n), body, 0, ttl_secs(self.opts.item_ttl))
            .await?)
    }

    /// Puts a tombstone in slot `n` unless it is occupied; `false` if it was (an element,
    /// or a tombstone someone else put there).
    async fn close(&self, n: u64) -> Result<bool> {
        let ttl = Exptime::secs(self.opts.tombstone_ttl.max(1));
        Ok(self.mc.add(&self.slot_key(n), TOMBSTONE, 0, ttl).await?)
    }

    /// Takes the element in claimed slot `n`: `Some(encoded)` if we removed it, `None` if the
    /// slot is a hole (tombstoned by us or someone) or ends empty or tombstoned after another
    /// consumer took what was there. Removal is one atomic CAS command, so exactly one taker
    /// wins: `delete_cas`, or with `mark` a `cas` that replaces the element by a tombstone
    /// (the queue's record of consumed slots). A lost race reads the slot again.
    async fn take(&self, n: u64, mark: bool) -> Result<Option<Vec<u8>>> {
        let key = self.slot_key(n);
        let mut waited = Duration::ZERO;
        let mut nap = Duration::from_millis(1);
        for _ in 0..1_000 {
            match self.mc.get(&key).await? {
                Some(item) if item.value.first() == Some(&ITEM) => {
                    let won = if mark {
                        let ttl = Exptime::secs(self.opts.tombstone_ttl.max(1));
                        self.mc.cas(&key, TOMBSTONE, 0, ttl, item.cas).await?
                            == StoreOutcome::Stored
                    } else {
                        self.mc.delete_cas(&key, item.cas).await? == DeleteOutcome::Deleted
                    };
                    if won {
                        return Ok(Some(item.value[1..].to_vec()));
                    }
                    // Someone else took that element, but a stack's slot is reused as its top
                    // moves down and up: a newer element may sit in the slot we still hold the
                    // claim on, above a top that has already moved below it, where no other
                    // consumer will look. Read the slot again rather than strand it.
                }
                Some(_) => return Ok(None),
                None if waited >= self.opts.hole_wait => {
                    if self.close(n).await? {
                        return Ok(None);
                    }
                    // The element arrived between our get and add: read it again.
                }
                None => {
                    let d = nap.min(self.opts.hole_wait - waited);
                    sleep(d).await;
                    waited += d;
                    nap = (nap * 2).min(Duration::from_millis(50));
                }
            }
        }
        Err(Error::Contended(1_000))
    }

    async fn counter(&self, key: &[u8]) -> Result<Option<(u64, u64)>> {
        match self.mc.get(key).await? {
            Some(item) => Ok(Some((parse_u64(&item.value)?, item.cas))),
            None => Ok(None),
        }
    }

    /// Moves counter `key` from `from` (with CAS `cas`) one step; `false` if it changed.
    async fn step(&self, key: &[u8], mode: ArithMode, cas: u64) -> Result<bool> {
        let opts = ArithOptions {
            mode,
            delta: 1,
            cas: Some(cas),
            ..Default::default()
        };
        Ok(matches!(
            self.mc.arithmetic(key, &opts).await?,
            ArithOutcome::Value { .. }
        ))
    }
}

/// A FIFO queue shared by many producers and consumers.
#[derive(Debug)]
pub struct Queue<M, T> {
    slots: Slots<M>,
    _t: PhantomData<fn() -> T>,
}

impl<M: Memcache, T: Serialize + DeserializeOwned> Queue<M, T> {
    /// The queue `name` with default options.
    pub fn new(mc: M, name: &str) -> Self {
        Self::with_options(mc, name, QueueOptions::default())
    }

    /// The queue `name` with `opts`.
    pub fn with_options(mc: M, name: &str, opts: QueueOptions) -> Self {
        Queue {
            slots: Slots {
                mc,
                prefix: format!("queue:{name}"),
                opts,
            },
            _t: PhantomData,
        }
    }

    /// Appends `x`; returns its slot number. Three round trips: reserve a slot, read the
    /// head, write the slot.
    ///
    /// A slot at or below the head would never be claimed by a consumer, so the head is read
    /// after the slot is reserved: a reservation at or below it means the tail was lost and
    /// re-created below the head (or, rarely, that a consumer claimed the slot within that
    /// round trip). The producer then closes the slot with a tombstone (a consumer that
    /// claimed it stops waiting for it), moves the tail up to the head and reserves again.
    /// A head read before the reservation could be older than the tail it is compared with:
    /// the elements below a re-created tail may have been consumed in between.
    pub async fn push(&self, x: &T) -> Result<u64> {
        let mut body = vec![ITEM];
        body.extend(encode(x)?);
        let s = &self.slots;
        let (head, tail) = (s.counter_key("head"), s.counter_key("tail"));
        for _ in 0..super::MAX_ATTEMPTS {
            let n = incr_or_create(&s.mc, &tail, 1, Exptime::NEVER).await?;
            let h = s.counter(&head).await?.map_or(0, |c| c.0);
            if n <= h {
                s.close(n).await?;
                self.raise_tail(h).await?;
                continue;
            }
            if s.put(n, &body).await? {
                return Ok(n);
            }
        }
        Err(Error::Contended(super::MAX_ATTEMPTS))
    }

    /// Moves the tail up to `to` unless it is there already. Compare-and-swap, so that of
    /// producers racing to repair it one moves it and the others see it moved: the slots
    /// between the old head and the new tail are not multiplied into holes.
    async fn raise_tail(&self, to: u64) -> Result<()> {
        let s = &self.slots;
        let tail = s.counter_key("tail");
        for _ in 0..super::MAX_ATTEMPTS {
            let Some((t, cas)) = s.counter(&tail).await? else {
                return Ok(()); // lost again: the next reservation re-checks
            };
            if t >= to {
                return Ok(());
            }
            let opts = ArithOptions {
                mode: ArithMode::Incr,
                delta: to - t,
                cas: Some(cas),
                ..Default::default()
            };
            if matches!(
                s.mc.arithmetic(&tail, &opts).await?,
                ArithOutcome::Value { .. }
            ) {
                return Ok(());
            }
        }
        Err(Error::Contended(super::MAX_ATTEMPTS))
    }

    /// Removes and returns the oldest element, `None` when the queue is empty. Four round
    /// trips (head+tail, claim, gets, delete).
    pub async fn pop(&self) -> Result<Option<T>> {
        let s = &self.slots;
        let (head, tail) = (s.counter_key("head"), s.counter_key("tail"));
        for _ in 0..MAX_CLAIMS {
            let got = s.mc.get_multi(&[&head, &tail], &Default::default()).await?;
            let t = match &got[1] {
                Some(item) => parse_u64(&item.value)?,
                None => 0,
            };
            let (h, cas) = match &got[0] {
                Some(item) => (parse_u64(&item.value)?, item.cas),
                None if t == 0 => return Ok(None),
                None => {
                    let start = self.recover_head(t).await?;
                    s.mc.add(&head, start.to_string().as_bytes(), 0, Exptime::NEVER)
                        .await?;
                    continue;
                }
            };
            if h >= t {
                return Ok(None);
            }
            if !s.step(&head, ArithMode::Incr, cas).await? {
                continue;
            }
            if let Some(bytes) = s.take(h + 1, true).await? {
                return decode(&bytes).map(Some);
            }
        }
        Err(Error::Contended(MAX_CLAIMS))
    }

    /// The head is missing — a new queue, or the key was lost. Every claimed slot is either
    /// being taken or holds a tombstone (consumed or skipped), so the highest tombstone below
    /// the tail bounds the true head from below; the slots above it are unclaimed or in
    /// flight. Restarting there re-claims at most a few in-flight slots, and those are taken
    /// by exactly one consumer (the CAS in `take`): nothing is delivered twice or skipped.
    /// That bound holds only while no tombstone sits above a waiting element, so recovery
    /// never puts one there.
    ///
    /// With no tombstone in reach (they expired), the consumed slots are empty and would
    /// each cost a consumer `hole_wait`. Waiting elements sit above every consumed slot, so
    /// the head restarts just below the lowest waiting element (or at the tail when none
    /// waits). Empty slots just below it may be reserved by producers that have not written
    /// yet: the `IN_FLIGHT` highest of them are closed with a tombstone, lowest first, so
    /// such a producer's `add` fails and it pushes again rather than writing below the head.
    /// A slot found written meanwhile ends the closing: the head restarts just below it,
    /// every slot under it closed and no tombstone above it.
    async fn recover_head(&self, tail: u64) -> Result<u64> {
        let s = &self.slots;
        let floor = tail.saturating_sub(MAX_RECOVERY_SCAN);
        let mut lowest_item = tail + 1;
        let mut empty: Vec<u64> = Vec::new();
        let mut hi = tail;
        while hi > floor {
            let lo = hi.saturating_sub(63).max(floor + 1);
            let keys: Vec<Vec<u8>> = (lo..=hi).map(|n| s.slot_key(n)).collect();
            let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
            let items = s.mc.get_multi(&refs, &Default::default()).await?;
            let found: Vec<(u64, Option<memkit_types::Item>)> = (lo..=hi).zip(items).collect();
            for (n, item) in found.into_iter().rev() {
                match item {
                    Some(i) if i.value.as_ref() == TOMBSTONE => return Ok(n),
                    Some(_) => {
                        lowest_item = n;
                        empty.clear();
                    }
                    None if empty.len() < IN_FLIGHT => empty.push(n),
                    None => {}
                }
            }
            hi = lo - 1;
        }
        for &n in empty.iter().rev() {
            if s.close(n).await? {
                continue;
            }
            match s.mc.get(&s.slot_key(n)).await? {
                // Another consumer's recovery closed it.
                Some(i) if i.value.as_ref() == TOMBSTONE => {}
                // A producer wrote it meanwhile (or its element was taken since, by a
                // consumer that restarted the head below it): restart below it.
                _ => return Ok(n - 1),
            }
        }
        Ok(lowest_item - 1)
    }

    /// Elements waiting (tail − head; holes included). Two round trips at most.
    pub async fn len(&self) -> Result<u64> {
        let s = &self.slots;
        let h = s.counter(&s.counter_key("head")).await?.map_or(0, |c| c.0);
        let t = s.counter(&s.counter_key("tail")).await?.map_or(0, |c| c.0);
        Ok(t.saturating_sub(h))
    }

    /// Whether [`len`](Self::len) is 0.
    pub async fn is_empty(&self) -> Result<bool> {
        Ok(self.len().await? == 0)
    }
}

/// A LIFO stack shared by many producers and consumers.
#[derive(Debug)]
pub struct Stack<M, T> {
    slots: Slots<M>,
    _t: PhantomData<fn() -> T>,
}

impl<M: Memcache, T: Serialize + DeserializeOwned> Stack<M, T> {
    /// The stack `name` with default options.
    pub fn new(mc: M, name: &str) -> Self {
        Self::with_options(mc, name, QueueOptions::default())
    }

    /// The stack `name` with `opts`.
    pub fn with_options(mc: M, name: &str, opts: QueueOptions) -> Self {
        Stack {
            slots: Slots {
                mc,
                prefix: format!("stack:{name}"),
                opts,
            },
            _t: PhantomData,
        }
    }

    /// Pushes `x`; returns its slot. Two round trips.
    pub async fn push(&self, x: &T) -> Result<u64> {
        let mut body = vec![ITEM];
        body.extend(encode(x)?);
        let s = &self.slots;
        let top = s.counter_key("top");
        for _ in 0..super::MAX_ATTEMPTS {
            let n = incr_or_create(&s.mc, &top, 1, Exptime::NEVER).await?;
            if s.put(n, &body).await? {
                return Ok(n);
            }
        }
        Err(Error::Contended(super::MAX_ATTEMPTS))
    }

    /// Pops the newest element, `None` when empty. Four round trips.
    pub async fn pop(&self) -> Result<Option<T>> {
        let s = &self.slots;
        let top = s.counter_key("top");
        for _ in 0..MAX_CLAIMS {
            let Some((n, cas)) = s.counter(&top).await? else {
                return Ok(None);
            };
            if n == 0 {
                return Ok(None);
            }
            if !s.step(&top, ArithMode::Decr, cas).await? {
                continue;
            }
            if let Some(bytes) = s.take(n, false).await? {
                return decode(&bytes).map(Some);
            }
        }
        Err(Error::Contended(MAX_CLAIMS))
    }

    /// The top counter (elements plus holes below it).
    pub async fn len(&self) -> Result<u64> {
        let s = &self.slots;
        Ok(s.counter(&s.counter_key("top")).await?.map_or(0, |c| c.0))
    }

    /// Whether [`len`](Self::len) is 0.
    pub async fn is_empty(&self) -> Result<bool> {
        Ok(self.len().await? == 0)
    }
}
