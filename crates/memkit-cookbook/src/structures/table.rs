//! The table (a set of strings) and the hash (seed 000/002 "Таблица").
//!
//! See `docs/cookbook/table.md`.
//!
//! memcached is one big hash table without a "list keys" command, so a [`Hash`](struct@Hash) keeps two
//! things: one key per element, `hash:<name>:v:<element>` holding `[element, value]` — the
//! membership test and lookup are one `get` — and a key-list key `hash:<name>:keys` holding
//! every element (the read-mostly [`Array`] technique). The element key is the truth and the
//! list its index. Writers take the lock `hash:<name>` so that they rarely interleave, change
//! the element key, and then *reconcile* the list with it: `gets` the list, read the element,
//! `cas` the list. Writers whose lock expired (a pause longer than its TTL) may interleave
//! anywhere, but the last reconciliation of an element reads its last change, so once the
//! writers are done the list and the element keys agree. Readers never wait; while writers
//! race, a reader may see an element listed but absent, or present but not yet listed.
//! A [`Set`] (the seed's table) is a hash without values.
//!
//! An element that is not key-safe (spaces, control bytes, `~`, over 100 bytes) is keyed by
//! a 128-bit hash; the element itself is stored in the value and compared on read.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! use memkit_cookbook::{Hash, Set};
//! use memkit_engine::Embedded;
//!
//! let mc = Embedded::with_defaults();
//! let banned = Set::new(mc.clone(), "banned");
//! banned.add("spammer").await?;
//! assert!(banned.contains("spammer").await?);
//! assert_eq!(banned.members().await?, vec!["spammer".to_string()]);
//!
//! let ages: Hash<_, u32> = Hash::new(mc, "ages");
//! ages.insert("ann", &31).await?;
//! assert_eq!(ages.get("ann").await?, Some(31));
//! assert_eq!(ages.remove("ann").await?, true);
//! assert_eq!(ages.get("ann").await?, None);
//! # Ok::<(), memkit_cookbook::Error>(()) }).unwrap();
//! ```

use std::marker::PhantomData;

use memkit_types::{Exptime, Memcache, StoreOutcome};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::array::Array;
use super::lock::{Lock, LockOptions};
use crate::Result;
use crate::codec::{decode, encode, key_part};

/// A distributed hash: fast lookups by element key, plus the list of elements.
#[derive(Debug)]
pub struct Hash<M: Memcache + Clone + 'static, V> {
    mc: M,
    name: String,
    list: Array<M, String>,
    lock: Lock<M>,
    _v: PhantomData<fn() -> V>,
}

