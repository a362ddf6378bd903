//! Running the loader: the tag versions a new value records and whether the loader must
//! read the master (decided from the first read of the tags), the loader itself, and the
//! store of its value.

use std::future::Future;

use memkit_types::{Cas, Memcache, StoreOptions};
use serde::Serialize;

use super::{Cache, CacheStats, Fetched, LoadContext, Reason, Source};
use crate::caching::policy::Policy;
use crate::caching::tags::must_read_master_at;
use crate::caching::trace::Letter;
use crate::{Error, Result};

impl<M: Memcache + Clone + 'static> Cache<M> {
    /// Whether the value's recorded tags are the policy's tags at their current versions.
    pub(super) async fn tags_current(
        &self,
        stored: &[(String, u64)],
        policy: &Policy,
    ) -> Result<bool> {
        if stored.len() != policy.tags.len()
            || stored.iter().zip(&policy.tags).any(|((n, _), p)| n != p)
        {
            return Ok(false);
        }
        self.inner.tags.still_valid(stored).await
    }

    pub(super) async fn tag_versions(&self, policy: &Policy) -> Result<Vec<(String, u64)>> {
        Ok(self.tag_versions_and_master(policy).await?.0)
    }

    /// The versions a new value records, and whether its loader must read the master. The
    /// master decision is taken from the first read: a tag missing there (evicted, or its
    /// server restarted after an invalidation) cannot say when it last changed, so the
    /// loader reads the master; once re-created it would look like a tag first used now.
    async fn tag_versions_and_master(&self, policy: &Policy) -> Result<(Vec<(String, u64)>, bool)> {
        if policy.tags.is_empty() {
            return Ok((Vec::new(), false));
        }
        let tags = &self.inner.tags;
        let first = tags.versions(&policy.tags).await?;
        let read_master = policy
            .replica_lag
            .is_some_and(|lag| must_read_master_at(&first, self.now_ms(), lag));
        let v = tags.create_missing(&policy.tags, first).await?;
        let versions = policy
            .tags
            .iter()
            .cloned()
            .zip(v.into_iter().map(|v| v.version))
            .collect();
        Ok((versions, read_master))
    }

    pub(super) async fn run_loader<T, F, Fut, E>(
        &self,
        key: &str,
        loader: F,
        ctx: LoadContext,
    ) -> Result<(T, u64)>
    where
        F: FnOnce(LoadContext) -> Fut,
        Fut: Future<Output = std::result::Result<T, E>>,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        CacheStats::bump(&self.inner.stats.loads);
        let start = self.now_ms();
        match loader(ctx).await {
            Ok(v) => Ok((v, self.now_ms().saturating_sub(start))),
            Err(e) => {
                CacheStats::bump(&self.inner.stats.load_errors);
                self.trace(key, Letter::Error);
                Err(Error::Source(e.into()))
            }
        }
    }

    /// Reads the tag versions (before the loader: an invalidation during the load must win),
    /// runs the loader, stores the record. A failed store still returns the value.
    pub(crate) async fn load<T, F, Fut, E>(
        &self,
        key: &str,
        policy: &Policy,
        reason: Reason,
        loader: F,
    ) -> Result<Fetched<T>>
    where
        T: Serialize,
        F: FnOnce(LoadContext) -> Fut,
        Fut: Future<Output = std::result::Result<T, E>>,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        self.load_over(key, policy, reason, None, loader).await
    }

    /// [`load`](Self::load), storing with `cas` when given: the CAS of the item a lease was
    /// won on. An invalidation or another write during the load changes that CAS, and then
    /// the value, read from before it, is not stored. `W` is traced only when a copy was
    /// stored.
    pub(super) async fn load_over<T, F, Fut, E>(
        &self,
        key: &str,
        policy: &Policy,
        reason: Reason,
        cas: Option<Cas>,
        loader: F,
    ) -> Result<Fetched<T>>
    where
        T: Serialize,
        F: FnOnce(LoadContext) -> Fut,
        Fut: Future<Output = std::result::Result<T, E>>,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let (versions, read_master) = self.tag_versions_and_master(policy).await?;
        let ctx = LoadContext {
            key: key.to_owned(),
            reason,
            read_master,
        };
        let (value, delta) = self.run_loader(key, loader, ctx).await?;
        let stored = match (
            self.record(policy, &value, &versions, delta),
            self.item_keys(key, policy),
        ) {
            (Ok((bytes, opts)), Ok(keys)) => {
                let opts = StoreOptions { cas, ..opts };
                self.write_copies(&keys, &bytes, &opts).await
            }
            (Err(e), _) | (_, Err(e)) => Err(e),
        };
        match stored {
            Ok(true) => self.trace(key, Letter::Write),
            Ok(false) => {
                tracing::debug!(target: "memkit::cache", key, "the item changed during the load (invalidated or rewritten): the rebuilt value is not stored");
            }
            Err(e) => {
                tracing::warn!(target: "memkit::cache", key, error = %e, "storing the rebuilt value failed");
            }
        }
        Ok(Fetched {
            value,
            source: Source::Computed,
        })
    }
}
