//! THE trait: one semantics, many backends.
//!
//! Six required methods carry everything memcached 1.6 makes atomic, in the shape of the meta
//! commands (`mg`, `ms`, `md`, `ma`, `touch`, `flush_all`). The classic commands (`get`, `set`,
//! `add`, `cas`, `incr`...) are provided on top of them, so a backend implements each rule
//! once and every caller sees the same behaviour.
//!
//! The futures are `Send` so that code generic over `M: Memcache` can be spawned on a
//! multi-threaded runtime. The embedded store's futures complete on first poll.

use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;

use crate::{
    ArithOptions, ArithOutcome, Cas, DeleteOptions, DeleteOutcome, Error, Exptime, Flags,
    GetOptions, Item, Result, StoreMode, StoreOptions, StoreOutcome, Stored,
};

/// A memcached-compatible store: the embedded engine, one server, or a cluster.
pub trait Memcache: Send + Sync {
    /// Reads many keys at once (`get k1 k2 ...`, or pipelined `mg`); the result is aligned with
    /// `keys`. Options apply to every key.
    fn get_multi(
        &self,
        keys: &[&[u8]],
        opts: &GetOptions,
    ) -> impl Future<Output = Result<Vec<Option<Item>>>> + Send;

    /// Stores `value` under `key` as `opts.mode` says (`set`/`add`/`replace`/`append`/
    /// `prepend`, with `cas` when `opts.cas` is set).
    fn store(
        &self,
        key: &[u8],
        value: &[u8],
        opts: &StoreOptions,
    ) -> impl Future<Output = Result<Stored>> + Send;

    /// Deletes `key`, or marks it stale (`md`).
    fn delete_with(
        &self,
        key: &[u8],
        opts: &DeleteOptions,
    ) -> impl Future<Output = Result<DeleteOutcome>> + Send;

    /// Increments or decrements a decimal value (`incr`/`decr`/`ma`).
    fn arithmetic(
        &self,
        key: &[u8],
        opts: &ArithOptions,
    ) -> impl Future<Output = Result<ArithOutcome>> + Send;

    /// Sets a new expiry on an existing item; `false` if it is absent.
    fn touch(&self, key: &[u8], exptime: Exptime) -> impl Future<Output = Result<bool>> + Send;

    /// Invalidates every item, now (`delay == 0`) or in `delay` seconds.
    fn flush_all(&self, delay: u32) -> impl Future<Output = Result<()>> + Send;

    /// The index of the server that is `key`'s home when every server is up, for a backend
    /// that spreads keys over servers; `None` for a single store (the default). Stable while
    /// servers go down and come back, so names chosen from it do not move: the cookbook uses
    /// it to put a hot value's copies on distinct servers.
    fn home_server(&self, key: &[u8]) -> Option<usize> {
        let _ = key;
        None
    }

    // ---- Provided: the classic commands, each one call of the above. ----

    /// One key with options (`mg`).
    fn get_with(
        &self,
        key: &[u8],
        opts: &GetOptions,
    ) -> impl Future<Output = Result<Option<Item>>> + Send {
        async move { Ok(self.get_multi(&[key], opts).await?.pop().flatten()) }
    }

    /// `get`/`gets`: the item with its flags and CAS.
    fn get(&self, key: &[u8]) -> impl Future<Output = Result<Option<Item>>> + Send {
        async move { self.get_with(key, &GetOptions::default()).await }
    }

    /// `get`, value only.
    fn get_value(&self, key: &[u8]) -> impl Future<Output = Result<Option<Bytes>>> + Send {
        async move { Ok(self.get(key).await?.map(|item| item.value)) }
    }

    /// `gat`/`gats`: read and set a new expiry.
    fn gat(
        &self,
        key: &[u8],
        exptime: Exptime,
    ) -> impl Future<Output = Result<Option<Item>>> + Send {
        async move { self.get_with(key, &GetOptions::touch(exptime)).await }
    }

    /// `set`. Returns the stored item's CAS.
    fn set(
        &self,
        key: &[u8],
        value: &[u8],
        flags: Flags,
        exptime: Exptime,
    ) -> impl Future<Output = Result<Cas>> + Send {
        async move {
            let opts = StoreOptions::new(StoreMode::Set, flags, exptime);
            Ok(self.store(key, value, &opts).await?.cas)
        }
    }

    /// `add`: `true` if stored, `false` if the key was present.
    fn add(
        &self,
        key: &[u8],
        value: &[u8],
        flags: Flags,
        exptime: Exptime,
    ) -> impl Future<Output = Result<bool>> + Send {
        async move {
            self.store_mode(StoreMode::Add, key, value, flags, exptime)
                .await
        }
    }

    /// `replace`: `true` if stored, `false` if the key was absent.
    fn replace(
        &self,
        key: &[u8],
        value: &[u8],
        flags: Flags,
        exptime: Exptime,
    ) -> impl Future<Output = Result<bool>> + Send {
        async move {
            self.store_mode(StoreMode::Replace, key, value, flags, exptime)
                .await
        }
    }

