//! Tag invalidation (seed 003, "Сброс группы кэшей"): drop a group of caches at once by
//! bumping one version.
//!
//! - A tag is a name with a version stored under its own key `tag:<name>` (the name used
//!   verbatim when key-safe, hashed otherwise; see [`crate::codec::key_part`]).
//! - The version is **the current time in milliseconds**, never a counter: a counter that was
//!   evicted restarts at 1 and can bring an old version back to life, validating caches that
//!   were invalidated; a timestamp only moves forward. An invalidation writes
//!   `max(now_ms, old + 1)` with gets/cas, so two invalidations in the same millisecond still
//!   give two versions.
//! - Every cached value stores the versions its tags had **before** its loader ran (read
//!   first, so an invalidation that lands while the loader reads the database makes the new
//!   value invalid instead of being overwritten by it).
//! - Reading a cached value fetches all its tags with **one multi-get** and treats the value
//!   as invalid when any version differs — including when a tag key is **missing** (evicted
//!   or never written): a lost tag must invalidate, never validate. The next build creates
//!   the tag again (`add` with the current time, so concurrent creators agree).
//!   Limit: a timestamp cannot tell apart two writes in the same millisecond, so a tag key
//!   evicted and re-created (or invalidated after eviction) no later than the millisecond
//!   its last version names could bring that version back. Invalidations of a *present* key
//!   are immune (`old + 1`). `old + 1` lets a version run ahead of the clock by one
//!   millisecond per extra invalidation within a millisecond, so the eviction case needs an
//!   eviction within that many milliseconds of the write — an LRU evicts the coldest keys,
//!   and a tag invalidated that often is the hottest key there is.
//! - An optional process-local cache of tag versions (off by default) saves the multi-get for
//!   tags shared by many caches, at the price of seeing other processes' invalidations up to
//!   its TTL late; this process's own invalidations are seen at once. It never goes back
//!   to an older version: a read answered after this process's own newer invalidation does
//!   not overwrite it.
//! - [`Tags::must_read_master`]: the seed's replica-lag trick. A version is the time the data
//!   changed; while it is younger than the replication lag, a rebuild must read the DB master,
//!   or it would cache the replica's old rows under the new version. Tag keys remember whether
//!   their version came from an invalidation (flags `1`) or from a first use (`0`), so a tag
//!   merely created on first use does not send reads to the master. A missing tag does: it
//!   may have been invalidated just before it was lost, so a rebuild decides from its first
//!   read of the tags ([`Tags::create_missing`] then re-creates them).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use memkit_types::{Clock, Exptime, Memcache, StoreMode, StoreOptions, StoreOutcome};

use crate::codec::{key_part, parse_u64};
use crate::structures::MAX_ATTEMPTS;
use crate::{Error, Result};

/// Client flags of a tag key whose version was written by an invalidation.
pub const FLAG_INVALIDATED: u32 = 1;

/// A tag's current version as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TagVersion {
    /// Milliseconds since the Unix epoch when the version was written.
    pub version: u64,
    /// Whether an invalidation wrote it (rather than a first use).
    pub invalidated: bool,
}

/// The tag versions of one store, with an optional process-local cache.
#[derive(Debug, Clone)]
pub struct Tags<M> {
    mc: M,
    clock: Arc<dyn Clock>,
    local_ttl: Duration,
    local: Arc<Mutex<HashMap<String, (TagVersion, u64)>>>,
}

/// The key that holds tag `name`'s version.
pub fn tag_key(name: &str) -> String {
    format!("tag:{}", key_part(name.as_bytes()))
}

