//! A synchronous facade over any [`Memcache`] backend, for programs that do not run an async
//! runtime. It is one generic wrapper, not a second copy of the API: every call drives the
//! backend's future to completion on the calling thread.
//!
//! The embedded store's futures are ready on first poll, so this costs nothing there. A
//! backend whose futures need a runtime (the network client) wraps itself in its own facade
//! that enters that runtime first.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

use bytes::Bytes;

use crate::{
    ArithOptions, ArithOutcome, Cas, DeleteOptions, DeleteOutcome, Exptime, Flags, GetOptions,
    Item, Memcache, Result, StoreOptions, StoreOutcome, Stored,
};

/// Runs a future to completion on this thread, parking while it is pending.
pub fn block_on<F: Future>(fut: F) -> F::Output {
    struct Unpark(Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(fut);
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
        thread::park();
    }
}

/// The blocking face of a backend `M`.
#[derive(Debug, Clone)]
pub struct Blocking<M>(pub M);

macro_rules! blocking {
    ($( $(#[$doc:meta])* fn $name:ident(&self $(, $arg:ident: $ty:ty)*) -> $ret:ty; )*) => {
        impl<M: Memcache> Blocking<M> {
            $( $(#[$doc])* pub fn $name(&self $(, $arg: $ty)*) -> Result<$ret> {
                block_on(self.0.$name($($arg),*))
            } )*
        }
    };
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
    /// See [`Memcache::get_with`].
    fn get_with(&self, key: &[u8], opts: &GetOptions) -> Option<Item>;
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
    /// See [`Memcache::delete_cas`].
    fn delete_cas(&self, key: &[u8], cas: Cas) -> DeleteOutcome;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn block_on_parks_until_another_thread_wakes_it() {
        let done = Arc::new(AtomicBool::new(false));
        let waker_slot: Arc<Mutex<Option<Waker>>> = Arc::default();
        let fut = std::future::poll_fn({
            let (done, slot) = (done.clone(), waker_slot.clone());
            move |cx| {
                if done.load(Ordering::SeqCst) {
                    return Poll::Ready(7);
                }
                *slot.lock().unwrap() = Some(cx.waker().clone());
                Poll::Pending
            }
        });
        let helper = thread::spawn(move || {
            loop {
                if let Some(w) = waker_slot.lock().unwrap().take() {
                    done.store(true, Ordering::SeqCst);
                    w.wake();
                    return;
                }
                thread::yield_now();
            }
        });
        assert_eq!(block_on(fut), 7);
        helper.join().unwrap();
    }
}
