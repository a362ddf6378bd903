//! The online counter over per-period keys and online-users tracking (seeds 003/004
//! "Счетчик онлайнеров", "Учет пользователей онлайн").
//!
//! See `docs/cookbook/online.md`.
//!
//! [`OnlineCounter`]: period `p = now / P` counts new sessions in the key `online:<name>:<p>`
//! (`incr`, created with TTL `N·P - now % P`, the end of the last period that reads it, plus
//! [`MAX_CLOCK_SKEW_SECS`](super::MAX_CLOCK_SKEW_SECS) + 1). The value is the sum of the
//! previous `N - 1` periods' keys: the last `N - 1` completed periods, read with one
//! multi-get. With more periods the shown number moves in smaller steps — the seed's
//! "smoothing" — at the cost of a longer window. Keys are named by period number, never by a
//! slot reused every `N` periods, so a producer whose clock runs ahead, or memcached's
//! once-a-second clock, can never add a new period's sessions to an old period's key.
//!
//! [`OnlineUsers`]: a key per user `online:<name>:u:<id>` holding the last-seen time, with a
//! TTL of the window, and `B` bucket keys `online:<name>:b:<id % B>` listing ids. A visit
//! `replace`s the user key (one round trip while the user stays online); only a user who was
//! not online is `set` and appended to a bucket (`append`, no lock — the seed used a critical
//! section). Listing multi-gets the buckets and then the user keys; [`OnlineUsers::compact`]
//! rewrites buckets without the users who left, with `cas` so that a concurrent append is
//! never lost.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! use std::sync::Arc;
//! use memkit_cookbook::{OnlineCounter, OnlineUsers};
//! use memkit_engine::{Embedded, EngineConfig};
//! use memkit_types::ManualClock;
//!
//! let clock = ManualClock::new(1_700_000_040); // a period boundary (P = 60)
//! let mc = Embedded::new(EngineConfig::with_memory(64 << 20).clock(Arc::new(clock.clone())));
//! let online = OnlineCounter::new(mc.clone(), "site", 6, 60, Arc::new(clock.clone()));
//! online.hit().await?;
//! online.hit().await?;
//! assert_eq!(online.value().await?, 0); // the current minute is not shown yet
//! clock.advance(60);
//! assert_eq!(online.value().await?, 2);
//!
//! let users = OnlineUsers::new(mc, "site", 300, 16, Arc::new(clock.clone()));
//! users.touch(7).await?;
//! users.touch(42).await?;
//! let ids: Vec<u64> = users.list().await?.into_iter().map(|(id, _)| id).collect();
//! assert_eq!(ids, vec![7, 42]);
//! # Ok::<(), memkit_cookbook::Error>(()) }).unwrap();
//! ```

use std::collections::BTreeSet;
use std::sync::Arc;

use memkit_types::{Clock, DeleteOutcome, Exptime, Memcache, StoreOutcome};

use super::{EXPIRY_MARGIN_SECS, append_or_add, incr_or_create};
use crate::codec::parse_u64;
use crate::{Error, Result};

/// Sessions seen over the last `N - 1` completed periods of `P` seconds.
#[derive(Debug, Clone)]
pub struct OnlineCounter<M> {
    mc: M,
    name: String,
    slots: u64,
    period: u64,
    clock: Arc<dyn Clock>,
}

impl<M: Memcache> OnlineCounter<M> {
    /// `slots` periods (at least 2; the seeds use 6) of `period` seconds each (60).
    ///
    /// # Panics
    /// If `slots < 2`, `period == 0`, or `slots * period` plus the expiry margin exceeds 30
    /// days.
    pub fn new(mc: M, name: &str, slots: usize, period: u64, clock: Arc<dyn Clock>) -> Self {
        assert!(slots >= 2 && period >= 1, "need >= 2 slots of >= 1 s");
        assert!(
            slots as u64 * period + EXPIRY_MARGIN_SECS <= 30 * 86_400,
            "window above 30 days"
        );
        OnlineCounter {
            mc,
            name: name.to_owned(),
            slots: slots as u64,
            period,
            clock,
        }
    }

    /// The number of the period counting at `now`: `now / P`.
    pub fn period_at(&self, now: u64) -> u64 {
        now / self.period
    }

    /// The key counting period `p`.
    pub fn key_for(&self, p: u64) -> Vec<u8> {
        crate::codec::key("online", &format!("{}:{p}", self.name))
    }

    /// The TTL of a key created at `now`: until the last period that reads it ends, plus the
    /// expiry margin.
    pub fn ttl_at(&self, now: u64) -> u64 {
        self.slots * self.period - now % self.period + EXPIRY_MARGIN_SECS
    }

    /// Counts one session (unique within the window, which the caller decides). One round
    /// trip.
    pub async fn hit(&self) -> Result<u64> {
        let now = self.clock.now_secs();
        let key = self.key_for(self.period_at(now));
        incr_or_create(&self.mc, &key, 1, Exptime::secs(self.ttl_at(now) as u32)).await
    }

    /// The sum of the `N - 1` periods before the current one. One multi-get.
    pub async fn value(&self) -> Result<u64> {
        let cur = self.period_at(self.clock.now_secs());
        let keys: Vec<Vec<u8>> = (1..self.slots)
            .filter_map(|back| cur.checked_sub(back))
            .map(|p| self.key_for(p))
            .collect();
        let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
        let mut sum = 0u64;
        for item in self
            .mc
            .get_multi(&refs, &Default::default())
            .await?
            .into_iter()
            .flatten()
        {
            sum = sum.wrapping_add(parse_u64(&item.value)?);
        }
        Ok(sum)
    }
}

