//! Test support (the `testing` feature, and the crate's own tests): [`Scripted`], a store
//! wrapper that stops one caller at a chosen command until the test lets it go, so that a
//! race between several callers can be staged step by step instead of hoped for.
//!
//! Each [`Scripted::actor`] is one caller's view of the same store: its commands are counted
//! on their own, and a [`Gate`] set on it stops that caller before (or after) its `n`-th
//! command of a kind ([`At`]). The test waits until the caller is stopped
//! ([`Gate::reached`]), does what the other callers do meanwhile, then [`Gate::release`]s it.
//! Clones of an actor share its script, so a structure that clones its store (a cache and its
//! tags) is still one caller.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! use memkit_cookbook::Queue;
//! use memkit_cookbook::testing::{At, Op, Scripted};
//! use memkit_engine::Embedded;
//!
//! let store = Scripted::new(Embedded::with_defaults());
//! let producer = store.actor("producer");
//! // Stop the producer after it reserved a slot, before it writes the element.
//! let write = producer.pause(At::before(Op::Add, 1));
//! let q: Queue<_, u32> = Queue::new(producer, "jobs");
//! let push = tokio::spawn(async move { q.push(&7).await });
//! write.reached().await;
//! let jobs: Queue<_, u32> = Queue::new(store.clone(), "jobs");
//! assert_eq!(jobs.len().await?, 1); // reserved, not written yet
//! write.release();
//! push.await.unwrap()?;
//! assert_eq!(jobs.pop().await?, Some(7));
//! # Ok::<(), memkit_cookbook::Error>(()) }).unwrap();
//! ```

use std::sync::{Arc, Mutex};
use std::time::Duration;

use memkit_types::{
    ArithOptions, ArithOutcome, DeleteOptions, DeleteOutcome, Exptime, GetOptions, Item, Memcache,
    Result, StoreMode, StoreOptions, Stored,
};
use tokio::sync::watch;

/// How long [`Gate::reached`] waits for its caller before it fails the test: a staged caller
/// that never makes the command the gate waits for is a broken script, not a slow machine.
const NEVER_CAME: Duration = Duration::from_secs(60);

/// A kind of command, as a gate matches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Any read (`get`, `gets`, `mg`, a multi-get).
    Get,
    /// Any store, whatever its mode.
    Store,
    /// `set` without a CAS token.
    Set,
    /// `add`.
    Add,
    /// `replace` without a CAS token.
    Replace,
    /// `append`.
    Append,
    /// `prepend`.
    Prepend,
    /// `cas`: a `set` or `replace` with a CAS token.
    Cas,
    /// Any delete (`delete`, `md`, with or without a CAS token or `I`).
    Delete,
    /// `incr`, `decr`, `ma`.
    Arith,
    /// `touch`.
    Touch,
    /// `flush_all`.
    Flush,
}

impl Op {
    fn of_store(opts: &StoreOptions) -> Op {
        match (opts.mode, opts.cas.is_some()) {
            (StoreMode::Set | StoreMode::Replace, true) => Op::Cas,
            (StoreMode::Set, false) => Op::Set,
            (StoreMode::Replace, false) => Op::Replace,
            (StoreMode::Add, _) => Op::Add,
            (StoreMode::Append, _) => Op::Append,
            (StoreMode::Prepend, _) => Op::Prepend,
        }
    }

    fn matches(self, call: Op) -> bool {
        self == call
            || (self == Op::Store
                && matches!(
                    call,
                    Op::Set | Op::Add | Op::Replace | Op::Append | Op::Prepend | Op::Cas
                ))
    }
}

/// Where a [`Gate`] stops its caller: before (or after) its `n`-th command of kind `op`
/// counted from when the gate is set, optionally only commands on a key starting with a
/// prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct At {
    op: Op,
    nth: usize,
    key_prefix: Option<Vec<u8>>,
    after: bool,
}

impl At {
    /// Stop before the `nth` (from 1) matching command is sent.
    pub fn before(op: Op, nth: usize) -> At {
        At {
            op,
            nth: nth.max(1),
            key_prefix: None,
            after: false,
        }
    }

    /// Stop after the `nth` matching command took effect, before its answer is returned.
    pub fn after(op: Op, nth: usize) -> At {
        At {
            after: true,
            ..At::before(op, nth)
        }
    }

