//! Router mode (`memkitd --route FILE`): memkitd in front of pools of memcached or memkitd
//! servers, for clients that cannot route themselves (PHP-FPM, Python). `docs/router.md`
//! is the operator's reference.
//!
//! A routed request is a request that waits, as a replicated write is
//! ([`crate::exec::route`]): its first run notes the logical command ([`Op`]) in the
//! connection's [`Job`] and renders nothing; a client's pipelined requests join the same
//! job (`session::gather`); the connection parks and the job runs here, on the
//! connection's worker, which has its own connections to the backends ([`pool`]), so the
//! replies arrive on that worker too; a connection's task awaits its job itself
//! ([`Router::job`]; a connection driven elsewhere hands it over, [`Router::submit`]); each
//! request's second run renders its [`Outcome`] in the client's protocol.
//! So clients speak text, meta or binary to the router whatever the backends speak, and a
//! connection's replies stay in order.
//!
//! Map:
//! - [`config`]: the TOML file, checked whole with line-numbered errors (a bad reload keeps
//!   the old routes);
//! - [`pool`]: a pool's clients, placement, and each server's health (TKO and its probe)
//!   and counters;
//! - [`run`]: a job's commands through the routes: which route takes each, in what order
//!   they go, and each route kind (hash, failover, all-*, warm-up, gutter, shadow);
//! - [`split`]: big values stored as chunks under keys of their own (`split_above`).

pub mod config;
pub mod pool;
pub mod run;
pub mod split;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{
    AtomicBool, AtomicU64, Ordering::AcqRel, Ordering::Relaxed, Ordering::Release,
};
use std::task::{Context, Wake, Waker};

use bytes::{Bytes, BytesMut};
use memkit_client::Outcome;
use memkit_protocol::Command;
use memkit_types::{ArithOptions, DeleteOptions, Exptime, GetOptions, Result, StoreOptions};
use parking_lot::{Mutex, RwLock};

use crate::state::gate::Completer;
use config::{Plan, RouteSpec};
use pool::Pool;

/// A logical command, owned, as a job carries it from the request that made it.
#[derive(Debug, Clone)]
pub struct Op {
    pub key: Bytes,
    pub data: Bytes,
    pub kind: OpKind,
}

/// What an [`Op`] does (a [`Command`]'s options, owned).
#[derive(Debug, Clone)]
pub enum OpKind {
    Get(GetOptions),
    Store(StoreOptions),
    Delete(DeleteOptions),
    Arith(ArithOptions),
    Touch(Exptime),
    Flush(u32),
}

/// The chunks [`Op::of`] copies small keys and values into.
const ARENA_CHUNK: usize = 4096;

/// `b` copied into `arena`'s spare room (a new chunk when too little is left), or into an
/// allocation of its own when large: a job's keys share a few allocations, not one each.
/// A chunk lives while an op carved from it does.
fn carve(arena: &mut BytesMut, b: &[u8]) -> Bytes {
    if b.is_empty() {
        return Bytes::new();
    }
    if b.len() > ARENA_CHUNK / 4 {
        return Bytes::copy_from_slice(b);
    }
    if arena.capacity() < b.len() {
        *arena = BytesMut::with_capacity(ARENA_CHUNK);
    }
    arena.extend_from_slice(b);
    arena.split().freeze()
}

impl Op {
    /// `cmd`, its key and data copied (small ones into `arena`'s chunks).
    pub fn of(cmd: &Command<'_>, arena: &mut BytesMut) -> Op {
        let (key, data, kind) = match cmd {
            Command::Get { key, opts } => (*key, &[][..], OpKind::Get(opts.clone())),
            Command::Store { key, data, opts } => (*key, *data, OpKind::Store(opts.clone())),
            Command::Delete { key, opts } => (*key, &[][..], OpKind::Delete(opts.clone())),
            Command::Arith { key, opts } => (*key, &[][..], OpKind::Arith(opts.clone())),
            Command::Touch { key, exptime } => (*key, &[][..], OpKind::Touch(*exptime)),
            Command::Flush { delay } => (&[][..], &[][..], OpKind::Flush(*delay)),
        };
        Op {
            key: carve(arena, key),
            data: carve(arena, data),
            kind,
        }
    }