impl<M: Memcache + Clone + 'static, V: Serialize + DeserializeOwned> Hash<M, V> {
    /// The hash `name`, with the default lock options.
    pub fn new(mc: M, name: &str) -> Self {
        Self::with_lock_options(mc, name, LockOptions::default())
    }

    /// The hash `name`, its writers' lock built with `opts`.
    pub fn with_lock_options(mc: M, name: &str, opts: LockOptions) -> Self {
        Hash {
            list: Array::new(mc.clone(), &format!("hash:{name}:keys")),
            lock: Lock::with_options(mc.clone(), &format!("hash:{name}"), opts),
            mc,
            name: name.to_owned(),
            _v: PhantomData,
        }
    }

    /// The key holding element `k`.
    pub fn element_key(&self, k: &str) -> Vec<u8> {
        format!("hash:{}:v:{}", self.name, key_part(k.as_bytes())).into_bytes()
    }

    /// The value of `k`. One round trip.
    pub async fn get(&self, k: &str) -> Result<Option<V>> {
        let Some(bytes) = self.mc.get_value(&self.element_key(k)).await? else {
            return Ok(None);
        };
        let (stored, v): (String, V) = decode(&bytes)?;
        Ok((stored == k).then_some(v))
    }

    /// Whether `k` is present. One round trip.
    pub async fn contains(&self, k: &str) -> Result<bool> {
        Ok(self.get(k).await?.is_some())
    }

    /// Every element, in insertion order (empty when the list key is gone). One round trip.
    pub async fn keys(&self) -> Result<Vec<String>> {
        self.list.fetch().await
    }

    /// Every element with its value; elements whose key was evicted are left out. Two round
    /// trips (the list, then one multi-get).
    pub async fn entries(&self) -> Result<Vec<(String, V)>> {
        let keys = self.keys().await?;
        let ekeys: Vec<Vec<u8>> = keys.iter().map(|k| self.element_key(k)).collect();
        let refs: Vec<&[u8]> = ekeys.iter().map(|k| k.as_slice()).collect();
        let mut out = Vec::new();
        for (k, item) in keys
            .into_iter()
            .zip(self.mc.get_multi(&refs, &Default::default()).await?)
        {
            if let Some(item) = item {
                let (stored, v): (String, V) = decode(&item.value)?;
                if stored == k {
                    out.push((k, v));
                }
            }
        }
        Ok(out)
    }

    /// Sets `k` to `v`, listing `k` if it is new. Under the lock: acquire, `set` the element,
    /// reconcile the list with it (`reconcile`), release — six round trips.
    pub async fn insert(&self, k: &str, v: &V) -> Result<()> {
        let body = encode(&(k, v))?;
        let ekey = self.element_key(k);
        self.lock
            .with_lock(|| async {
                self.mc.set(&ekey, &body, 0, Exptime::NEVER).await?;
                self.reconcile(k).await
            })
            .await
    }

    /// Removes `k`; `true` if it was present. Under the lock: delete the element key, then
    /// reconcile the list with it.
    pub async fn remove(&self, k: &str) -> Result<bool> {
        let ekey = self.element_key(k);
        self.lock
            .with_lock(|| async {
                let present = self.contains(k).await?;
                let deleted = self.mc.delete(&ekey).await?;
                let listed = self.keys().await?.iter().any(|x| x == k);
                self.reconcile(k).await?;
                Ok(present || deleted || listed)
            })
            .await
    }

    /// Makes the list agree with `k`'s element key: listed iff present. `gets` the list,
    /// *then* reads the element, then `cas`es the list — rewriting it even when it already
    /// agrees, so that reconciliations are totally ordered by their `cas` and each read the
    /// element after the previous one's write. Whatever interleaving writers whose lock
    /// expired produce, the last reconciliation saw the last change to the element, so
    /// neither a listed ghost nor an unlisted element survives the writers.
    async fn reconcile(&self, k: &str) -> Result<()> {
        let key = self.list.key().to_vec();
        for _ in 0..super::MAX_ATTEMPTS {
            let current = self.mc.get(&key).await?;
            let mut list: Vec<String> = match &current {
                Some(item) => decode(&item.value)?,
                None => Vec::new(),
            };
            let present = self.contains(k).await?;
            let listed = list.iter().any(|x| x == k);
            if present && !listed {
                list.push(k.to_owned());
            } else if !present && listed {
                list.retain(|x| x != k);
            }
            let body = encode(&list)?;
            let stored = match current {
                Some(item) => {
                    self.mc
                        .cas(&key, &body, 0, Exptime::NEVER, item.cas)
                        .await?
                        == StoreOutcome::Stored
                }
                None => self.mc.add(&key, &body, 0, Exptime::NEVER).await?,
            };
            if stored {
                return Ok(());
            }
        }
        Err(crate::Error::Contended(super::MAX_ATTEMPTS))
    }
}

/// A distributed set of strings: the seed's table.
#[derive(Debug)]
pub struct Set<M: Memcache + Clone + 'static> {
    inner: Hash<M, ()>,
}

impl<M: Memcache + Clone + 'static> Set<M> {
    /// The set `name` (keys `hash:<name>:...`).
    pub fn new(mc: M, name: &str) -> Self {
        Set {
            inner: Hash::new(mc, name),
        }
    }

    /// The set `name`, its writers' lock built with `opts`.
    pub fn with_lock_options(mc: M, name: &str, opts: LockOptions) -> Self {
        Set {
            inner: Hash::with_lock_options(mc, name, opts),
        }
    }

    /// Adds `x`.
    pub async fn add(&self, x: &str) -> Result<()> {
        self.inner.insert(x, &()).await
    }

    /// Removes `x`; `true` if it was present.
    pub async fn remove(&self, x: &str) -> Result<bool> {
        self.inner.remove(x).await
    }

    /// Whether `x` is a member. One round trip.
    pub async fn contains(&self, x: &str) -> Result<bool> {
        self.inner.contains(x).await
    }

    /// Every member, in insertion order.
    pub async fn members(&self) -> Result<Vec<String>> {
        self.inner.keys().await
    }

    /// The underlying hash.
    pub fn as_hash(&self) -> &Hash<M, ()> {
        &self.inner
    }
}
