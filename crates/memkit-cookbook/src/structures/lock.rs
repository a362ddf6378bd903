//! A distributed lock on `add` with a TTL (seed 000 "Блокировка", seed 004's linear back-off).
//!
//! See `docs/cookbook/lock.md` for the idea, keys, costs and failure modes.
//!
//! - **Acquire**: `add lock:<name> <owner token> ttl` — exactly one caller creates the key.
//!   [`Lock::try_lock`] tries once; [`Lock::lock`] retries with a linearly growing sleep
//!   (`step, 2·step, 3·step…`, capped) until its wait budget is spent.
//! - **Release only our own lock**: the seed's `unlock` deleted the key unconditionally, so a
//!   holder whose TTL had run out freed *the next holder's* lock. Here the value is a random
//!   owner token, and [`LockGuard::unlock`] deletes only if the item is still ours:
//!   `delete_cas` with the CAS our `add` returned (one round trip), or, when the backend
//!   reported no CAS or the item changed, `gets` + compare token + `delete_cas` (two).
//!   [`LockGuard::extend`] is `gets` + compare token + `cas` with the new TTL.
//! - **Drop**: Rust has no async drop. A [`LockGuard`] dropped without `unlock().await`
//!   releases on a best-effort basis: inside a tokio runtime it *spawns* the same checked
//!   unlock; outside one it leaves the key to expire with its TTL. Call
//!   [`LockGuard::unlock`] when you care about prompt release or want to know whether the
//!   lock was still held; use [`LockGuard::forget`] to deliberately leave it to the TTL.
//!
//! **An efficiency lock, not a fencing lock.** It keeps processes from doing the same work
//! twice while its key lives. If the holder stalls past the TTL (GC pause, swap, network
//! partition) or memcached evicts or loses the key, a second process acquires it while the
//! first still believes it holds it; memcached offers no fencing token a downstream store
//! could check. Protect correctness with the data's own atomic operations (cas), as
//! [`Array`](crate::Array) and [`Set`](crate::Set) do.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! use memkit_cookbook::{Lock, LockOptions};
//! use memkit_engine::Embedded;
//!
//! let mc = Embedded::with_defaults();
//! let lock = Lock::with_options(mc.clone(), "rebuild-report", LockOptions::ttl_secs(10));
//! let guard = lock.lock().await?;              // waits (bounded) if someone holds it
//! assert!(lock.try_lock().await?.is_none());   // held: a second try fails at once
//! assert!(guard.unlock().await?);              // true: it was still ours
//! assert!(lock.try_lock().await?.is_some());
//! # Ok::<(), memkit_cookbook::Error>(()) }).unwrap();
//! ```

use std::future::Future;
use std::time::Duration;

use memkit_types::{Cas, DeleteOutcome, Exptime, Memcache, StoreMode, StoreOptions, StoreOutcome};

use super::{sleep, unique_token};
use crate::{Error, Result};

/// How a [`Lock`] expires and waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockOptions {
    /// Seconds until the lock frees itself if its holder never unlocks (the seed's
    /// `timeout`, default 5). memcached counts whole seconds, so the lock lives between
    /// `ttl - 1` and `ttl` seconds.
    pub ttl: u32,
    /// The most [`Lock::lock`] sleeps in total before giving up with
    /// [`Error::LockTimeout`]. Counted as time slept, not read from a clock.
    pub max_wait: Duration,
    /// The back-off unit: the k-th failed attempt sleeps `k * backoff_step`...
    pub backoff_step: Duration,
    /// ...but never more than this.
    pub max_backoff: Duration,
}

impl Default for LockOptions {
    fn default() -> Self {
        LockOptions {
            ttl: 5,
            max_wait: Duration::from_secs(5),
            backoff_step: Duration::from_millis(5),
            max_backoff: Duration::from_millis(200),
        }
    }
}

impl LockOptions {
    /// Defaults with a TTL of `ttl` seconds (at least 1).
    pub fn ttl_secs(ttl: u32) -> Self {
        LockOptions {
            ttl: ttl.max(1),
            ..Default::default()
        }
    }

    /// The same options with another wait budget.
    pub fn max_wait(mut self, d: Duration) -> Self {
        self.max_wait = d;
        self
    }

    /// The same options with another back-off unit and cap.
    pub fn backoff(mut self, step: Duration, max: Duration) -> Self {
        self.backoff_step = step;
        self.max_backoff = max;
        self
    }
}

/// A named lock shared by every process that uses the same name on the same store.
///
/// Cheap to clone when `M` is (the embedded store and the client are handles).
#[derive(Debug, Clone)]
pub struct Lock<M> {
    mc: M,
    name: String,
    key: Vec<u8>,
    opts: LockOptions,
}

