//! A pool of backend servers: their clients (memkit-client's pipelined connections), the
//! placement of keys on them, and each server's health and counters.
//!
//! Health (mcrouter's TKO, "technical knock-out"): a server whose requests fail
//! [`PoolSpec::tko_after`] times in a row (refused, reset, timed out) is marked down; its
//! requests then fail at once, without waiting for a timeout, and a background probe sends
//! it `version` every [`PoolSpec::probe`] until it answers. A reply of any kind, an error
//! reply included, proves the server is up.
//!
//! A connection the server closed while it sat idle (`-o idle_timeout`, a restart, a NAT's
//! timeout) fails the first request sent on it. Such a failure, where every command of the
//! batch failed on the connection before any reply, is retried on the pool's next connection
//! (each a new one if it died too, once a connection of the pool) when no command of the
//! batch could change the outcome by running twice (reads, `set`, `touch`): so a server idle
//! for hours answers the first request (memcached proxy's #1247).
//!
//! Each worker thread has its own clients, so its own connections to every server (as
//! mcrouter's proxy threads do): a connection's reader task runs on the runtime that opened
//! it, and a worker's jobs then send, receive and finish on the worker's thread, with no
//! wake-up of another. A probe runs on the worker that marked its server down, with that
//! worker's clients. Threads that are not workers (the router's own runtime, an embedder's
//! server) share one more set ([`PerWorker`]). Health is the server's, shared; its counters
//! are kept a copy a worker.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use memkit_client::{Client, Outcome, Placement};
use memkit_protocol::Command;
use memkit_types::{Error, Result, StoreMode};

use super::config::PoolSpec;

/// Latency histogram buckets: bucket `i` counts batches that took below `2^i` µs.
const BUCKETS: usize = 28;

/// One backend server's state and counters.
#[derive(Debug)]
pub struct Server {
    failures: AtomicU32,
    down: AtomicBool,
    /// Times it was marked down.
    pub tko_events: AtomicU64,
    /// Summed when read.
    counts: PerWorker<Counts>,
}

/// One thread's counters of a [`Server`].
#[derive(Debug, Default)]
#[repr(align(128))]
struct Counts {
    /// Commands sent, and those that failed (unreachable, timed out, marked down).
    requests: AtomicU64,
    errors: AtomicU64,
    /// Batches by round-trip time.
    latency: [AtomicU64; BUCKETS],
}

impl Server {
    /// A server's state, for `workers` worker threads.
    pub fn new(workers: usize) -> Server {
        Server {
            failures: AtomicU32::new(0),
            down: AtomicBool::new(false),
            tko_events: AtomicU64::new(0),
            counts: PerWorker::new(workers, Counts::default),
        }
    }

    /// Whether it is marked down now.
    pub fn is_down(&self) -> bool {
        self.down.load(Relaxed)
    }

    /// This thread's counters.
    fn mine(&self) -> &Counts {
        self.counts.mine().0
    }

    /// A counter summed over the threads' copies.
    fn sum(&self, c: impl Fn(&Counts) -> &AtomicU64) -> u64 {
        self.counts.all().iter().map(|s| c(s).load(Relaxed)).sum()
    }

    /// Commands sent to it.
    pub fn requests(&self) -> u64 {
        self.sum(|c| &c.requests)
    }

    /// Commands that failed (unreachable, timed out, marked down).
    pub fn errors(&self) -> u64 {
        self.sum(|c| &c.errors)
    }

    fn record(&self, took: Duration) {
        let us = took.as_micros().max(1) as u64;
        let b = (64 - us.leading_zeros() as usize).min(BUCKETS - 1);
        self.mine().latency[b].fetch_add(1, Relaxed);
    }

    /// The upper bound (µs) of the bucket holding quantile `q` of batch round trips, or 0
    /// before any.
    pub fn latency_quantile_us(&self, q: f64) -> u64 {
        let counts: Vec<u64> = (0..BUCKETS).map(|b| self.sum(|c| &c.latency[b])).collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return 0;
        }
        let want = ((total as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= want {
                return 1 << i;
            }
        }
        1 << (BUCKETS - 1)
    }
}

thread_local! {
    /// The worker this thread is ([`set_worker`]), if it is one.
    static WORKER: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Marks this thread as worker `i`: its jobs use the pools' `i`th clients.
pub fn set_worker(i: usize) {
    WORKER.with(|w| w.set(Some(i)));
}

/// A value kept a copy a worker thread, and one more that every other thread shares (the
/// router's runtime, an embedder's server): a pool's clients, and the counters each request
/// adds to, which two workers would otherwise pass between their cores at every request.
#[derive(Debug)]
pub struct PerWorker<T>(Box<[T]>);

impl<T> PerWorker<T> {
    /// Copies for `workers` worker threads and the rest, each made by `make`.
    pub fn new(workers: usize, mut make: impl FnMut() -> T) -> PerWorker<T> {
        PerWorker((0..=workers).map(|_| make()).collect())
    }

    /// This thread's copy ([`set_worker`]), and whether this thread alone uses it (a
    /// worker's does; the shared one does not).
    pub fn mine(&self) -> (&T, bool) {
        let shared = self.0.len() - 1;
        match WORKER.with(Cell::get) {
            Some(w) if w < shared => (&self.0[w], true),
            _ => (&self.0[shared], false),
        }
    }

    /// Every copy.
    pub fn all(&self) -> &[T] {
        &self.0
    }
}

/// A pool: see the module docs.
pub struct Pool {
    pub spec: PoolSpec,
    /// A set of clients (one a server) for each worker, and one for every other thread.
    clients: PerWorker<Vec<Client>>,
    pub placement: Placement,
    pub servers: Vec<Server>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool").field("spec", &self.spec).finish()
    }
}

