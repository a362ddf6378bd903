//! The lease path, [`Protection::Lease`]: `mg <key> N<ttl> R<window>` hands one caller
//! the win flag; the others wait for its value or are served the stale one.

use std::future::Future;
use std::time::Duration;

use memkit_types::{DeleteOptions, Exptime, GetOptions, Item, Memcache};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::record::decode;
use super::soft::nap_after;
use super::{Cache, CacheStats, Fetched, LoadContext, Reason, Source, Unavailable};
use crate::caching::policy::{OnBusy, OnTimeout, Policy};
use crate::caching::trace::Letter;
use crate::structures::sleep;
use crate::{Error, Result};

impl<M: Memcache + Clone + 'static> Cache<M> {
    pub(super) async fn fetch_lease<T, F, Fut, E>(
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
        let st = &self.inner.stats;
        let w = &policy.wait;
        let opts = GetOptions {
            vivify: Some(Exptime::secs(w.lock_ttl.max(1))),
            recache_below: policy.recache_secs(policy.ttl.as_millis() as u64),
            ..Default::default()
        };
        let mut waited = Duration::ZERO;
        let mut attempt: u32 = 1;
        let mut missed = false;
        loop {
            let item = match self.inner.mc.get_with(key.as_bytes(), &opts).await {
                Ok(i) => i,
                Err(e) if e.is_unavailable() && attempt == 1 => return Err(Unavailable(loader)),
                Err(e) => return Ok(Err(e.into())),
            };
            let Some(item) = item else {
                // A backend that ignored N: plain cache-aside.
                CacheStats::bump(&st.misses);
                self.trace(key, Letter::Miss);
                return Ok(self.load(key, policy, Reason::Miss, loader).await);
            };
            let env = decode::<T>(&item.value);
            let tags_ok = match &env {
                Some(e) => match self.tags_current(&e.t, policy).await {
                    Ok(ok) => ok,
                    Err(e) => return Ok(Err(e)),
                },
                None => false,
            };
            if item.win {
                let reason = match (&env, tags_ok, item.stale) {
                    (None, _, _) => Reason::Miss,
                    (Some(_), false, _) => Reason::TagChanged,
                    (Some(_), true, true) => Reason::Expired,
                    (Some(_), true, false) => Reason::Early,
                };
                return Ok(self
                    .lease_won(key, policy, &item, reason, missed, loader)
                    .await);
            }
            let env = match env {
                Some(env) if tags_ok && !item.stale => {
                    let source = if missed {
                        CacheStats::bump(&st.waited_hits);
                        Source::Waited
                    } else {
                        CacheStats::bump(&st.hits);
                        Source::Hit
                    };
                    self.trace(key, Letter::Hit);
                    return Ok(Ok(Fetched {
                        value: env.v,
                        source,
                    }));
                }
                other => other,
            };
            if !missed {
                missed = true;
                CacheStats::bump(&st.misses);
                self.trace(key, Letter::Miss);
            }
            let servable = if tags_ok { env } else { None };
            if env_is_some_and_not_taken(&item, tags_ok) {
                // A tag made the value invalid but nobody was told: mark it stale, so the
                // next `mg` hands exactly one caller the win.
                let o = DeleteOptions {
                    invalidate: true,
                    ..Default::default()
                };
                if let Err(e) = self.inner.mc.delete_with(key.as_bytes(), &o).await {
                    return Ok(Err(e.into()));
                }
                attempt = attempt.saturating_add(1);
                if attempt < 8 {
                    continue;
                }
            }
            CacheStats::bump(&st.lock_attempts);
            self.trace(key, Letter::Lock);
            if policy.on_busy == OnBusy::ServeStale
                && let Some(env) = servable
            {
                return Ok(Ok(self.serve_stale(key, env)));
            }
            if waited >= w.max_wait
                && let Some(env) = servable
            {
                return Ok(Ok(self.serve_stale(key, env)));
            }
            if waited >= w.budget() {
                if w.on_timeout == OnTimeout::Compute {
                    return Ok(self.load(key, policy, Reason::Miss, loader).await);
                }
                return Ok(Err(Error::LockTimeout(key.to_owned())));
            }
            let nap = nap_after(w, attempt, waited);
            CacheStats::bump(&st.polls);
            sleep(nap).await;
            waited += nap;
            attempt = attempt.saturating_add(1);
        }
    }

    /// This caller holds the win (`W`): it loads and stores the value, which releases the
    /// lease. It stores with the CAS of the item it won on (the placeholder, or the stale or
    /// recache-window value): an invalidation during the load (`md I`, a delete) or another
    /// write changes that CAS, so the value the loader read before it is not stored over it,
    /// and the next reader recomputes. When the loader fails it gives the win back: it drops
    /// its placeholder, or re-marks the stale value so that the next reader wins. A win from
    /// the recache window is not given back: the value is still fresh, and marking it stale
    /// would serve it as stale and send the next reader to the source; the next recompute
    /// is handed out when the value expires.
    async fn lease_won<T, F, Fut, E>(
        &self,
        key: &str,
        policy: &Policy,
        item: &Item,
        reason: Reason,
        missed: bool,
        loader: F,
    ) -> Result<Fetched<T>>
    where
        T: Serialize + DeserializeOwned + Send,
        F: FnOnce(LoadContext) -> Fut + Send,
        Fut: Future<Output = std::result::Result<T, E>> + Send,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let st = &self.inner.stats;
        if reason == Reason::Early {
            CacheStats::bump(&st.early_recomputes);
        } else if !missed {
            CacheStats::bump(&st.misses);
            self.trace(key, Letter::Miss);
        }
        CacheStats::bump(&st.lock_attempts);
        self.trace(key, Letter::Lock);
        let out = self
            .load_over(key, policy, reason, Some(item.cas), loader)
            .await;
        if out.is_err() && reason != Reason::Early {
            let _ = if item.value.is_empty() {
                self.inner
                    .mc
                    .delete_cas(key.as_bytes(), item.cas)
                    .await
                    .map(|_| ())
            } else {
                let o = DeleteOptions {
                    invalidate: true,
                    ..Default::default()
                };
                self.inner
                    .mc
                    .delete_with(key.as_bytes(), &o)
                    .await
                    .map(|_| ())
            };
        }
        // The store of the new value released the lease.
        self.trace(key, Letter::Unlock);
        out
    }
}

fn env_is_some_and_not_taken(item: &Item, tags_ok: bool) -> bool {
    !item.value.is_empty() && !tags_ok && !item.win_taken && !item.stale
}
