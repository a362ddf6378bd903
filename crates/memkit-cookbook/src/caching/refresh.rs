//! Keeping the cache hot (seed 004, "Вынос обновлений в фон", "Борьба с холодным кешем"):
//! background refresh of registered keys before they expire, and warm-up of a cold cache
//! from a list of keys.
//!
//! - [`Cache::register`] remembers a key with its policy and loader;
//!   [`Cache::refresh_registered`] rebuilds every registered key that is missing or expires
//!   within `ahead`, each under its rebuild lock (so N processes running the refresher do
//!   the work once); [`Cache::spawn_refresher`] runs that every `period` on tokio. User
//!   requests then find fresh values and never wait for a rebuild.
//! - [`Cache::warm_up`] loads a list of keys with bounded concurrency through the normal
//!   [`Cache::fetch`] path (so it is protected like user traffic), e.g. after a restart and
//!   before the load balancer sends traffic. Combine it with TTL jitter, so the keys warmed
//!   together do not all expire together.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use memkit_types::Memcache;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::cache::{Cache, LoadContext, RefreshFn, Source};
use super::policy::Policy;
use crate::Result;

/// What [`Cache::refresh_registered`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RefreshReport {
    /// Keys rebuilt by this call.
    pub refreshed: usize,
    /// Keys still fresh, or being rebuilt by someone else.
    pub skipped: usize,
    /// Keys whose refresh failed, with the error.
    pub failed: Vec<(String, String)>,
}

/// What [`Cache::warm_up`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WarmUpReport {
    /// Keys that were already cached.
    pub present: usize,
    /// Keys loaded by this warm-up.
    pub loaded: usize,
    /// Keys whose load failed, with the error.
    pub failed: Vec<(String, String)>,
}

impl<M: Memcache + Clone + 'static> Cache<M> {
    /// Registers `key` for background refresh with its policy and loader (replacing an
    /// earlier registration of the same key).
    pub fn register<T, F, Fut, E>(&self, key: &str, policy: Policy, loader: F)
    where
        T: Serialize + DeserializeOwned + Send + 'static,
        F: Fn(LoadContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<T, E>> + Send + 'static,
        E: Into<Box<dyn std::error::Error + Send + Sync>> + 'static,
    {
        let loader = Arc::new(loader);
        let policy = Arc::new(policy);
        let k = key.to_owned();
        let job: RefreshFn<M> = Arc::new(move |cache: Cache<M>, ahead: Duration| {
            let (loader, policy, k) = (loader.clone(), policy.clone(), k.clone());
            Box::pin(async move {
                cache
                    .refresh_if_due::<T, _, _, E>(&k, &policy, ahead, move |ctx| loader(ctx))
                    .await
            })
        });
        self.refreshers()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.to_owned(), job);
    }

    /// Stops refreshing `key`.
    pub fn unregister(&self, key: &str) -> bool {
        self.refreshers()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key)
            .is_some()
    }

    /// The registered keys, sorted.
    pub fn registered(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .refreshers()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect();
        v.sort();
        v
    }

    /// One pass over the registered keys: rebuilds those missing or expiring within `ahead`.
    pub async fn refresh_registered(&self, ahead: Duration) -> RefreshReport {
        let mut jobs: Vec<(String, RefreshFn<M>)> = self
            .refreshers()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(k, j)| (k.clone(), j.clone()))
            .collect();
        jobs.sort_by(|a, b| a.0.cmp(&b.0));
        let mut report = RefreshReport::default();
        for (key, job) in jobs {
            match job(self.clone(), ahead).await {
                Ok(true) => report.refreshed += 1,
                Ok(false) => report.skipped += 1,
                Err(e) => report.failed.push((key, e.to_string())),
            }
        }
        report
    }

    /// Runs [`Cache::refresh_registered`] every `period` on the current tokio runtime until
    /// the handle is aborted.
    pub fn spawn_refresher(&self, period: Duration, ahead: Duration) -> tokio::task::JoinHandle<()>
    where
        M: Send + Sync,
    {
        let cache = self.clone();
        tokio::spawn(async move {
            loop {
                let report = cache.refresh_registered(ahead).await;
                for (key, err) in &report.failed {
                    tracing::warn!(target: "memkit::cache", key, error = %err, "background refresh failed");
                }
                tokio::time::sleep(period.max(Duration::from_millis(1))).await;
            }
        })
    }

    /// Loads `keys` that are not cached, `concurrency` at a time, through [`Cache::fetch`]
    /// with `policy`. `loader` gets the key and the load context.
    pub async fn warm_up<T, F, Fut, E>(
        &self,
        keys: Vec<String>,
        policy: &Policy,
        concurrency: usize,
        loader: F,
    ) -> Result<WarmUpReport>
    where
        M: Send + Sync,
        T: Serialize + DeserializeOwned + Send + 'static,
        F: Fn(String, LoadContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<T, E>> + Send + 'static,
        E: Into<Box<dyn std::error::Error + Send + Sync>> + 'static,
    {
        let queue = Arc::new(Mutex::new(VecDeque::from(keys)));
        let report = Arc::new(Mutex::new(WarmUpReport::default()));
        let loader = Arc::new(loader);
        let policy = Arc::new(policy.clone());
        let mut workers = Vec::new();
        for _ in 0..concurrency.max(1) {
            let (queue, report, loader, policy, cache) = (
                queue.clone(),
                report.clone(),
                loader.clone(),
                policy.clone(),
                self.clone(),
            );
            workers.push(tokio::spawn(async move {
                loop {
                    let next = queue.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
                    let Some(key) = next else { break };
                    let l = loader.clone();
                    let k2 = key.clone();
                    let out = cache
                        .fetch::<T, _, _, E>(&key, &policy, move |ctx| l(k2, ctx))
                        .await;
                    let mut r = report.lock().unwrap_or_else(|e| e.into_inner());
                    match out {
                        Ok(f) if f.source == Source::Computed => r.loaded += 1,
                        Ok(_) => r.present += 1,
                        Err(e) => r.failed.push((key, e.to_string())),
                    }
                }
            }));
        }
        for w in workers {
            w.await
                .map_err(|e| crate::Error::Invalid(format!("warm-up worker: {e}")))?;
        }
        let mut r = std::mem::take(&mut *report.lock().unwrap_or_else(|e| e.into_inner()));
        r.failed.sort();
        Ok(r)
    }
}