impl<M: Memcache> Tags<M> {
    /// Tags on `mc`, versions from `clock`, no local cache.
    pub fn new(mc: M, clock: Arc<dyn Clock>) -> Self {
        Tags {
            mc,
            clock,
            local_ttl: Duration::ZERO,
            local: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// The same tags with a process-local cache of versions kept for `ttl` (zero: off).
    pub fn with_local_ttl(mut self, ttl: Duration) -> Self {
        self.local_ttl = ttl;
        self
    }

    fn now_ms(&self) -> u64 {
        self.clock.now_millis()
    }

    /// The current versions of `names`, aligned with it (`None`: the tag key is missing).
    /// One multi-get for the names not in the local cache.
    pub async fn versions(&self, names: &[String]) -> Result<Vec<Option<TagVersion>>> {
        let mut out = vec![None; names.len()];
        let mut ask: Vec<usize> = Vec::new();
        let now = self.now_ms();
        if self.local_ttl.is_zero() {
            ask.extend(0..names.len());
        } else {
            let local = self.local.lock().unwrap_or_else(|e| e.into_inner());
            let ttl = self.local_ttl.as_millis() as u64;
            for (i, n) in names.iter().enumerate() {
                match local.get(n) {
                    Some((v, at)) if now.saturating_sub(*at) < ttl => out[i] = Some(*v),
                    _ => ask.push(i),
                }
            }
        }
        if ask.is_empty() {
            return Ok(out);
        }
        let keys: Vec<String> = ask.iter().map(|&i| tag_key(&names[i])).collect();
        let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
        let items = self.mc.get_multi(&refs, &Default::default()).await?;
        let mut fresh = Vec::new();
        for (&i, item) in ask.iter().zip(items) {
            // A value that does not parse is treated as missing: it invalidates.
            out[i] = item.and_then(|it| {
                parse_u64(&it.value).ok().map(|version| TagVersion {
                    version,
                    invalidated: it.flags & FLAG_INVALIDATED != 0,
                })
            });
            if let Some(v) = out[i] {
                fresh.push((names[i].clone(), v));
            }
        }
        if !self.local_ttl.is_zero() && !fresh.is_empty() {
            let mut local = self.local.lock().unwrap_or_else(|e| e.into_inner());
            for (n, v) in fresh {
                remember(&mut local, n, v, now);
            }
        }
        Ok(out)
    }

    /// The versions of `names`, creating the missing ones with the current time (`add`, so
    /// concurrent creators agree on one version). What a new cached value records.
    pub async fn current_or_create(&self, names: &[String]) -> Result<Vec<TagVersion>> {
        let found = self.versions(names).await?;
        self.create_missing(names, found).await
    }

    /// `found` (versions of `names` as [`versions`](Self::versions) read them) with the
    /// missing ones created as in [`current_or_create`](Self::current_or_create). For a caller
    /// that must decide something from the first read, before a missing tag is re-created
    /// and so looks like a tag merely created on first use.
    pub async fn create_missing(
        &self,
        names: &[String],
        mut found: Vec<Option<TagVersion>>,
    ) -> Result<Vec<TagVersion>> {
        for (i, slot) in found.iter_mut().enumerate() {
            if slot.is_some() {
                continue;
            }
            let key = tag_key(&names[i]);
            for _ in 0..MAX_ATTEMPTS {
                let v = self.now_ms();
                let opts = StoreOptions::new(StoreMode::Add, 0, Exptime::NEVER);
                let st = self
                    .mc
                    .store(key.as_bytes(), v.to_string().as_bytes(), &opts)
                    .await?;
                if st.outcome == StoreOutcome::Stored {
                    *slot = Some(TagVersion {
                        version: v,
                        invalidated: false,
                    });
                    break;
                }
                if let Some(it) = self.mc.get(key.as_bytes()).await?
                    && let Ok(version) = parse_u64(&it.value)
                {
                    *slot = Some(TagVersion {
                        version,
                        invalidated: it.flags & FLAG_INVALIDATED != 0,
                    });
                    break;
                }
            }
        }
        found
            .into_iter()
            .map(|v| v.ok_or(Error::Contended(MAX_ATTEMPTS)))
            .collect()
    }

    /// Invalidates every cache that carries `name`: writes the version `max(now_ms, old+1)`.
    /// Returns the new version. Two round trips (gets, cas), or one `add` when the tag key
    /// is missing.
    pub async fn invalidate(&self, name: &str) -> Result<u64> {
        let key = tag_key(name);
        for _ in 0..MAX_ATTEMPTS {
            let now = self.now_ms();
            let current = self.mc.get(key.as_bytes()).await?;
            let (mode, cas, v) = match &current {
                Some(it) => {
                    let old = parse_u64(&it.value).unwrap_or(0);
                    (StoreMode::Set, Some(it.cas), now.max(old + 1))
                }
                None => (StoreMode::Add, None, now),
            };
            let opts = StoreOptions {
                cas,
                ..StoreOptions::new(mode, FLAG_INVALIDATED, Exptime::NEVER)
            };
            let st = self
                .mc
                .store(key.as_bytes(), v.to_string().as_bytes(), &opts)
                .await?;
            if st.outcome == StoreOutcome::Stored {
                if !self.local_ttl.is_zero() {
                    let mut local = self.local.lock().unwrap_or_else(|e| e.into_inner());
                    let v = TagVersion {
                        version: v,
                        invalidated: true,
                    };
                    remember(&mut local, name.to_owned(), v, now);
                }
                return Ok(v);
            }
        }
        Err(Error::Contended(MAX_ATTEMPTS))
    }

    /// Whether a cache whose value recorded `stored` (tag, version) pairs is still valid:
    /// every tag key present and holding exactly that version. One multi-get.
    pub async fn still_valid(&self, stored: &[(String, u64)]) -> Result<bool> {
        if stored.is_empty() {
            return Ok(true);
        }
        let names: Vec<String> = stored.iter().map(|(n, _)| n.clone()).collect();
        let now = self.versions(&names).await?;
        Ok(stored
            .iter()
            .zip(now)
            .all(|((_, v), cur)| cur.is_some_and(|c| c.version == *v)))
    }

    /// The seed's replica-lag rule: `true` when any of `names` was invalidated less than
    /// `lag` ago — or its key is missing, so we cannot know — and a rebuild must read the
    /// DB master instead of a replica. One multi-get.
    pub async fn must_read_master(&self, names: &[String], lag: Duration) -> Result<bool> {
        let now = self.versions(names).await?;
        Ok(must_read_master_at(&now, self.now_ms(), lag))
    }
}

/// Puts `v`, read or written at `now`, in the process-local cache unless the cache holds a
/// newer version: versions only move forward, and an answer can arrive after a newer one
/// (a multi-get sent before this process's own invalidation, answered after it). Going back
/// would validate, for the cache's TTL, values recorded under the older version.
fn remember(local: &mut HashMap<String, (TagVersion, u64)>, name: String, v: TagVersion, now: u64) {
    match local.get(&name) {
        Some((have, _)) if have.version > v.version => {}
        _ => {
            local.insert(name, (v, now));
        }
    }
}

/// [`Tags::must_read_master`] on versions already fetched.
pub fn must_read_master_at(versions: &[Option<TagVersion>], now_ms: u64, lag: Duration) -> bool {
    let lag = lag.as_millis() as u64;
    versions.iter().any(|v| match v {
        None => true,
        Some(v) => v.invalidated && now_ms.saturating_sub(v.version) < lag,
    })
}
