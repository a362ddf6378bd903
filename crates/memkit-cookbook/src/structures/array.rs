//! The two arrays of seed 000/002 ("Массив").
//!
//! See `docs/cookbook/array.md`.
//!
//! [`Array`] — *read-mostly*: the whole list under one key `array:<name>` (JSON). Readers
//! `get` it and never wait: every write replaces the value with one command, so a reader sees
//! the list before or after a change, never half of one. Writers are serialized by `gets` +
//! `cas` (retry when someone wrote in between; `add` when the key is absent), optionally also
//! under a [`Lock`] (the seed's way) so that writers queue instead of spinning on cas.
//!
//! [`AppendArray`] — *append-mostly*: each change is an operation appended to the value,
//! `+<json>` or `-<json>`, one per line (`+1 +3 +4 -3 +5` reads as `[1, 4, 5]`); writers never
//! wait and never read. Readers fold the operations. When the value grows past a threshold a
//! reader compacts it (rewrites the folded list with `cas`, so a concurrent append is never
//! lost). Elements can be spread over several keys by a stable hash of their encoding, which
//! bounds each key's size. `add` *falls through* to `add`-the-key when `append` finds no key:
//! the seed returned there, silently dropping the first element of every array.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! use memkit_cookbook::{AppendArray, Array};
//! use memkit_engine::Embedded;
//!
//! let mc = Embedded::with_defaults();
//! let admins: Array<_, String> = Array::new(mc.clone(), "admins");
//! admins.change(&["ann".to_string(), "bob".to_string()], &[]).await?;
//! admins.change(&[], &["ann".to_string()]).await?;
//! assert_eq!(admins.fetch().await?, vec!["bob".to_string()]);
//!
//! let ids: AppendArray<_, u64> = AppendArray::new(mc, "recent");
//! for x in [1, 3, 4] { ids.add(&x).await?; }
//! ids.remove(&3).await?;
//! ids.add(&5).await?;
//! assert_eq!(ids.fetch().await?, vec![1, 4, 5]);
//! # Ok::<(), memkit_cookbook::Error>(()) }).unwrap();
//! ```

use std::marker::PhantomData;

use memkit_types::{Error as StoreError, Exptime, Memcache, StoreOutcome};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::lock::{Lock, LockOptions};
use super::{MAX_ATTEMPTS, append_or_add};
use crate::codec::{FNV_BASIS, decode, encode, fnv1a};
use crate::{Error, Result};

/// A read-mostly list under one key.
#[derive(Debug)]
pub struct Array<M, T> {
    mc: M,
    key: Vec<u8>,
    lock: Option<LockOptions>,
    name: String,
    _t: PhantomData<fn() -> T>,
}

impl<M: Memcache + Clone + 'static, T: Serialize + DeserializeOwned + PartialEq> Array<M, T> {
    /// The array `name` (key `array:<name>`), writers serialized by gets/cas.
    pub fn new(mc: M, name: &str) -> Self {
        Array {
            mc,
            key: crate::codec::key("array", name),
            lock: None,
            name: name.to_owned(),
            _t: PhantomData,
        }
    }

    /// The same array whose writers also take the lock `array:<name>` (the seed's way):
    /// they wait in line instead of retrying cas. Readers are unaffected.
    pub fn with_lock(mut self, opts: LockOptions) -> Self {
        self.lock = Some(opts);
        self
    }

    /// The key.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The whole list (empty when the key is absent). One round trip; never blocked.
    pub async fn fetch(&self) -> Result<Vec<T>> {
        match self.mc.get_value(&self.key).await? {
            Some(v) => decode(&v),
            None => Ok(Vec::new()),
        }
    }

    /// Applies `f` to the list atomically: `gets`, `f`, `cas` (or `add` when absent),
    /// retried when another writer got in between, so `f` may run more than once. Two round
    /// trips without contention (four with the lock).
    pub async fn update<F: FnMut(&mut Vec<T>)>(&self, f: F) -> Result<()> {
        match &self.lock {
            None => self.update_cas(f).await,
            Some(opts) => {
                let lock = Lock::with_options(
                    self.mc.clone(),
                    &format!("array:{}", self.name),
                    opts.clone(),
                );
                lock.with_lock(|| self.update_cas(f)).await
            }
        }
    }

    /// Removes every element equal to one of `remove`, then appends `add`.
    pub async fn change(&self, add: &[T], remove: &[T]) -> Result<()>
    where
        T: Clone,
    {
        self.update(|v| {
            v.retain(|e| !remove.contains(e));
            v.extend(add.iter().cloned());
        })
        .await
    }

    async fn update_cas<F: FnMut(&mut Vec<T>)>(&self, mut f: F) -> Result<()> {
        for _ in 0..MAX_ATTEMPTS {
            let current = self.mc.get(&self.key).await?;
            let mut list: Vec<T> = match &current {
                Some(item) => decode(&item.value)?,
                None => Vec::new(),
            };
            f(&mut list);
            let body = encode(&list)?;
            let stored = match current {
                Some(item) => {
                    self.mc
                        .cas(&self.key, &body, 0, Exptime::NEVER, item.cas)
                        .await?
                        == StoreOutcome::Stored
                }
                None => self.mc.add(&self.key, &body, 0, Exptime::NEVER).await?,
            };
            if stored {
                return Ok(());
            }
        }
        Err(Error::Contended(MAX_ATTEMPTS))
    }
}

/// An append-mostly list of `+x`/`-x` operations, optionally sharded over several keys.
#[derive(Debug)]
pub struct AppendArray<M, T> {
    mc: M,
    keys: Vec<Vec<u8>>,
    compact_above: usize,
    _t: PhantomData<fn() -> T>,
}

