//! The soft-expiry paths, [`Protection::None`] and [`Protection::Lock`]: XFetch, the rebuild
//! lock (seed 003), and waiting for someone else's rebuild with back-off.

use std::future::Future;
use std::time::Duration;

use memkit_types::Memcache;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::record::{Envelope, State};
use super::{Cache, CacheStats, Fetched, LoadContext, Reason, Source, Unavailable};
use crate::caching::policy::{OnBusy, OnTimeout, Policy, Protection, WaitOptions};
use crate::caching::trace::Letter;
use crate::structures::sleep;
use crate::{Error, Lock, LockOptions, Result};

impl<M: Memcache + Clone + 'static> Cache<M> {
    pub(super) async fn fetch_soft<T, F, Fut, E>(
        &self,
        key: &str,
        policy: &Policy,
        loader: F,
    ) -> std::result::Result<Result<Fetched<T>>, Unavailable<F>>
    where
        T: Serialize + DeserializeOwned + Send,
        F: FnOnce(LoadContext) -> Fut + Send,
        Fut: Future<Output = std::result::Result<T, E>> + Send,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let first = match self.lookup::<T>(key, policy).await {
            Ok(s) => s,
            Err(Error::Store(e)) if e.is_unavailable() => return Err(Unavailable(loader)),
            Err(e) => return Ok(Err(e)),
        };
        Ok(self.soft_after(key, policy, first, loader).await)
    }

    async fn soft_after<T, F, Fut, E>(
        &self,
        key: &str,
        policy: &Policy,
        first: State<T>,
        loader: F,
    ) -> Result<Fetched<T>>
    where
        T: Serialize + DeserializeOwned + Send,
        F: FnOnce(LoadContext) -> Fut + Send,
        Fut: Future<Output = std::result::Result<T, E>> + Send,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let st = &self.inner.stats;
        let (stale, reason) = match first {
            State::Fresh(env) => {
                if !self.xfetch_early(&env, policy) {
                    CacheStats::bump(&st.hits);
                    self.trace(key, Letter::Hit);
                    return Ok(Fetched {
                        value: env.v,
                        source: Source::Hit,
                    });
                }
                CacheStats::bump(&st.early_recomputes);
                if policy.protection == Protection::None {
                    return self.load(key, policy, Reason::Early, loader).await;
                }
                // Early recompute under the lock; whoever loses keeps the still-fresh value.
                CacheStats::bump(&st.lock_attempts);
                self.trace(key, Letter::Lock);
                let lock = self.lock_for(key, policy);
                return match lock.try_lock().await? {
                    Some(guard) => {
                        let out = self.load(key, policy, Reason::Early, loader).await;
                        let _ = guard.unlock().await;
                        self.trace(key, Letter::Unlock);
                        out
                    }
                    None => {
                        CacheStats::bump(&st.hits);
                        self.trace(key, Letter::Hit);
                        Ok(Fetched {
                            value: env.v,
                            source: Source::Hit,
                        })
                    }
                };
            }
            State::Stale(env) => (Some(env), Reason::Expired),
            State::Gone(r) => (None, r),
        };
        CacheStats::bump(&st.misses);
        self.trace(key, Letter::Miss);
        if policy.protection == Protection::None {
            return self.load(key, policy, reason, loader).await;
        }
        self.rebuild_locked(key, policy, stale, reason, loader)
            .await
    }

    /// Seed 003's algorithm: try the rebuild lock; the winner double-checks and rebuilds;
    /// the others serve stale or poll with back-off until the value is fresh, the lock is
    /// free again, or the wait budget is spent.
    async fn rebuild_locked<T, F, Fut, E>(
        &self,
        key: &str,
        policy: &Policy,
        mut stale: Option<Envelope<T>>,
        mut reason: Reason,
        loader: F,
    ) -> Result<Fetched<T>>
    where
        T: Serialize + DeserializeOwned + Send,
        F: FnOnce(LoadContext) -> Fut + Send,
        Fut: Future<Output = std::result::Result<T, E>> + Send,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let st = &self.inner.stats;
        let lock = self.lock_for(key, policy);
        let w = &policy.wait;
        let mut waited = Duration::ZERO;
        let mut attempt: u32 = 1;
        loop {
            CacheStats::bump(&st.lock_attempts);
            self.trace(key, Letter::Lock);
            if let Some(guard) = lock.try_lock().await? {
                // Double-check: the previous holder may have written between our read and
                // our lock; then its value is ours and the loader does not run again.
                if let State::Fresh(env) = self.lookup::<T>(key, policy).await? {
                    let _ = guard.unlock().await;
                    self.trace(key, Letter::Unlock);
                    CacheStats::bump(&st.waited_hits);
                    self.trace(key, Letter::Hit);
                    return Ok(Fetched {
                        value: env.v,
                        source: Source::Waited,
                    });
                }
                let out = self.load(key, policy, reason, loader).await;
                let _ = guard.unlock().await;
                self.trace(key, Letter::Unlock);
                return out;
            }
            if policy.on_busy == OnBusy::ServeStale
                && let Some(env) = stale
            {
                return Ok(self.serve_stale(key, env));
            }
            if waited >= w.max_wait
                && let Some(env) = stale
            {
                return Ok(self.serve_stale(key, env));
            }
            if waited >= w.budget() {
                if w.on_timeout == OnTimeout::Compute {
                    return self.load(key, policy, reason, loader).await;
                }
                return Err(Error::LockTimeout(key.to_owned()));
            }
            let nap = nap_after(w, attempt, waited);
            CacheStats::bump(&st.polls);
            sleep(nap).await;
            waited += nap;
            attempt = attempt.saturating_add(1);
            match self.lookup::<T>(key, policy).await? {
                State::Fresh(env) => {
                    CacheStats::bump(&st.waited_hits);
                    self.trace(key, Letter::Hit);
                    return Ok(Fetched {
                        value: env.v,
                        source: Source::Waited,
                    });
                }
                State::Stale(env) => stale = Some(env),
                State::Gone(r) => {
                    if r == Reason::TagChanged {
                        stale = None;
                    }
                    reason = r;
                }
            }
        }
    }

    pub(super) fn lock_for(&self, key: &str, policy: &Policy) -> Lock<M> {
        Lock::with_options(
            self.inner.mc.clone(),
            key,
            LockOptions::ttl_secs(policy.wait.lock_ttl),
        )
    }

    pub(super) fn serve_stale<T>(&self, key: &str, env: Envelope<T>) -> Fetched<T> {
        CacheStats::bump(&self.inner.stats.stale_served);
        self.trace(key, Letter::Stale);
        Fetched {
            value: env.v,
            source: Source::Stale,
        }
    }

    /// XFetch: `now - delta * beta * ln(rand) >= expiry`, rand uniform in (0, 1].
    fn xfetch_early<T>(&self, env: &Envelope<T>, policy: &Policy) -> bool {
        let Some(beta) = policy.xfetch_beta else {
            return false;
        };
        let r = 1.0 - self.random(); // (0, 1]
        let gap = (env.d as f64) * beta * -r.ln();
        (self.now_ms() as f64) + gap >= env.u as f64
    }
}

/// The `attempt`-th back-off: linear, capped, and ending when the wait budget does (at
/// `max_wait` first, where a stale value is served).
pub(super) fn nap_after(w: &WaitOptions, attempt: u32, waited: Duration) -> Duration {
    let until = if waited < w.max_wait {
        w.max_wait
    } else {
        w.budget()
    };
    w.backoff_step
        .saturating_mul(attempt)
        .min(w.max_backoff)
        .min(until.saturating_sub(waited))
        .max(Duration::from_millis(1))
}