    /// The command, borrowing this op.
    pub fn command(&self) -> Command<'_> {
        let key = &self.key[..];
        match &self.kind {
            OpKind::Get(opts) => Command::Get {
                key,
                opts: opts.clone(),
            },
            OpKind::Store(opts) => Command::Store {
                key,
                data: &self.data,
                opts: opts.clone(),
            },
            OpKind::Delete(opts) => Command::Delete {
                key,
                opts: opts.clone(),
            },
            OpKind::Arith(opts) => Command::Arith {
                key,
                opts: opts.clone(),
            },
            OpKind::Touch(exptime) => Command::Touch {
                key,
                exptime: *exptime,
            },
            OpKind::Flush(delay) => Command::Flush { delay: *delay },
        }
    }

    /// The route class (`commands = [...]`) it belongs to.
    fn class(&self) -> u8 {
        use config::class::*;
        match self.kind {
            OpKind::Get(_) => GET,
            OpKind::Store(_) => SET,
            OpKind::Delete(_) => DELETE,
            OpKind::Arith(_) => ARITH,
            OpKind::Touch(_) => TOUCH,
            OpKind::Flush(_) => FLUSH,
        }
    }

    /// Whether it changes what a server holds (a read with a touch does).
    fn writes(&self) -> bool {
        match &self.kind {
            OpKind::Get(o) => o.touch.is_some() || o.vivify.is_some(),
            _ => true,
        }
    }
}

/// A connection's requests for the router: filled by their first runs, carried out
/// together.
#[derive(Debug, Default)]
pub struct Job {
    pub ops: Vec<Op>,
    /// Bytes of keys and values, to bound what one job holds.
    pub bytes: usize,
    /// Filled in before the connection's completer fires, aligned with `ops`.
    pub done: Arc<Mutex<Vec<Result<Outcome>>>>,
}

/// The router's counters beyond the pools' (`stats router`).
#[derive(Debug, Default)]
pub struct Counters {
    pub jobs: crate::state::Striped,
    pub ops: crate::state::Striped,
    /// Requests no route takes.
    pub unrouted: AtomicU64,
    /// Requests a failover route sent to a later pool.
    pub failovers: AtomicU64,
    /// Requests sent to a gutter pool.
    pub gutter: AtomicU64,
    /// Requests mirrored to a shadow pool.
    pub shadowed: AtomicU64,
    /// Warm-up misses filled from the warm pool.
    pub warmed: AtomicU64,
    pub reloads: AtomicU64,
    pub reload_failures: AtomicU64,
}

/// The client-facing command counters of `stats` in router mode (memcached's names): what
/// the routed commands came to, counted as the engine counts its own (`gat` as a touch).
/// What a router cannot know (an item expired or flushed at the backend, a backend out of
/// memory) it does not count; `stats` leaves those lines out.
///
/// Kept a copy a worker thread (one more for any other thread), summed when read: a
/// routed multi-get counts each of its keys, and two workers adding to one cache line
/// would pass it between their cores at every key.
#[derive(Debug)]
pub struct Tally {
    copies: pool::PerWorker<Counts>,
    /// The sums at the last `stats reset`.
    base: Counts,
}

impl Tally {
    /// Counters for a server of `workers` worker threads.
    pub fn new(workers: usize) -> Tally {
        Tally {
            copies: pool::PerWorker::new(workers, Counts::default),
            base: Counts::default(),
        }
    }

    /// Counts a store the codec refused as too large (it never becomes a command).
    pub fn too_large(&self) {
        let (c, solo) = self.copies.mine();
        bump(&c.store_too_large, solo);
    }

    /// Counts `cmd`'s outcome `r`.
    pub fn count(&self, cmd: &Command<'_>, r: &Result<Outcome>) {
        let (c, solo) = self.copies.mine();
        c.count(cmd, r, solo);
    }