impl Pool {
    /// The pool of `spec`, with clients for `workers` worker threads and the rest.
    pub fn new(spec: PoolSpec, workers: usize) -> std::result::Result<Pool, String> {
        let config = spec.client_config()?;
        let clients = PerWorker::new(workers, || {
            spec.servers
                .iter()
                .map(|s| Client::new(s.clone(), config.clone()))
                .collect()
        });
        Ok(Pool {
            placement: Placement::build(spec.placement, &spec.servers, &[]),
            servers: spec.servers.iter().map(|_| Server::new(workers)).collect(),
            clients,
            spec,
        })
    }

    /// This thread's clients: its worker's, or the shared set.
    fn clients(&self) -> &[Client] {
        self.clients.mine().0
    }

    /// The server `key` belongs on (the placement never leaves a server out: a marked-down
    /// one's requests fail, and the route decides where they go instead).
    pub fn server_for(&self, key: &[u8]) -> usize {
        self.placement.server_for(key).unwrap_or(0)
    }

    /// [`Pool::server_for`] of each key, the keys hashed together (a multi-get's).
    pub fn servers_of(&self, keys: &[&[u8]]) -> Vec<usize> {
        let mut out = Vec::with_capacity(keys.len());
        self.placement.servers_of(keys, &mut out);
        out.into_iter().map(|s| s.unwrap_or(0)).collect()
    }

    /// Up to `n` distinct servers for `key`, its own first.
    pub fn servers_for(&self, key: &[u8], n: usize) -> Vec<usize> {
        self.placement.servers_for(key, n)
    }

    /// Sends `cmds` to server `i` in order and returns their outcomes (see the module docs
    /// for what a failure does to the server's health).
    pub async fn pipeline(
        self: &Arc<Self>,
        i: usize,
        cmds: &[Command<'_>],
    ) -> Vec<Result<Outcome>> {
        let server = &self.servers[i];
        let counts = server.mine();
        counts.requests.fetch_add(cmds.len() as u64, Relaxed);
        if server.is_down() {
            counts.errors.fetch_add(cmds.len() as u64, Relaxed);
            let e = Error::Io(format!("{} is marked down", self.spec.servers[i]));
            return vec![Err(e); cmds.len()];
        }
        let start = Instant::now();
        let client = &self.clients()[i];
        let mut out = client.pipeline(cmds).await;
        // Once on each pooled connection: all may have died unseen at once.
        let mut tries = self.spec.connections;
        while tries > 0 && connection_failed(&out) && cmds.iter().all(repeatable) {
            out = client.pipeline(cmds).await;
            tries -= 1;
        }
        server.record(start.elapsed());
        let failed = out
            .iter()
            .filter(|r| r.as_ref().is_err_and(Error::is_unavailable))
            .count();
        if failed > 0 {
            server.mine().errors.fetch_add(failed as u64, Relaxed);
        }
        // Read before written: a line both workers only read stays in both caches.
        if failed == 0 {
            if server.failures.load(Relaxed) != 0 {
                server.failures.store(0, Relaxed);
            }
        } else if failed == out.len() {
            let n = server.failures.fetch_add(1, Relaxed) + 1;
            if n >= self.spec.tko_after && !server.down.swap(true, Relaxed) {
                server.tko_events.fetch_add(1, Relaxed);
                tracing::warn!(
                    "router: pool {} server {} marked down after {n} failures",
                    self.spec.name,
                    self.spec.servers[i]
                );
                tokio::spawn(self.clone().probe(i));
            }
        }
        out
    }

    /// Probes a marked-down server until it answers, then marks it up.
    async fn probe(self: Arc<Self>, i: usize) {
        loop {
            tokio::time::sleep(self.spec.probe).await;
            if Arc::strong_count(&self) == 1 {
                return; // the pool was replaced by a reload
            }
            if self.clients()[i].version().await.is_ok() {
                let s = &self.servers[i];
                s.failures.store(0, Relaxed);
                s.down.store(false, Relaxed);
                tracing::info!(
                    "router: pool {} server {} is back",
                    self.spec.name,
                    self.spec.servers[i]
                );
                return;
            }
        }
    }
}

/// Every command failed on the connection (none was answered): the connection, not the
/// server's reply, failed.
fn connection_failed(out: &[Result<Outcome>]) -> bool {
    !out.is_empty() && out.iter().all(|r| matches!(r, Err(Error::Io(_))))
}

/// Whether running `cmd` twice answers as running it once would.
fn repeatable(cmd: &Command<'_>) -> bool {
    match cmd {
        Command::Get { opts, .. } => opts.vivify.is_none() && opts.recache_below.is_none(),
        Command::Store { opts, .. } => opts.mode == StoreMode::Set && opts.cas.is_none(),
        Command::Touch { .. } | Command::Flush { .. } => true,
        Command::Delete { .. } | Command::Arith { .. } => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_quantiles_come_from_the_buckets() {
        let s = Server::new(2);
        assert_eq!(s.latency_quantile_us(0.5), 0);
        for _ in 0..9 {
            s.record(Duration::from_micros(100)); // below 128
        }
        s.record(Duration::from_millis(5)); // below 8192
        assert_eq!(s.latency_quantile_us(0.5), 128);
        assert_eq!(s.latency_quantile_us(0.99), 8192);
    }
}
