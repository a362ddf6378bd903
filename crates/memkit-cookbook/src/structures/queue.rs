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
//! **Stack** — keys `stack:<name>:top` and `stack:<name>:<slot>`; slots are reused as the
//! top moves down and up. *push*: `incr top` reserves slot `n`; `add` the element there.
//! *pop*: `gets top`; empty at 0; `gets` slot `top`, remove the element with `delete_cas`
//! (one consumer wins it), then move the top down *with its CAS*. Removing before moving
//! the top keeps every slot above the top empty, so a push's `add` never meets an element
//! being taken. If the top moved meanwhile (a push), the element goes back in its slot
//! and the pop starts over (or returns it, if the slot was closed meanwhile, below).
//! An empty slot under the top is a write or a pop in flight:
//! consumers wait for it, and after `hole_wait` with the top unchanged one closes it with
//! a tombstone (the late `add` fails, its push reserves again) and moves the top below it;
//! consumers skip a tombstone, and a push that reserved one moves the top past it in one
//! compare-and-swap. LIFO holds for pushes and pops that do not overlap in time;
//! overlapping ones may interleave.
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

    /// Takes the element in the queue's claimed slot `n`: `Some(encoded)` if we removed it,
    /// `None` if the slot is a hole (tombstoned by us or someone) or holds the tombstone of
    /// another consumer that took what was there. Removal is one atomic `cas` that replaces
    /// the element by a tombstone (the record of consumed slots), so exactly one taker wins.
    async fn take(&self, n: u64) -> Result<Option<Vec<u8>>> {
        let key = self.slot_key(n);
        let mut waited = Duration::ZERO;
        let mut nap = Duration::from_millis(1);
        for _ in 0..1_000 {
            match self.mc.get(&key).await? {
                Some(item) if item.value.first() == Some(&ITEM) => {
                    let ttl = Exptime::secs(self.opts.tombstone_ttl.max(1));
                    if self.mc.cas(&key, TOMBSTONE, 0, ttl, item.cas).await? == StoreOutcome::Stored
                    {
                        return Ok(Some(item.value[1..].to_vec()));
                    }
                    // Another consumer took it: the slot now holds its tombstone.
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
            if let Some(bytes) = s.take(h + 1).await? {
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

    /// Pushes `x`; returns its slot. Two round trips: reserve a slot, write it.
    ///
    /// A reserved slot is empty: a consumer moves the top below a slot only after it removed
    /// the element there, or closed the slot with a tombstone. So `add` fails only on a
    /// tombstone (or, after the top was lost, on an element left above the new top, which
    /// the reservation now covers), and the push reserves again.
    pub async fn push(&self, x: &T) -> Result<u64> {
        let mut body = vec![ITEM];
        body.extend(encode(x)?);
        let s = &self.slots;
        let mut n = incr_or_create(&s.mc, &s.counter_key("top"), 1, Exptime::NEVER).await?;
        for _ in 0..super::MAX_ATTEMPTS {
            if s.put(n, &body).await? {
                return Ok(n);
            }
            n = self.reserve_past(n).await?;
        }
        Err(Error::Contended(super::MAX_ATTEMPTS))
    }

    /// Reserves a slot other than `taken`, which our reservation found occupied (a
    /// tombstone). Consumers skip a tombstone by moving the top below it, so a plain `incr`
    /// lands on the same tombstone again whenever a consumer got there in between. Instead
    /// the top moves up with the CAS it was read with: over the tombstone to the slot above
    /// it when the top is just below it, else one up. The compare-and-swap fails only if
    /// another push or pop moved the top meanwhile.
    async fn reserve_past(&self, taken: u64) -> Result<u64> {
        let s = &self.slots;
        let top = s.counter_key("top");
        for _ in 0..super::MAX_ATTEMPTS {
            let Some((t, cas)) = s.counter(&top).await? else {
                return incr_or_create(&s.mc, &top, 1, Exptime::NEVER).await;
            };
            let opts = ArithOptions {
                mode: ArithMode::Incr,
                delta: if t + 1 == taken { 2 } else { 1 },
                cas: Some(cas),
                ..Default::default()
            };
            if let ArithOutcome::Value { value, .. } = s.mc.arithmetic(&top, &opts).await? {
                return Ok(value);
            }
        }
        Err(Error::Contended(super::MAX_ATTEMPTS))
    }

    /// Pops the newest element, `None` when empty. Four round trips: read the top, read its
    /// slot, remove the element, move the top down.
    ///
    /// The element is removed first (`delete_cas`: one consumer wins it) and the top moved
    /// after, with the CAS read with it: no slot above the top holds an element, so a push,
    /// which reserves the slot just above, never finds it still occupied. If the top moved
    /// meanwhile (a push above it), the element goes back in its slot, still under the top,
    /// and the pop starts over; if that slot was closed meanwhile (a consumer gave up
    /// waiting on it, below), no one else will deliver the element: this pop returns it.
    ///
    /// An empty slot under the top is a push between its two commands, or a pop between
    /// its last two. Consumers wait for it: while the top and its CAS stay unchanged for
    /// `hole_wait`, one of them closes the slot with a tombstone (the late writer's `add`
    /// then fails) and moves the top below it. A tombstone under the top is skipped.
    pub async fn pop(&self) -> Result<Option<T>> {
        let s = &self.slots;
        let top = s.counter_key("top");
        let mut hole = (0, 0);
        let mut waited = Duration::ZERO;
        let mut nap = Duration::ZERO;
        for _ in 0..MAX_CLAIMS {
            let Some((n, cas)) = s.counter(&top).await? else {
                return Ok(None);
            };
            if n == 0 {
                return Ok(None);
            }
            let key = s.slot_key(n);
            match s.mc.get(&key).await? {
                Some(item) if item.value.first() == Some(&ITEM) => {
                    if s.mc.delete_cas(&key, item.cas).await? != DeleteOutcome::Deleted {
                        continue; // another consumer took it
                    }
                    if s.step(&top, ArithMode::Decr, cas).await? || !s.put(n, &item.value).await? {
                        return decode(&item.value[1..]).map(Some);
                    }
                }
                Some(_) => {
                    s.step(&top, ArithMode::Decr, cas).await?;
                }
                None => {
                    if hole != (n, cas) {
                        (hole, waited, nap) = ((n, cas), Duration::ZERO, Duration::ZERO);
                    }
                    if waited >= s.opts.hole_wait {
                        if s.close(n).await? {
                            s.step(&top, ArithMode::Decr, cas).await?;
                        }
                        continue;
                    }
                    // A pop between its last two commands is done in a round trip: look
                    // again at once, then back off.
                    let d = nap.min(s.opts.hole_wait - waited);
                    sleep(d).await;
                    waited += d;
                    nap = (nap * 2).clamp(Duration::from_millis(1), Duration::from_millis(50));
                }
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
