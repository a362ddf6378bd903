//! Where a value lives: its item keys (the key itself, or its copies `<key>#<j>`, spread
//! over distinct servers when the cache or the backend knows the placement), reading one copy and
//! falling back to the others, writing every copy.

use std::collections::HashMap;

use memkit_types::{GetOptions, Item, Memcache, StoreOptions, StoreOutcome, validate_key};
use rand::Rng;

use super::Cache;
use crate::Result;
use crate::caching::policy::{Copies, Policy, copy_key};

impl<M: Memcache + Clone + 'static> Cache<M> {
    /// The item holding `key`'s value. With copies: one copy (copy 0 for replicas, a random
    /// one for hot keys), and only when it is missing or its server unavailable, the others
    /// in one multi-get, the first present in copy order winning. Unavailable only when
    /// every copy was.
    pub(super) async fn read_item(&self, key: &str, policy: &Policy) -> Result<Option<Item>> {
        let keys = self.item_keys(key, policy)?;
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

    /// Stores one record under every item key: `true` when a copy was stored (the failures
    /// of the others are logged), `false` when none was and none failed (a CAS store whose
    /// item changed); fails with the first error when none was stored.
    pub(super) async fn write_copies(
        &self,
        keys: &[String],
        bytes: &[u8],
        opts: &StoreOptions,
    ) -> Result<bool> {
        let mut stored = false;
        let mut first_err = None;
        for k in keys {
            match self.inner.mc.store(k.as_bytes(), bytes, opts).await {
                Ok(st) => stored |= st.outcome == StoreOutcome::Stored,
                Err(e) => {
                    tracing::debug!(target: "memkit::cache", key = %k, error = %e, "storing a copy failed");
                    first_err.get_or_insert(e);
                }
            }
        }
        match first_err {
            Some(e) if !stored => Err(e.into()),
            _ => Ok(stored),
        }
    }
}

/// Candidate copy names tried per copy when spreading copies over servers: with 3 equally
/// weighted servers the third distinct one is missed by 48 candidates with probability
/// (2/3)^46, about 1e-8. Suffixes stay below `#512` (`MAX_COPIES` x 16).
const CANDIDATES_PER_COPY: usize = 16;

/// `n` copy names of `key` spread over the servers `server_of` places them on: copy 0 is
/// `<key>#0`; level by level, the first candidates `<key>#<j>` whose server holds the fewest
/// copies so far, so that copies sit on distinct servers while there are servers left, and
/// then evenly. `None` when `server_of` does not know a candidate's server.
fn spread_copies(
    key: &str,
    n: usize,
    server_of: &dyn Fn(&[u8]) -> Option<usize>,
) -> Option<Vec<String>> {
    let budget = n.max(1) * CANDIDATES_PER_COPY;
    let mut servers: Vec<usize> = Vec::new(); // of candidates 0..servers.len()
    let mut taken = vec![false; budget];
    let mut held: HashMap<usize, usize> = HashMap::new();
    let mut names = Vec::with_capacity(n);
    for level in 0..n {
        for (j, taken) in taken.iter_mut().enumerate() {
            if names.len() == n {
                return Some(names);
            }
            if *taken {
                continue;
            }
            if j == servers.len() {
                servers.push(server_of(copy_key(key, j).as_bytes())?);
            }
            let count = held.entry(servers[j]).or_insert(0);
            if *count == level {
                *count += 1;
                *taken = true;
                names.push(copy_key(key, j));
            }
        }
    }
    // Unreachable in practice (each level takes a candidate of a least-loaded server); kept
    // so that the answer always has `n` names.
    let rest = (0..budget).filter(|&j| !taken[j]).map(|j| copy_key(key, j));
    names.extend(rest.take(n - names.len()));
    Some(names)
}

impl<M: Memcache + Clone + 'static> Cache<M> {
    /// The memcached keys holding `key`'s value under `policy`: `key` itself, or its copies,
    /// spread over distinct servers as [`CacheBuilder::placement`](super::CacheBuilder::placement)
    /// says or, without one, as the backend's [`Memcache::home_server`] does (a
    /// `memkit_client::Cluster` knows; a single store does not, and then the names are
    /// [`Policy::item_keys`]). Fails when a copy name is not a valid key (longer
    /// than 250 bytes).
    pub fn item_keys(&self, key: &str, policy: &Policy) -> Result<Vec<String>> {
        let n = policy.copies.count();
        if n == 1 {
            return Ok(vec![key.to_owned()]);
        }
        let mc = &self.inner.mc;
        let spread = match &self.inner.placement {
            Some(server_of) => spread_copies(key, n, server_of.as_ref()),
            None => spread_copies(key, n, &|k| mc.home_server(k)),
        };
        let keys = spread.unwrap_or_else(|| policy.item_keys(key));
        for k in &keys {
            validate_key(k.as_bytes())?;
        }
        Ok(keys)
    }
}
