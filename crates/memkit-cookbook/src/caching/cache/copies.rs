//! Where a value lives: its item keys (the key itself, or its copies `<key>#<i>`), reading
//! one copy and falling back to the others, writing every copy.

use memkit_types::{GetOptions, Item, Memcache, StoreOptions, validate_key};
use rand::Rng;

use super::Cache;
use crate::Result;
use crate::caching::policy::{Copies, Policy};

impl<M: Memcache + Clone + 'static> Cache<M> {
    /// The item holding `key`'s value. With copies: one copy (copy 0 for replicas, a random
    /// one for hot keys), and only when it is missing or its server unavailable, the others
    /// in one multi-get, the first present in copy order winning. Unavailable only when
    /// every copy was.
    pub(super) async fn read_item(&self, key: &str, policy: &Policy) -> Result<Option<Item>> {
        let keys = item_keys(key, policy)?;
        let n = keys.len();
        if n == 1 {
            return Ok(self.inner.mc.get(keys[0].as_bytes()).await?);
        }
        let first = match policy.copies {
            Copies::Hot(_) => self
                .inner
                .rng
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .random_range(0..n),
            _ => 0,
        };
        let down = match self.inner.mc.get(keys[first].as_bytes()).await {
            Ok(Some(item)) => return Ok(Some(item)),
            Ok(None) => None,
            Err(e) if e.is_unavailable() => Some(e),
            Err(e) => return Err(e.into()),
        };
        let rest: Vec<&[u8]> = (1..n).map(|d| keys[(first + d) % n].as_bytes()).collect();
        match self.inner.mc.get_multi(&rest, &GetOptions::default()).await {
            Ok(items) => Ok(items.into_iter().flatten().next()),
            Err(e) if e.is_unavailable() => match down {
                Some(d) => Err(d.into()),
                None => Ok(None),
            },
            Err(e) => Err(e.into()),
        }
    }

    /// Stores one record under every item key. Succeeds when one copy was stored (the
    /// others are logged); fails with the first error when none was.
    pub(super) async fn write_copies(
        &self,
        keys: &[String],
        bytes: &[u8],
        opts: &StoreOptions,
    ) -> Result<()> {
        let mut stored = false;
        let mut first_err = None;
        for k in keys {
            match self.inner.mc.store(k.as_bytes(), bytes, opts).await {
                Ok(_) => stored = true,
                Err(e) => {
                    tracing::debug!(target: "memkit::cache", key = %k, error = %e, "storing a copy failed");
                    first_err.get_or_insert(e);
                }
            }
        }
        match first_err {
            Some(e) if !stored => Err(e.into()),
            _ => Ok(()),
        }
    }
}

/// The memcached keys of `key`'s value under `policy`, each checked to be a valid key.
pub(super) fn item_keys(key: &str, policy: &Policy) -> Result<Vec<String>> {
    let keys = policy.item_keys(key);
    if keys.len() > 1 {
        for k in &keys {
            validate_key(k.as_bytes())?;
        }
    }
    Ok(keys)
}