    /// The counts, in the engine's shape (what the router does not count stays 0).
    pub fn counters(&self) -> memkit_engine::Counters {
        let base = self.base.fields();
        engine_counters(std::array::from_fn(|i| {
            self.sum(i).saturating_sub(base[i].load(Relaxed))
        }))
    }

    /// Field `i` summed over the copies.
    fn sum(&self, i: usize) -> u64 {
        self.copies
            .all()
            .iter()
            .map(|s| s.fields()[i].load(Relaxed))
            .sum()
    }

    /// `stats reset`: what was counted so far becomes the base the counts are read from
    /// (a worker's copy is written by that worker alone, so it is never set back).
    pub fn reset(&self) {
        for (i, b) in self.base.fields().into_iter().enumerate() {
            b.store(self.sum(i), Relaxed);
        }
    }
}

/// Adds one to `c`; `solo`: only this thread writes it, so no locked add is needed (a
/// reader still sees whole values).
fn bump(c: &AtomicU64, solo: bool) {
    match solo {
        true => c.store(c.load(Relaxed) + 1, Relaxed),
        false => {
            c.fetch_add(1, Relaxed);
        }
    }
}

/// Declares [`Counts`], its fields in one list ([`Counts::fields`]) and the engine's
/// [`memkit_engine::Counters`] made of their values, from the counter names (the engine's).
macro_rules! counts {
    ($($f:ident)*) => {
        /// One thread's copy of the [`Tally`], on cache lines of its own.
        #[derive(Debug, Default)]
        #[repr(align(128))]
        struct Counts {
            $($f: AtomicU64,)*
        }

        impl Counts {
            /// Every counter, in the order of the list.
            fn fields(&self) -> [&AtomicU64; FIELDS] {
                [$(&self.$f),*]
            }
        }

        /// The engine's counters with the values of the list's (the rest 0).
        fn engine_counters(v: [u64; FIELDS]) -> memkit_engine::Counters {
            let [$($f),*] = v;
            memkit_engine::Counters {
                $($f,)*
                ..Default::default()
            }
        }
    };
}

/// How many counters the tally keeps.
const FIELDS: usize = 18;

counts!(
    cmd_get get_hits get_misses cmd_touch touch_hits touch_misses cmd_set cas_hits cas_misses
    cas_badval delete_hits delete_misses incr_hits incr_misses decr_hits decr_misses cmd_flush
    store_too_large
);

impl Counts {
    fn count(&self, cmd: &Command<'_>, r: &Result<Outcome>, solo: bool) {
        use memkit_types::{ArithMode, ArithOutcome, DeleteOutcome, Error, StoreOutcome};
        let add = |c: &AtomicU64| bump(c, solo);
        match (cmd, r) {
            (Command::Get { opts, .. }, r) => {
                let hit = matches!(r, Ok(Outcome::Item(Some(_))));
                // A touching hit is a touch; a miss, a get, unless a classic `gat` missed
                // (memcached's meta handler knows it touches only once it has the item).
                let touch = opts.touch.is_some() && (hit || opts.classic);
                let (c, h, m) = match touch {
                    true => (&self.cmd_touch, &self.touch_hits, &self.touch_misses),
                    false => (&self.cmd_get, &self.get_hits, &self.get_misses),
                };
                add(c);
                add(if hit { h } else { m });
            }
            (Command::Store { opts, .. }, r) => {
                add(&self.cmd_set);
                match (opts.cas.is_some(), r) {
                    (_, Err(Error::TooLarge)) => add(&self.store_too_large),
                    (true, Ok(Outcome::Stored(s))) => match s.outcome {
                        StoreOutcome::Stored => add(&self.cas_hits),
                        StoreOutcome::Exists => add(&self.cas_badval),
                        _ => add(&self.cas_misses),
                    },
                    _ => {}
                }
            }
            (Command::Delete { .. }, Ok(Outcome::Deleted(d))) => match d {
                DeleteOutcome::Deleted => add(&self.delete_hits),
                _ => add(&self.delete_misses),
            },
            (Command::Arith { opts, .. }, Ok(Outcome::Arith(a))) => {
                let hit = !matches!(a, ArithOutcome::NotFound);
                let (h, m) = match opts.mode {
                    ArithMode::Incr => (&self.incr_hits, &self.incr_misses),
                    ArithMode::Decr => (&self.decr_hits, &self.decr_misses),
                };
                add(if hit { h } else { m });
            }
            (Command::Touch { .. }, Ok(Outcome::Touched(found))) => {
                add(&self.cmd_touch);
                add(if *found {
                    &self.touch_hits
                } else {
                    &self.touch_misses
                });
            }
            (Command::Flush { .. }, _) => add(&self.cmd_flush),
            _ => {}
        }
    }
}