    /// Count only commands on a key that starts with `prefix` (any key of a multi-get).
    pub fn key(mut self, prefix: impl AsRef<[u8]>) -> At {
        self.key_prefix = Some(prefix.as_ref().to_vec());
        self
    }

    fn matches(&self, op: Op, keys: &[&[u8]]) -> bool {
        self.op.matches(op)
            && self
                .key_prefix
                .as_ref()
                .is_none_or(|p| keys.iter().any(|k| k.starts_with(p)))
    }
}

#[derive(Debug)]
struct GateState {
    at: At,
    actor: String,
    seen: Mutex<usize>,
    reached: watch::Sender<bool>,
    released: watch::Sender<bool>,
}

impl GateState {
    /// Counts a command; `true` when it is the one to stop at.
    fn count(&self, op: Op, keys: &[&[u8]]) -> bool {
        if !self.at.matches(op, keys) {
            return false;
        }
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        *seen += 1;
        *seen == self.at.nth
    }

    async fn stop(&self) {
        self.reached.send_replace(true);
        let mut released = self.released.subscribe();
        // The sender lives as long as `self`: waiting ends only on a release.
        let _ = released.wait_for(|r| *r).await;
    }
}

/// A point where one actor stops; see [`At`]. Dropping the gate releases it, so a test that
/// fails half-way does not leave a caller stopped forever.
#[derive(Debug)]
pub struct Gate {
    state: Arc<GateState>,
}

impl Gate {
    /// Waits until the actor is stopped at this gate. Fails the test if it does not get there
    /// within a minute (the staged command never came: the script does not fit the code).
    pub async fn reached(&self) {
        let mut reached = self.state.reached.subscribe();
        let wait = reached.wait_for(|r| *r);
        if tokio::time::timeout(NEVER_CAME, wait).await.is_err() {
            panic!(
                "{} never reached {:?} (nth {}{}, {})",
                self.state.actor,
                self.state.at.op,
                self.state.at.nth,
                if self.state.at.after { ", after" } else { "" },
                self.state
                    .at
                    .key_prefix
                    .as_ref()
                    .map_or("any key".to_owned(), |p| format!(
                        "key {}*",
                        String::from_utf8_lossy(p)
                    )),
            );
        }
    }

    /// Whether the actor is stopped here now, or was.
    pub fn was_reached(&self) -> bool {
        *self.state.reached.borrow()
    }

    /// Lets the actor go on (it does not wait for the actor to get here).
    pub fn release(&self) {
        self.state.released.send_replace(true);
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.release();
    }
}

#[derive(Debug, Default)]
struct Script {
    name: String,
    gates: Mutex<Vec<Arc<GateState>>>,
}

impl Script {
    /// The gates this command stops at, before and after it.
    fn arrive(&self, op: Op, keys: &[&[u8]]) -> (Vec<Arc<GateState>>, Vec<Arc<GateState>>) {
        let gates = self.gates.lock().unwrap_or_else(|e| e.into_inner());
        let hit: Vec<Arc<GateState>> = gates
            .iter()
            .filter(|g| g.count(op, keys))
            .cloned()
            .collect();
        hit.into_iter().partition(|g| !g.at.after)
    }
}

/// A store wrapper whose actors can be stopped at chosen commands. See the module docs.
#[derive(Debug, Clone)]
pub struct Scripted<M> {
    inner: M,
    script: Arc<Script>,
}

impl<M: Memcache + Clone> Scripted<M> {
    /// `inner` wrapped, as an actor named `"store"` with no gates (for setting up and
    /// checking the store around the staged callers).
    pub fn new(inner: M) -> Self {
        Scripted {
            inner,
            script: Arc::new(Script {
                name: "store".to_owned(),
                ..Default::default()
            }),
        }
    }

    /// Another caller of the same store, with a script of its own; `name` appears in the
    /// message of a gate it never reaches.
    pub fn actor(&self, name: &str) -> Self {
        Scripted {
            inner: self.inner.clone(),
            script: Arc::new(Script {
                name: name.to_owned(),
                ..Default::default()
            }),
        }
    }

    /// The store under the wrapper.
    pub fn inner(&self) -> &M {
        &self.inner
    }