impl<M: Memcache + Clone + 'static> Lock<M> {
    /// The lock `name` (key `lock:<name>`) with default options.
    pub fn new(mc: M, name: &str) -> Self {
        Self::with_options(mc, name, LockOptions::default())
    }

    /// The lock `name` with `opts`.
    pub fn with_options(mc: M, name: &str, opts: LockOptions) -> Self {
        Lock {
            mc,
            name: name.to_owned(),
            key: crate::codec::key("lock", name),
            opts,
        }
    }

    /// The memcached key that holds the lock.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The options.
    pub fn options(&self) -> &LockOptions {
        &self.opts
    }

    /// One attempt: `Some(guard)` if we now hold the lock, `None` if someone else does.
    /// One round trip.
    pub async fn try_lock(&self) -> Result<Option<LockGuard<M>>> {
        let token = unique_token();
        let opts = StoreOptions::new(StoreMode::Add, 0, Exptime::secs(self.opts.ttl.max(1)));
        let stored = self.mc.store(&self.key, token.as_bytes(), &opts).await?;
        Ok((stored.outcome == StoreOutcome::Stored).then(|| LockGuard {
            mc: self.mc.clone(),
            key: self.key.clone(),
            token,
            cas: stored.cas,
            released: false,
        }))
    }

    /// Acquires the lock, sleeping `step, 2·step, 3·step, …` (capped at `max_backoff`)
    /// between attempts, for at most `max_wait` in total; then [`Error::LockTimeout`].
    /// Needs a tokio runtime with the timer enabled.
    pub async fn lock(&self) -> Result<LockGuard<M>> {
        let mut waited = Duration::ZERO;
        let mut attempt: u32 = 1;
        loop {
            if let Some(guard) = self.try_lock().await? {
                return Ok(guard);
            }
            if waited >= self.opts.max_wait {
                return Err(Error::LockTimeout(self.name.clone()));
            }
            let nap = self
                .opts
                .backoff_step
                .saturating_mul(attempt)
                .min(self.opts.max_backoff)
                .min(self.opts.max_wait - waited)
                .max(Duration::from_millis(1));
            sleep(nap).await;
            waited += nap;
            attempt = attempt.saturating_add(1);
        }
    }

    /// Runs `f` while holding the lock ([`Lock::lock`] first), then unlocks — also when `f`
    /// fails. The lock may have expired while `f` ran (see the module docs); `f`'s writes
    /// should not rely on mutual exclusion for correctness.
    pub async fn with_lock<T, F, Fut>(&self, f: F) -> Result<T>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let guard = self.lock().await?;
        let out = f().await;
        let released = guard.unlock().await;
        let out = out?;
        released?;
        Ok(out)
    }

    /// Whether anyone holds the lock right now (a racy snapshot). One round trip.
    pub async fn is_locked(&self) -> Result<bool> {
        Ok(self.mc.get(&self.key).await?.is_some())
    }
}

/// Proof that we acquired a [`Lock`], carrying our owner token.
///
/// Release it with [`LockGuard::unlock`]; a guard dropped without it is released as the
/// module docs say (spawned inside a tokio runtime, else by the TTL).
#[derive(Debug)]
#[must_use = "dropping the guard releases the lock (best effort); call unlock().await"]
pub struct LockGuard<M: Memcache + Clone + 'static> {
    mc: M,
    key: Vec<u8>,
    token: String,
    cas: Cas,
    released: bool,
}

impl<M: Memcache + Clone + 'static> LockGuard<M> {
    /// Our owner token (the value stored under the lock key).
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Releases the lock if it is still ours. `true`: it was ours and is now free;
    /// `false`: it had already expired (and may now belong to someone else, whom we leave
    /// alone). One round trip, two when the item changed since we stored it.
    pub async fn unlock(mut self) -> Result<bool> {
        self.released = true;
        release(&self.mc, &self.key, &self.token, self.cas).await
    }

    /// Extends the lock to `ttl` seconds from now, only if it is still ours. `false` if it
    /// expired. Two round trips (`gets`, then `cas`).
    pub async fn extend(&mut self, ttl: u32) -> Result<bool> {
        let Some(item) = self.mc.get(&self.key).await? else {
            return Ok(false);
        };
        if item.value.as_ref() != self.token.as_bytes() {
            return Ok(false);
        }
        let opts = StoreOptions {
            cas: Some(item.cas),
            ..StoreOptions::new(StoreMode::Set, 0, Exptime::secs(ttl.max(1)))
        };
        let stored = self
            .mc
            .store(&self.key, self.token.as_bytes(), &opts)
            .await?;
        if stored.outcome == StoreOutcome::Stored {
            self.cas = stored.cas;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    /// Whether the lock key still holds our token. One round trip.
    pub async fn is_held(&self) -> Result<bool> {
        Ok(self
            .mc
            .get(&self.key)
            .await?
            .is_some_and(|i| i.value.as_ref() == self.token.as_bytes()))
    }

    /// Gives the guard up without unlocking: the lock frees itself when its TTL runs out.
    pub fn forget(mut self) {
        self.released = true;
    }
}

impl<M: Memcache + Clone + 'static> Drop for LockGuard<M> {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let mc = self.mc.clone();
            let key = std::mem::take(&mut self.key);
            let token = std::mem::take(&mut self.token);
            let cas = self.cas;
            handle.spawn(async move {
                let _ = release(&mc, &key, &token, cas).await;
            });
        }
    }
}

/// The owner-checked unlock: delete only the item that holds `token`.
async fn release<M: Memcache>(mc: &M, key: &[u8], token: &str, cas: Cas) -> Result<bool> {
    if cas != 0 {
        match mc.delete_cas(key, cas).await? {
            DeleteOutcome::Deleted => return Ok(true),
            DeleteOutcome::NotFound => return Ok(false),
            // Changed since our add: extended by us through a CAS-less backend, or someone
            // else's lock after ours expired. The token decides.
            DeleteOutcome::Exists => {}
        }
    }
    let Some(item) = mc.get(key).await? else {
        return Ok(false);
    };
    if item.value.as_ref() != token.as_bytes() {
        return Ok(false);
    }
    Ok(mc.delete_cas(key, item.cas).await? == DeleteOutcome::Deleted)
}