/// The routes in force: pools by name and the routes over them, in the file's order.
#[derive(Debug)]
pub struct Table {
    pub pools: BTreeMap<String, Arc<Pool>>,
    pub routes: Vec<RouteSpec>,
}

impl Table {
    /// Builds the pools of `plan`, keeping those of `old` whose definition is unchanged
    /// (their connections and health go on).
    fn build(
        plan: Plan,
        old: Option<&Table>,
        workers: usize,
    ) -> std::result::Result<Table, String> {
        let mut pools = BTreeMap::new();
        for spec in plan.pools {
            let kept = old
                .and_then(|t| t.pools.get(&spec.name))
                .filter(|p| p.spec == spec)
                .cloned();
            let pool = match kept {
                Some(p) => p,
                None => Arc::new(Pool::new(spec.clone(), workers)?),
            };
            pools.insert(spec.name, pool);
        }
        Ok(Table {
            pools,
            routes: plan.routes,
        })
    }

    /// The route that takes `op`: the first in the file whose prefix starts its key and
    /// whose commands include it.
    fn route_of(&self, op: &Op) -> Option<usize> {
        let class = op.class();
        self.routes.iter().position(|r| {
            // An empty prefix is the common case: no call into memcmp for it.
            r.classes & class != 0 && (r.prefix.is_empty() || op.key.starts_with(&r.prefix))
        })
    }

    fn pool(&self, name: &str) -> &Arc<Pool> {
        &self.pools[name]
    }
}

/// A job: its commands carried out, its completer fired ([`Router::job`]).
pub type JobFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A job's future as a task of its own making: polled first by the thread that submits it
/// (inside `handle`'s runtime context, so its sockets and timers are that runtime's), then,
/// each time something wakes it, by a task spawned on `handle`. A `tokio::spawn` of the
/// whole job would cost a scheduling round (and, from outside the runtime, a wake-up of
/// one of its threads) before the first byte went out.
struct JobTask {
    fut: Mutex<Option<JobFuture>>,
    /// A poll is spawned and has not started: wakes until it starts add nothing.
    scheduled: AtomicBool,
    handle: tokio::runtime::Handle,
}

impl JobTask {
    /// Polls the job once, if it is not done.
    fn poll(self: &Arc<Self>) {
        let mut fut = self.fut.lock();
        let Some(f) = fut.as_mut() else {
            return;
        };
        let waker = Waker::from(self.clone());
        if f.as_mut().poll(&mut Context::from_waker(&waker)).is_ready() {
            *fut = None;
        }
    }
}

impl Wake for JobTask {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    /// Never polls here: a waker may be called inside a poll (the job's own, holding its
    /// lock, when tokio's budget runs out).
    fn wake_by_ref(self: &Arc<Self>) {
        if !self.scheduled.swap(true, AcqRel) {
            let me = self.clone();
            self.handle.spawn(async move {
                me.scheduled.store(false, Release);
                me.poll();
            });
        }
    }
}