    /// `append`: `true` if stored, `false` if the key was absent.
    fn append(&self, key: &[u8], value: &[u8]) -> impl Future<Output = Result<bool>> + Send {
        async move {
            self.store_mode(StoreMode::Append, key, value, 0, Exptime::NEVER)
                .await
        }
    }

    /// `prepend`: `true` if stored, `false` if the key was absent.
    fn prepend(&self, key: &[u8], value: &[u8]) -> impl Future<Output = Result<bool>> + Send {
        async move {
            self.store_mode(StoreMode::Prepend, key, value, 0, Exptime::NEVER)
                .await
        }
    }

    /// `cas`: store only if the item still has CAS `cas`.
    fn cas(
        &self,
        key: &[u8],
        value: &[u8],
        flags: Flags,
        exptime: Exptime,
        cas: Cas,
    ) -> impl Future<Output = Result<StoreOutcome>> + Send {
        async move {
            let opts = StoreOptions {
                cas: Some(cas),
                ..StoreOptions::new(StoreMode::Set, flags, exptime)
            };
            Ok(self.store(key, value, &opts).await?.outcome)
        }
    }

    /// `incr`: the new value, `None` if the key is absent.
    fn incr(&self, key: &[u8], delta: u64) -> impl Future<Output = Result<Option<u64>>> + Send {
        async move { arith_value(self.arithmetic(key, &ArithOptions::incr(delta)).await?) }
    }

    /// `decr`: the new value (never below 0), `None` if the key is absent.
    fn decr(&self, key: &[u8], delta: u64) -> impl Future<Output = Result<Option<u64>>> + Send {
        async move { arith_value(self.arithmetic(key, &ArithOptions::decr(delta)).await?) }
    }

    /// `delete`: `true` if the key was present.
    fn delete(&self, key: &[u8]) -> impl Future<Output = Result<bool>> + Send {
        async move {
            Ok(self.delete_with(key, &DeleteOptions::default()).await? == DeleteOutcome::Deleted)
        }
    }

    /// Delete only if the item still has CAS `cas` (`md key C<cas>`): the primitive an
    /// owner-checked unlock needs.
    fn delete_cas(
        &self,
        key: &[u8],
        cas: Cas,
    ) -> impl Future<Output = Result<DeleteOutcome>> + Send {
        async move {
            let opts = DeleteOptions {
                cas: Some(cas),
                ..Default::default()
            };
            self.delete_with(key, &opts).await
        }
    }

    #[doc(hidden)]
    fn store_mode(
        &self,
        mode: StoreMode,
        key: &[u8],
        value: &[u8],
        flags: Flags,
        exptime: Exptime,
    ) -> impl Future<Output = Result<bool>> + Send {
        async move {
            let opts = StoreOptions::new(mode, flags, exptime);
            Ok(self.store(key, value, &opts).await?.outcome == StoreOutcome::Stored)
        }
    }
}

fn arith_value(outcome: ArithOutcome) -> Result<Option<u64>> {
    match outcome {
        ArithOutcome::Value { value, .. } => Ok(Some(value)),
        ArithOutcome::NonNumeric => Err(Error::Client(
            "cannot increment or decrement non-numeric value".into(),
        )),
        _ => Ok(None),
    }
}

/// Forwards every required method and [`Memcache::home_server`]; the provided ones follow.
macro_rules! forward_memcache {
    ($($t:tt)*) => {
        $($t)* {
            fn get_multi(
                &self,
                keys: &[&[u8]],
                opts: &GetOptions,
            ) -> impl Future<Output = Result<Vec<Option<Item>>>> + Send {
                (**self).get_multi(keys, opts)
            }
            fn store(
                &self,
                key: &[u8],
                value: &[u8],
                opts: &StoreOptions,
            ) -> impl Future<Output = Result<Stored>> + Send {
                (**self).store(key, value, opts)
            }
            fn delete_with(
                &self,
                key: &[u8],
                opts: &DeleteOptions,
            ) -> impl Future<Output = Result<DeleteOutcome>> + Send {
                (**self).delete_with(key, opts)
            }
            fn arithmetic(
                &self,
                key: &[u8],
                opts: &ArithOptions,
            ) -> impl Future<Output = Result<ArithOutcome>> + Send {
                (**self).arithmetic(key, opts)
            }
            fn touch(&self, key: &[u8], exptime: Exptime) -> impl Future<Output = Result<bool>> + Send {
                (**self).touch(key, exptime)
            }
            fn flush_all(&self, delay: u32) -> impl Future<Output = Result<()>> + Send {
                (**self).flush_all(delay)
            }
            fn home_server(&self, key: &[u8]) -> Option<usize> {
                (**self).home_server(key)
            }
        }
    };
}

forward_memcache!(impl<M: Memcache + ?Sized> Memcache for &M);

forward_memcache!(impl<M: Memcache + ?Sized> Memcache for Arc<M>);