    /// Sets a gate on this actor (and its clones).
    pub fn pause(&self, at: At) -> Gate {
        let state = Arc::new(GateState {
            at,
            actor: self.script.name.clone(),
            seen: Mutex::new(0),
            reached: watch::Sender::new(false),
            released: watch::Sender::new(false),
        });
        self.script
            .gates
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(state.clone());
        Gate { state }
    }
}

async fn stop_all(gates: &[Arc<GateState>]) {
    for g in gates {
        g.stop().await;
    }
}

impl<M: Memcache> Memcache for Scripted<M> {
    async fn get_multi(&self, keys: &[&[u8]], opts: &GetOptions) -> Result<Vec<Option<Item>>> {
        let (before, after) = self.script.arrive(Op::Get, keys);
        stop_all(&before).await;
        let r = self.inner.get_multi(keys, opts).await;
        stop_all(&after).await;
        r
    }

    async fn store(&self, key: &[u8], value: &[u8], opts: &StoreOptions) -> Result<Stored> {
        let (before, after) = self.script.arrive(Op::of_store(opts), &[key]);
        stop_all(&before).await;
        let r = self.inner.store(key, value, opts).await;
        stop_all(&after).await;
        r
    }

    async fn delete_with(&self, key: &[u8], opts: &DeleteOptions) -> Result<DeleteOutcome> {
        let (before, after) = self.script.arrive(Op::Delete, &[key]);
        stop_all(&before).await;
        let r = self.inner.delete_with(key, opts).await;
        stop_all(&after).await;
        r
    }

    async fn arithmetic(&self, key: &[u8], opts: &ArithOptions) -> Result<ArithOutcome> {
        let (before, after) = self.script.arrive(Op::Arith, &[key]);
        stop_all(&before).await;
        let r = self.inner.arithmetic(key, opts).await;
        stop_all(&after).await;
        r
    }

    async fn touch(&self, key: &[u8], exptime: Exptime) -> Result<bool> {
        let (before, after) = self.script.arrive(Op::Touch, &[key]);
        stop_all(&before).await;
        let r = self.inner.touch(key, exptime).await;
        stop_all(&after).await;
        r
    }

    async fn flush_all(&self, delay: u32) -> Result<()> {
        let (before, after) = self.script.arrive(Op::Flush, &[]);
        stop_all(&before).await;
        let r = self.inner.flush_all(delay).await;
        stop_all(&after).await;
        r
    }

    fn home_server(&self, key: &[u8]) -> Option<usize> {
        self.inner.home_server(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memkit_engine::Embedded;

    #[tokio::test]
    async fn an_actor_stops_at_its_own_nth_command_only() {
        let store = Scripted::new(Embedded::with_defaults());
        let a = store.actor("a");
        let second_add = a.pause(At::before(Op::Add, 2).key("k"));
        store.add(b"k1", b"x", 0, Exptime::NEVER).await.unwrap(); // another actor: not counted
        a.add(b"other", b"x", 0, Exptime::NEVER).await.unwrap(); // another key: not counted
        a.add(b"k2", b"x", 0, Exptime::NEVER).await.unwrap();
        assert!(!second_add.was_reached());
        let task = {
            let a = a.clone();
            tokio::spawn(async move { a.add(b"k3", b"x", 0, Exptime::NEVER).await.unwrap() })
        };
        second_add.reached().await;
        assert_eq!(store.get(b"k3").await.unwrap(), None, "stopped before it");
        second_add.release();
        assert!(task.await.unwrap());
        assert!(store.get(b"k3").await.unwrap().is_some());
    }

    #[tokio::test]
    async fn after_gates_hold_the_answer_of_a_command_that_took_effect() {
        let store = Scripted::new(Embedded::with_defaults());
        let a = store.actor("a");
        store.set(b"k", b"1", 0, Exptime::NEVER).await.unwrap();
        let read = a.pause(At::after(Op::Get, 1));
        let task = {
            let a = a.clone();
            tokio::spawn(async move { a.get_value(b"k").await.unwrap() })
        };
        read.reached().await;
        store.set(b"k", b"2", 0, Exptime::NEVER).await.unwrap();
        read.release();
        assert_eq!(task.await.unwrap().as_deref(), Some(&b"1"[..]));
    }
}