impl<M: Memcache, T: Serialize + DeserializeOwned> AppendArray<M, T> {
    /// The array `name` in one key `aarray:<name>`, compacted above 64 KiB.
    pub fn new(mc: M, name: &str) -> Self {
        Self::sharded(mc, name, 1)
    }

    /// The array `name` spread over `shards` keys `aarray:<name>:<i>` by a stable hash of
    /// each element's encoding (both `+x` and `-x` of one element go to one shard). Order is
    /// kept within a shard; [`fetch`](Self::fetch) concatenates the shards.
    pub fn sharded(mc: M, name: &str, shards: usize) -> Self {
        let shards = shards.max(1);
        let keys = if shards == 1 {
            vec![crate::codec::key("aarray", name)]
        } else {
            (0..shards)
                .map(|i| crate::codec::key("aarray", &format!("{name}:{i}")))
                .collect()
        };
        AppendArray {
            mc,
            keys,
            compact_above: 64 << 10,
            _t: PhantomData,
        }
    }

    /// The same array, compacted when a key's value exceeds `bytes`.
    pub fn compact_above(mut self, bytes: usize) -> Self {
        self.compact_above = bytes;
        self
    }

    /// The keys, by shard.
    pub fn keys(&self) -> &[Vec<u8>] {
        &self.keys
    }

    fn shard_of(&self, encoded: &[u8]) -> &[u8] {
        let i = (fnv1a(encoded, FNV_BASIS) % self.keys.len() as u64) as usize;
        &self.keys[i]
    }

    /// Adds `x` (duplicates allowed, as in the seed). One round trip usually (`append`);
    /// two or three when the key is absent.
    pub async fn add(&self, x: &T) -> Result<()> {
        self.push_op(b'+', x, true).await
    }

    /// Removes every earlier occurrence of `x`. One round trip; a no-op when the key is
    /// absent.
    pub async fn remove(&self, x: &T) -> Result<()> {
        self.push_op(b'-', x, false).await
    }

    async fn push_op(&self, op: u8, x: &T, create: bool) -> Result<()> {
        let encoded = encode(x)?;
        let mut line = Vec::with_capacity(encoded.len() + 2);
        line.push(op);
        line.extend_from_slice(&encoded);
        line.push(b'\n');
        let key = self.shard_of(&encoded);
        for attempt in 0..2 {
            let r = if create {
                append_or_add(&self.mc, key, &line, Exptime::NEVER).await
            } else {
                self.mc
                    .append(key, &line)
                    .await
                    .map(drop)
                    .map_err(Error::from)
            };
            match r {
                // The key reached the item size limit: fold it and try once more.
                Err(Error::Store(StoreError::TooLarge)) if attempt == 0 => {
                    self.compact_key(key).await?;
                }
                r => return r,
            }
        }
        Ok(())
    }

    /// The folded list. One multi-get; a shard above the threshold is compacted on the way
    /// (two more round trips for it).
    pub async fn fetch(&self) -> Result<Vec<T>> {
        let refs: Vec<&[u8]> = self.keys.iter().map(|k| k.as_slice()).collect();
        let items = self.mc.get_multi(&refs, &Default::default()).await?;
        let mut out = Vec::new();
        for (key, item) in self.keys.iter().zip(items) {
            let Some(item) = item else { continue };
            let folded = fold(&item.value)?;
            if item.value.len() > self.compact_above {
                self.try_compact(key, item.cas, item.value.len(), &folded)
                    .await?;
            }
            for e in folded {
                out.push(decode(&e)?);
            }
        }
        Ok(out)
    }

    /// Rewrites every shard as its folded list (`+x` lines only). A shard appended to
    /// meanwhile is retried; returns the bytes saved.
    pub async fn compact(&self) -> Result<usize> {
        let mut saved = 0;
        for key in &self.keys {
            saved += self.compact_key(key).await?;
        }
        Ok(saved)
    }

    async fn compact_key(&self, key: &[u8]) -> Result<usize> {
        for _ in 0..MAX_ATTEMPTS {
            let Some(item) = self.mc.get(key).await? else {
                return Ok(0);
            };
            let folded = fold(&item.value)?;
            if let Some(saved) = self
                .try_compact(key, item.cas, item.value.len(), &folded)
                .await?
            {
                return Ok(saved);
            }
        }
        Err(Error::Contended(MAX_ATTEMPTS))
    }

    /// `Some(bytes saved)` if the cas write won (or there was nothing to save), `None` if the
    /// key changed meanwhile.
    async fn try_compact(
        &self,
        key: &[u8],
        cas: u64,
        old_len: usize,
        folded: &[Vec<u8>],
    ) -> Result<Option<usize>> {
        let mut body = Vec::new();
        for e in folded {
            body.push(b'+');
            body.extend_from_slice(e);
            body.push(b'\n');
        }
        if body.len() >= old_len {
            return Ok(Some(0));
        }
        let outcome = self.mc.cas(key, &body, 0, Exptime::NEVER, cas).await?;
        Ok((outcome == StoreOutcome::Stored).then(|| old_len - body.len()))
    }
}

/// Folds `+x`/`-x` lines into the encoded elements, in order: `-x` removes every earlier
/// occurrence of `x` (compared by encoding).
pub fn fold(ops: &[u8]) -> Result<Vec<Vec<u8>>> {
    let mut out: Vec<Vec<u8>> = Vec::new();
    for line in ops.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let (op, e) = line.split_at(1);
        match op[0] {
            b'+' => out.push(e.to_vec()),
            b'-' => out.retain(|x| x != e),
            _ => {
                return Err(Error::Codec(format!(
                    "bad array op {:?}",
                    String::from_utf8_lossy(line)
                )));
            }
        }
    }
    Ok(out)
}