/// Which users were seen within the last `window` seconds.
#[derive(Debug, Clone)]
pub struct OnlineUsers<M> {
    mc: M,
    name: String,
    window: u64,
    buckets: u64,
    clock: Arc<dyn Clock>,
}

impl<M: Memcache> OnlineUsers<M> {
    /// Users online within `window` seconds, ids spread over `buckets` bucket keys.
    ///
    /// # Panics
    /// If `window` is 0 or above 30 days, or `buckets` is 0.
    pub fn new(mc: M, name: &str, window: u64, buckets: u64, clock: Arc<dyn Clock>) -> Self {
        assert!(
            (1..=30 * 86_400).contains(&window),
            "window 1 s ..= 30 days"
        );
        assert!(buckets >= 1, "at least one bucket");
        OnlineUsers {
            mc,
            name: name.to_owned(),
            window,
            buckets,
            clock,
        }
    }

    /// The key holding user `id`'s last-seen time.
    pub fn user_key(&self, id: u64) -> Vec<u8> {
        crate::codec::key("online", &format!("{}:u:{id}", self.name))
    }

    /// The bucket key listing ids with `id % buckets == b`.
    pub fn bucket_key(&self, b: u64) -> Vec<u8> {
        crate::codec::key("online", &format!("{}:b:{b}", self.name))
    }

    /// Marks user `id` online now. One round trip when the user was already online;
    /// three (replace, set, append) when they come online.
    pub async fn touch(&self, id: u64) -> Result<()> {
        let now = self.clock.now_secs().to_string();
        let key = self.user_key(id);
        let ttl = Exptime::secs(self.window as u32);
        if self.mc.replace(&key, now.as_bytes(), 0, ttl).await? {
            return Ok(());
        }
        // Set the user key *before* listing the id: a compaction that sees the id then
        // also sees the key, so it cannot drop a user who is online.
        self.mc.set(&key, now.as_bytes(), 0, ttl).await?;
        let entry = format!("{id} ");
        append_or_add(
            &self.mc,
            &self.bucket_key(id % self.buckets),
            entry.as_bytes(),
            Exptime::NEVER,
        )
        .await
    }

    /// Marks user `id` offline (deletes their key; the bucket entry goes at compaction).
    pub async fn leave(&self, id: u64) -> Result<()> {
        self.mc.delete(&self.user_key(id)).await?;
        Ok(())
    }

    /// Whether user `id` was seen within the window. One round trip.
    pub async fn is_online(&self, id: u64) -> Result<bool> {
        Ok(self.mc.get(&self.user_key(id)).await?.is_some())
    }

    /// Every online user with their last-seen time, by id. Two multi-gets.
    pub async fn list(&self) -> Result<Vec<(u64, u64)>> {
        let bucket_keys: Vec<Vec<u8>> = (0..self.buckets).map(|b| self.bucket_key(b)).collect();
        let refs: Vec<&[u8]> = bucket_keys.iter().map(|k| k.as_slice()).collect();
        let mut ids = BTreeSet::new();
        for item in self
            .mc
            .get_multi(&refs, &Default::default())
            .await?
            .into_iter()
            .flatten()
        {
            ids.extend(parse_ids(&item.value)?);
        }
        self.live(ids.into_iter().collect()).await
    }

    /// How many users are online (the length of [`list`](Self::list)).
    pub async fn count(&self) -> Result<usize> {
        Ok(self.list().await?.len())
    }

    /// Rewrites each bucket without duplicates and without users who went offline. A bucket
    /// changed by a concurrent `touch` is left for the next compaction (`cas`), so nobody is
    /// dropped. Returns how many entries were removed.
    pub async fn compact(&self) -> Result<usize> {
        let mut removed = 0;
        for b in 0..self.buckets {
            let key = self.bucket_key(b);
            let Some(item) = self.mc.get(&key).await? else {
                continue;
            };
            let listed = parse_ids(&item.value)?;
            let unique: BTreeSet<u64> = listed.iter().copied().collect();
            let live = self.live(unique.into_iter().collect()).await?;
            if live.len() == listed.len() {
                continue;
            }
            let ok = if live.is_empty() {
                self.mc.delete_cas(&key, item.cas).await? == DeleteOutcome::Deleted
            } else {
                let body: String = live.iter().map(|(id, _)| format!("{id} ")).collect();
                self.mc
                    .cas(&key, body.as_bytes(), 0, Exptime::NEVER, item.cas)
                    .await?
                    == StoreOutcome::Stored
            };
            if ok {
                removed += listed.len() - live.len();
            }
        }
        Ok(removed)
    }

    async fn live(&self, ids: Vec<u64>) -> Result<Vec<(u64, u64)>> {
        let mut out = Vec::new();
        for chunk in ids.chunks(256) {
            let keys: Vec<Vec<u8>> = chunk.iter().map(|&id| self.user_key(id)).collect();
            let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
            let items = self.mc.get_multi(&refs, &Default::default()).await?;
            for (&id, item) in chunk.iter().zip(items) {
                if let Some(item) = item {
                    out.push((id, parse_u64(&item.value)?));
                }
            }
        }
        Ok(out)
    }
}

fn parse_ids(bytes: &[u8]) -> Result<Vec<u64>> {
    std::str::from_utf8(bytes)
        .map_err(|e| Error::Codec(e.to_string()))?
        .split_ascii_whitespace()
        .map(|s| s.parse().map_err(|_| Error::Codec(format!("bad id {s:?}"))))
        .collect()
}