/// The router: its runtime, the routes in force, and the file they came from.
pub struct Router {
    path: PathBuf,
    /// The server's worker threads: each has its own backend connections.
    workers: usize,
    table: RwLock<Arc<Table>>,
    pub counters: Arc<Counters>,
    /// What `stats` reports of the client's commands.
    pub tally: Tally,
    handle: tokio::runtime::Handle,
    runtime: Mutex<Option<tokio::runtime::Runtime>>,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router").field("path", &self.path).finish()
    }
}

impl Router {
    /// Loads `path` and starts the router's runtime, for a server of `workers` worker
    /// threads. The workers' runtimes carry the jobs and the probes of the servers they
    /// mark down; the router's own (one thread) carries a job submitted from outside any
    /// runtime (`Router::submit`).
    pub fn start(path: &Path, workers: usize) -> std::result::Result<Router, String> {
        let plan = config::load(path)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("memkit-route")
            .enable_all()
            .build()
            .map_err(|e| format!("router: runtime: {e}"))?;
        let table = {
            let _in_runtime = runtime.enter();
            Table::build(plan, None, workers)?
        };
        Ok(Router {
            path: path.to_path_buf(),
            workers,
            table: RwLock::new(Arc::new(table)),
            counters: Arc::default(),
            tally: Tally::new(workers),
            handle: runtime.handle().clone(),
            runtime: Mutex::new(Some(runtime)),
        })
    }

    /// Reads the file again and, if it is good, routes by it from the next job on; a bad
    /// file keeps the routes in force. Returns what happened, for the log.
    pub fn reload(&self) -> std::result::Result<String, String> {
        let built = config::load(&self.path).and_then(|plan| {
            let _in_runtime = self.handle.enter();
            Table::build(plan, Some(&self.table()), self.workers)
        });
        match built {
            Ok(t) => {
                let msg = format!(
                    "router: {} reloaded: {} pools, {} routes",
                    self.path.display(),
                    t.pools.len(),
                    t.routes.len()
                );
                *self.table.write() = Arc::new(t);
                self.counters.reloads.fetch_add(1, Relaxed);
                Ok(msg)
            }
            Err(e) => {
                self.counters.reload_failures.fetch_add(1, Relaxed);
                Err(format!("router: {e}; keeping the routes in force"))
            }
        }
    }

    /// The routes in force.
    pub fn table(&self) -> Arc<Table> {
        self.table.read().clone()
    }

    /// Carries out `job`, then calls `done`. Failures are outcomes (each request answers
    /// its own), so `done` always reports success. The job starts on the calling thread,
    /// which writes the requests to the backends, and goes on when woken on the calling
    /// thread's runtime: a worker's, where its backend connections' replies arrive
    /// ([`pool`]), so a routed request crosses no thread; else the router's (`JobTask`).
    pub fn submit(&self, job: &mut Job, done: Completer) {
        let task = Arc::new(JobTask {
            fut: Mutex::new(Some(self.job(job, done))),
            scheduled: AtomicBool::new(false),
            handle: tokio::runtime::Handle::try_current().unwrap_or_else(|_| self.handle.clone()),
        });
        let _in_runtime = task.handle.enter();
        task.poll();
    }

    /// [`Router::submit`]'s work as a future, for a caller that awaits it in a task of its
    /// own (a connection's task, which has nothing else to do meanwhile): no task is made
    /// for the job, nor spawned each time a backend's reply wakes it.
    pub fn job(&self, job: &mut Job, done: Completer) -> JobFuture {
        let ops = std::mem::take(&mut job.ops);
        job.bytes = 0;
        let slot = job.done.clone();
        let table = self.table();
        let counters = self.counters.clone();
        counters.jobs.add(1);
        counters.ops.add(ops.len() as u64);
        Box::pin(async move {
            let out = run::run(&table, &counters, ops).await;
            *slot.lock() = out;
            done.complete(Ok(()));
        })
    }

    /// Stops the runtime (its connections to the backends close).
    pub fn stop(&self) {
        if let Some(rt) = self.runtime.lock().take() {
            rt.shutdown_background();
        }
    }
}
