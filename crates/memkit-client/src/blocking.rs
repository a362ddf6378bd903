//! [`BlockingClient`]: the synchronous face of a [`Client`] or [`Cluster`].
//!
//! One generic wrapper, not a second API: it owns a private current-thread tokio runtime and
//! drives the backend's futures on it, so programs without an async runtime (scripts, the
//! CLI) use the same calls. Each call enters the runtime; do not call it from inside another
//! tokio runtime (it would block that runtime's thread).
//!
//! [`Client`]: crate::Client
//! [`Cluster`]: crate::Cluster

use std::future::Future;

use bytes::Bytes;
use memkit_types::{
    ArithOptions, ArithOutcome, Cas, DeleteOptions, DeleteOutcome, Exptime, Flags, GetOptions,
    Item, Memcache, Result, StoreOptions, StoreOutcome, Stored,
};
use tokio::runtime::{Builder, Runtime};

/// A backend `M` with its own runtime.
#[derive(Debug)]
pub struct BlockingClient<M> {
    inner: M,
    rt: Runtime,
}

macro_rules! blocking {
    ($( $(#[$doc:meta])* fn $name:ident(&self $(, $arg:ident: $ty:ty)*) -> $ret:ty; )*) => {
        impl<M: Memcache> BlockingClient<M> {
            $( $(#[$doc])* pub fn $name(&self $(, $arg: $ty)*) -> Result<$ret> {
                self.rt.block_on(self.inner.$name($($arg),*))
            } )*
        }
    };
}

impl<M> BlockingClient<M> {
    /// Wraps `inner` with a new current-thread runtime (time and I/O enabled).
    pub fn new(inner: M) -> std::io::Result<Self> {
        let rt = Builder::new_current_thread().enable_all().build()?;
        Ok(BlockingClient { inner, rt })
    }

    /// The async backend.
    pub fn inner(&self) -> &M {
        &self.inner
    }

    /// Runs any future of the backend (e.g. [`crate::Client::stats`]) to completion.
    pub fn run<'a, F: Future + 'a>(&'a self, f: impl FnOnce(&'a M) -> F) -> F::Output {
        self.rt.block_on(f(&self.inner))
    }
}

blocking! {
    /// See [`Memcache::get_multi`].
    fn get_multi(&self, keys: &[&[u8]], opts: &GetOptions) -> Vec<Option<Item>>;
    /// See [`Memcache::store`].
    fn store(&self, key: &[u8], value: &[u8], opts: &StoreOptions) -> Stored;
    /// See [`Memcache::delete_with`].
    fn delete_with(&self, key: &[u8], opts: &DeleteOptions) -> DeleteOutcome;
    /// See [`Memcache::arithmetic`].
    fn arithmetic(&self, key: &[u8], opts: &ArithOptions) -> ArithOutcome;
    /// See [`Memcache::touch`].
    fn touch(&self, key: &[u8], exptime: Exptime) -> bool;
    /// See [`Memcache::flush_all`].
    fn flush_all(&self, delay: u32) -> ();
    /// See [`Memcache::get`].
    fn get(&self, key: &[u8]) -> Option<Item>;
    /// See [`Memcache::get_value`].
    fn get_value(&self, key: &[u8]) -> Option<Bytes>;
    /// See [`Memcache::gat`].
    fn gat(&self, key: &[u8], exptime: Exptime) -> Option<Item>;
    /// See [`Memcache::set`].
    fn set(&self, key: &[u8], value: &[u8], flags: Flags, exptime: Exptime) -> Cas;
    /// See [`Memcache::add`].
    fn add(&self, key: &[u8], value: &[u8], flags: Flags, exptime: Exptime) -> bool;
    /// See [`Memcache::replace`].
    fn replace(&self, key: &[u8], value: &[u8], flags: Flags, exptime: Exptime) -> bool;
    /// See [`Memcache::append`].
    fn append(&self, key: &[u8], value: &[u8]) -> bool;
    /// See [`Memcache::prepend`].
    fn prepend(&self, key: &[u8], value: &[u8]) -> bool;
    /// See [`Memcache::cas`].
    fn cas(&self, key: &[u8], value: &[u8], flags: Flags, exptime: Exptime, cas: Cas) -> StoreOutcome;
    /// See [`Memcache::incr`].
    fn incr(&self, key: &[u8], delta: u64) -> Option<u64>;
    /// See [`Memcache::decr`].
    fn decr(&self, key: &[u8], delta: u64) -> Option<u64>;
    /// See [`Memcache::delete`].
    fn delete(&self, key: &[u8]) -> bool;
}
