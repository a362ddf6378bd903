//! The stored record: its JSON envelope, how a value becomes one (TTL jitter, soft expiry,
//! the hard TTL) and how a read is classified (fresh, stale, gone).

use memkit_types::{Exptime, Memcache, StoreMode, StoreOptions};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{Cache, FLAG_RECORD, Reason};
use crate::Result;
use crate::caching::policy::{Policy, Protection};

#[derive(Serialize)]
struct EnvelopeOut<'a, T> {
    pub(super) u: u64,
    pub(super) d: u64,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub(super) t: &'a [(String, u64)],
    pub(super) v: &'a T,
}

#[derive(Deserialize)]
pub(super) struct Envelope<T> {
    pub(super) u: u64,
    pub(super) d: u64,
    #[serde(default)]
    pub(super) t: Vec<(String, u64)>,
    pub(super) v: T,
}

pub(super) enum State<T> {
    Fresh(Envelope<T>),
    Stale(Envelope<T>),
    Gone(Reason),
}

impl<M: Memcache + Clone + 'static> Cache<M> {
    /// Reads `key` and classifies it (one get, plus one multi-get of its tags).
    pub(super) async fn lookup<T: DeserializeOwned>(
        &self,
        key: &str,
        policy: &Policy,
    ) -> Result<State<T>> {
        let Some(item) = self.read_item(key, policy).await? else {
            return Ok(State::Gone(Reason::Miss));
        };
        let Some(env) = decode::<T>(&item.value) else {
            return Ok(State::Gone(Reason::Miss));
        };
        if !self.tags_current(&env.t, policy).await? {
            return Ok(State::Gone(Reason::TagChanged));
        }
        if policy.protection != Protection::Lease && self.now_ms() >= env.u {
            return Ok(State::Stale(env));
        }
        Ok(State::Fresh(env))
    }

    /// The record for `value` and how to store it (sync: no reference to `value` is held
    /// across an await, so `T` need not be `Sync`).
    pub(super) fn record<T: Serialize>(
        &self,
        policy: &Policy,
        value: &T,
        versions: &[(String, u64)],
        delta: u64,
    ) -> Result<(Vec<u8>, StoreOptions)> {
        let factor = match policy.jitter {
            Some((lo, hi)) if hi > lo => lo + (hi - lo) * self.random(),
            Some((lo, _)) => lo,
            None => 1.0,
        };
        let ttl_ms = ((policy.ttl.as_millis() as f64) * factor).max(1.0) as u64;
        let hard_ms = match policy.protection {
            Protection::Lock => ttl_ms.saturating_add(policy.grace_ms()),
            Protection::None | Protection::Lease => ttl_ms,
        };
        let hard_secs = hard_ms.div_ceil(1000).clamp(1, u64::from(u32::MAX)) as u32;
        let bytes = serde_json::to_vec(&EnvelopeOut {
            u: self.now_ms().saturating_add(ttl_ms),
            d: delta,
            t: versions,
            v: value,
        })?;
        let opts = StoreOptions::new(StoreMode::Set, FLAG_RECORD, Exptime::secs(hard_secs));
        Ok((bytes, opts))
    }
}

pub(super) fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Option<Envelope<T>> {
    if bytes.is_empty() {
        return None;
    }
    match serde_json::from_slice(bytes) {
        Ok(env) => Some(env),
        Err(e) => {
            tracing::debug!(target: "memkit::cache", error = %e, "undecodable cache record: a miss");
            None
        }
    }
}
