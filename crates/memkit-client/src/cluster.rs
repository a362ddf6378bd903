//! [`Cluster`]: a pool of servers behind one [`Memcache`].
//!
//! - **Placement**: [`Distribution`] (ketama by default, or modula), see
//!   [`crate::distribution`]. `get_multi` groups keys by server and sends one pipelined
//!   batch per server, all servers concurrently.
//! - **Failover**: a call that cannot reach its server ([`Error::is_unavailable`]: refused,
//!   reset, timed out) is a **miss** for reads and an **error** for writes; it never hangs
//!   past the request timeout. After [`ClusterConfig::failure_limit`] consecutive failures
//!   the server is marked down for [`ClusterConfig::retry_interval`]: calls to it fail at
//!   once, and if [`ClusterConfig::remap_on_failure`] is on (the default for ketama, off for
//!   modula, as libmemcached's `AUTO_EJECT_HOSTS`) it is taken out of the ring so its keys
//!   go to the other servers until it is retried.
//! - **Gutter** ([`ClusterConfig::gutter`], Facebook NSDI'13 §3.2.3): calls whose server is
//!   unavailable go to a small spare pool instead, and values stored there live at most
//!   the gutter TTL, so they age out quickly once the real server is back.
//! - **Replicas** ([`Replicas`]; per key prefix, or per call with [`Cluster::replicated`]):
//!   a key is written to R distinct servers (its own, then the next distinct servers on the
//!   ring); reads ask them in that order and return the first hit; deletes go to all.
//!   Outcomes (and CAS values) reported are the first server's that answered.
//! - **Hot keys** ([`HotKeys`]): key `name` with K copies is stored as `name0` ..
//!   `name{K-1}`, copy i on the i-th distinct server of `name`'s ring walk (so copies sit
//!   on different servers whenever there are K live servers); writes and deletes go to
//!   every copy, a read picks one copy at random.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::task::Poll;
use std::time::{Duration, Instant};

use memkit_types::{
    ArithOptions, ArithOutcome, DeleteOptions, DeleteOutcome, Error, Exptime, GetOptions, Item,
    Memcache, Result, StoreOptions, Stored, validate_key,
};
use rand::Rng;

use crate::client::{Client, ClientConfig};
use crate::distribution::{Distribution, Placement, ServerSpec};

/// Replication policy: how many distinct servers hold a key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Replicas {
    /// Copies of keys no prefix rule matches (1: no replication).
    pub default: usize,
    /// `(key prefix, copies)`: the longest matching prefix wins.
    pub prefixes: Vec<(Vec<u8>, usize)>,
}

impl Replicas {
    fn for_key(&self, key: &[u8]) -> usize {
        self.prefixes
            .iter()
            .filter(|(p, _)| key.starts_with(p))
            .max_by_key(|(p, _)| p.len())
            .map_or(self.default, |&(_, n)| n)
            .max(1)
    }
}

/// Hot-key spreading: `(key prefix, copies)`; an exact key is a prefix too.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HotKeys {
    /// `(key prefix, copies)`: the longest matching prefix wins.
    pub rules: Vec<(Vec<u8>, usize)>,
}

impl HotKeys {
    fn copies(&self, key: &[u8]) -> usize {
        self.rules
            .iter()
            .filter(|(p, _)| key.starts_with(p))
            .max_by_key(|(p, _)| p.len())
            .map_or(1, |&(_, n)| n.max(1))
    }
}

/// The spare pool.
#[derive(Debug, Clone)]
pub struct Gutter {
    /// Its servers (placed with the cluster's distribution).
    pub servers: Vec<ServerSpec>,
    /// The longest TTL a value gets there (e.g. 10 s).
    pub ttl: Duration,
}

/// Settings of a [`Cluster`].
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// Key placement.
    pub distribution: Distribution,
    /// Settings of each server's connection pool.
    pub client: ClientConfig,
    /// Consecutive failures after which a server is marked down (2).
    pub failure_limit: u32,
    /// How long a down server is left alone before it is tried again (10 s).
    pub retry_interval: Duration,
    /// Take down servers out of the placement so their keys go elsewhere.
    pub remap_on_failure: bool,
    /// A spare pool for calls whose server is unavailable.
    pub gutter: Option<Gutter>,
    /// Replication policy.
    pub replicas: Replicas,
    /// Hot-key spreading.
    pub hot_keys: HotKeys,
}

impl ClusterConfig {
    /// Defaults for `distribution`: remapping on for ketama, off for modula.
    pub fn new(distribution: Distribution) -> Self {
        ClusterConfig {
            distribution,
            client: ClientConfig::default(),
            failure_limit: 2,
            retry_interval: Duration::from_secs(10),
            remap_on_failure: !matches!(distribution, Distribution::Modula { .. }),
            gutter: None,
            replicas: Replicas {
                default: 1,
                prefixes: Vec::new(),
            },
            hot_keys: HotKeys::default(),
        }
    }
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig::new(Distribution::Ketama)
    }
}

#[derive(Debug, Default)]
struct Health {
    failures: AtomicU32,
    down_until: Mutex<Option<Instant>>,
}

/// A server's state, as [`Cluster::health`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerHealth {
    /// The server.
    pub server: ServerSpec,
    /// Consecutive failed calls.
    pub failures: u32,
    /// Whether it is marked down now.
    pub down: bool,
}

struct Pool {
    servers: Vec<ServerSpec>,
    clients: Vec<Client>,
    health: Vec<Health>,
    /// The placement with every server up: never rebuilt ([`Memcache::home_server`]).
    home: Arc<Placement>,
    placement: RwLock<(Arc<Placement>, Option<Instant>)>,
}

impl Pool {
    fn new(servers: Vec<ServerSpec>, cfg: &ClusterConfig) -> Pool {
        let clients = servers
            .iter()
            .map(|s| Client::new(s.clone(), cfg.client.clone()))
            .collect();
        let home = Arc::new(Placement::build(cfg.distribution, &servers, &[]));
        Pool {
            health: servers.iter().map(|_| Health::default()).collect(),
            servers,
            clients,
            placement: RwLock::new((home.clone(), None)),
            home,
        }
    }
}

struct Inner {
    config: ClusterConfig,
    main: Pool,
    gutter: Option<Pool>,
}

/// A pool of servers; see the module docs. Cheap to clone.
#[derive(Clone)]
pub struct Cluster {
    inner: Arc<Inner>,
    replicas_override: Option<usize>,
}

impl fmt::Debug for Cluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cluster")
            .field("servers", &self.inner.main.servers)
            .field("distribution", &self.inner.config.distribution)
            .finish_non_exhaustive()
    }
}

/// Which pool and server a call goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Main(usize),
    Gutter(usize),
}

fn unavailable(server: &ServerSpec) -> Error {
    Error::Io(format!("{server} is marked down"))
}

impl Cluster {
    /// A cluster of `servers`; connections open lazily.
    pub fn new(servers: Vec<ServerSpec>, config: ClusterConfig) -> Cluster {
        let main = Pool::new(servers, &config);
        let gutter = config
            .gutter
            .as_ref()
            .filter(|g| !g.servers.is_empty())
            .map(|g| Pool::new(g.servers.clone(), &config));
        Cluster {
            inner: Arc::new(Inner {
                config,
                main,
                gutter,
            }),
            replicas_override: None,
        }
    }

    /// The same cluster, writing every key of calls made through it to `copies` servers
    /// (per-call replication policy).
    pub fn replicated(&self, copies: usize) -> Cluster {
        Cluster {
            inner: self.inner.clone(),
            replicas_override: Some(copies.max(1)),
        }
    }

    /// The configured servers.
    pub fn servers(&self) -> &[ServerSpec] {
        &self.inner.main.servers
    }

    /// The client of server `i` (for direct access, e.g. reading one server).
    pub fn client(&self, i: usize) -> &Client {
        &self.inner.main.clients[i]
    }

    /// The index of the server `key` maps to now (`memkit --which`).
    pub fn server_for(&self, key: &[u8]) -> Option<usize> {
        self.placement(&self.inner.main).server_for(key)
    }

    /// The servers' failure counts and down marks.
    pub fn health(&self) -> Vec<ServerHealth> {
        let now = Instant::now();
        let p = &self.inner.main;
        let _consistent_with_placement = p.placement.read().unwrap_or_else(|e| e.into_inner());
        p.servers
            .iter()
            .zip(&p.health)
            .map(|(s, h)| ServerHealth {
                server: s.clone(),
                failures: h.failures.load(Ordering::Relaxed),
                down: is_down(h, now),
            })
            .collect()
    }

    /// `stats [args]` of every server.
    pub async fn stats(&self, args: &str) -> Vec<(ServerSpec, Result<Vec<(String, String)>>)> {
        let p = &self.inner.main;
        let futs = p
            .clients
            .iter()
            .map(|c| Box::pin(c.stats(args)) as BoxFut<'_, _>)
            .collect();
        let res = join_all(futs).await;
        p.servers.iter().cloned().zip(res).collect()
    }

    /// `version` of every server.
    pub async fn versions(&self) -> Vec<(ServerSpec, Result<String>)> {
        let p = &self.inner.main;
        let futs = p
            .clients
            .iter()
            .map(|c| Box::pin(c.version()) as BoxFut<'_, _>)
            .collect();
        let res = join_all(futs).await;
        p.servers.iter().cloned().zip(res).collect()
    }

    fn pool(&self, t: Target) -> (&Pool, usize) {
        match t {
            Target::Main(i) => (&self.inner.main, i),
            Target::Gutter(i) => (self.inner.gutter.as_ref().expect("gutter target"), i),
        }
    }

    /// The current placement of `pool`, rebuilt when a down server's retry time passed.
    fn placement(&self, pool: &Pool) -> Arc<Placement> {
        {
            let g = pool.placement.read().unwrap_or_else(|e| e.into_inner());
            if g.1.is_none_or(|t| Instant::now() < t) {
                return g.0.clone();
            }
        }
        self.rebuild(pool)
    }

    /// Rebuilds under the write lock, so that concurrent rebuilds cannot publish a
    /// placement computed from older down marks after a newer one.
    fn rebuild(&self, pool: &Pool) -> Arc<Placement> {
        let mut slot = pool.placement.write().unwrap_or_else(|e| e.into_inner());
        self.rebuild_locked(pool, &mut slot)
    }

    fn rebuild_locked(
        &self,
        pool: &Pool,
        slot: &mut (Arc<Placement>, Option<Instant>),
    ) -> Arc<Placement> {
        let now = Instant::now();
        let cfg = &self.inner.config;
        let (live, next): (Vec<bool>, Option<Instant>) = if cfg.remap_on_failure {
            let downs: Vec<Option<Instant>> = pool
                .health
                .iter()
                .map(|h| *h.down_until.lock().unwrap_or_else(|e| e.into_inner()))
                .map(|d| d.filter(|&t| t > now))
                .collect();
            (
                downs.iter().map(Option::is_none).collect(),
                downs.iter().flatten().min().copied(),
            )
        } else {
            (Vec::new(), None)
        };
        let p = Arc::new(Placement::build(cfg.distribution, &pool.servers, &live));
        *slot = (p.clone(), next);
        p
    }

    fn record(&self, t: Target, res: &Result<impl Sized>) {
        let (pool, i) = self.pool(t);
        let h = &pool.health[i];
        match res {
            Err(e) if e.is_unavailable() => {
                let n = h.failures.fetch_add(1, Ordering::Relaxed) + 1;
                if n >= self.inner.config.failure_limit.max(1) {
                    let until = Instant::now() + self.inner.config.retry_interval;
                    if self.inner.config.remap_on_failure {
                        // Mark and republish under the placement lock: whoever sees the
                        // server down (`health` reads under the same lock) also sees a
                        // placement without it.
                        let mut slot = pool.placement.write().unwrap_or_else(|e| e.into_inner());
                        *h.down_until.lock().unwrap_or_else(|e| e.into_inner()) = Some(until);
                        self.rebuild_locked(pool, &mut slot);
                    } else {
                        *h.down_until.lock().unwrap_or_else(|e| e.into_inner()) = Some(until);
                    }
                }
            }
            _ => {
                if h.failures.load(Ordering::Relaxed) != 0 {
                    h.failures.store(0, Ordering::Relaxed);
                }
            }
        }
    }

    /// Runs `f` on server `t` unless it is marked down; records the outcome.
    async fn on<T, F, Fut>(&self, t: Target, f: F) -> Result<T>
    where
        F: FnOnce(Client) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let (pool, i) = self.pool(t);
        if is_down(&pool.health[i], Instant::now()) {
            return Err(unavailable(&pool.servers[i]));
        }
        let res = f(pool.clients[i].clone()).await;
        self.record(t, &res);
        res
    }

    /// The servers holding `key` (primary first) in the main pool.
    fn targets(&self, key: &[u8], copies: usize) -> Vec<Target> {
        let p = self.placement(&self.inner.main);
        p.servers_for(key, copies)
            .into_iter()
            .map(Target::Main)
            .collect()
    }

    fn gutter_target(&self, key: &[u8]) -> Option<Target> {
        let g = self.inner.gutter.as_ref()?;
        self.placement(g).server_for(key).map(Target::Gutter)
    }

    fn replicas(&self, key: &[u8]) -> usize {
        self.replicas_override
            .unwrap_or_else(|| self.inner.config.replicas.for_key(key))
    }

    /// The keys and servers of every copy of `key`: hot-key copies, or replicas.
    fn placements(&self, key: &[u8]) -> Result<Vec<(Vec<u8>, Target)>> {
        let hot = self.inner.config.hot_keys.copies(key);
        if hot > 1 {
            let servers = self.targets(key, hot);
            if servers.is_empty() {
                return Err(Error::NoServer);
            }
            (0..hot)
                .map(|i| {
                    let name = [key, i.to_string().as_bytes()].concat();
                    validate_key(&name)?;
                    Ok((name, servers[i % servers.len()]))
                })
                .collect()
        } else {
            let servers = self.targets(key, self.replicas(key));
            if servers.is_empty() {
                return Err(Error::NoServer);
            }
            Ok(servers.into_iter().map(|t| (key.to_vec(), t)).collect())
        }
    }

    /// A write to every copy of `key`; the first answered result wins. A copy whose server is
    /// unavailable is written to the gutter pool (with `gutter_op`) when there is one.
    async fn write_all<T, F, Fut>(&self, key: &[u8], op: F) -> Result<T>
    where
        T: Send,
        F: Fn(Client, Vec<u8>, bool) -> Fut + Sync,
        Fut: Future<Output = Result<T>> + Send,
    {
        validate_key(key)?;
        let copies = self.placements(key)?;
        let futs = copies
            .into_iter()
            .map(|(name, t)| {
                let op = &op;
                Box::pin(async move {
                    let res = self.on(t, |c| op(c, name.clone(), false)).await;
                    match (res, self.gutter_target(&name)) {
                        (Err(e), Some(g)) if e.is_unavailable() => {
                            self.on(g, |c| op(c, name, true)).await
                        }
                        (res, _) => res,
                    }
                }) as Pin<Box<dyn Future<Output = Result<T>> + Send + '_>>
            })
            .collect();
        let mut first_err = None;
        for r in join_all(futs).await {
            match r {
                Ok(v) => return Ok(v),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        Err(first_err.unwrap_or(Error::NoServer))
    }

    fn gutter_exptime(&self, e: Exptime) -> Exptime {
        let Some(g) = &self.inner.config.gutter else {
            return e;
        };
        let cap = g.ttl.as_secs().clamp(1, 2_592_000) as i64;
        match e.0 {
            0 => Exptime(cap),
            t if t > 0 && t <= 2_592_000 => Exptime(t.min(cap)),
            t if t > 0 => Exptime(cap.min((t - unix_now()).max(1))),
            t => Exptime(t),
        }
    }

    /// Reads one key: a hot key's random copy, or the replicas in ring order until one has
    /// it; a copy whose server is unavailable is passed over (as is `skip`, already asked:
    /// `true` if it was unavailable), and the gutter is asked last.
    async fn read_one(
        &self,
        key: &[u8],
        opts: &GetOptions,
        skip: Option<(Target, bool)>,
    ) -> Result<Option<Item>> {
        let mut copies = self.placements(key)?;
        let hot = self.inner.config.hot_keys.copies(key) > 1;
        if hot {
            let pick = rand::rng().random_range(0..copies.len());
            copies.rotate_left(pick);
        }
        let mut down = None;
        for (name, t) in copies {
            if let Some((s, was_down)) = skip
                && s == t
            {
                if was_down {
                    down.get_or_insert(name);
                }
                continue;
            }
            let n = &name;
            match self
                .on(t, |c| async move { c.get_with(n, opts).await })
                .await
            {
                Ok(Some(item)) => return Ok(Some(item)),
                Ok(None) if hot => return Ok(None),
                Ok(None) => {}
                Err(e) if e.is_unavailable() => {
                    down.get_or_insert(name);
                }
                Err(e) => return Err(e),
            }
        }
        if let Some(name) = down
            && let Some(g) = self.gutter_target(&name)
        {
            return Ok(self
                .on(g, |c| async move { c.get_with(&name, opts).await })
                .await
                .unwrap_or(None));
        }
        Ok(None)
    }
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn is_down(h: &Health, now: Instant) -> bool {
    h.down_until
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .is_some_and(|t| t > now)
}

/// Keys of one server's batch: (position in the caller's list, key as sent).
type Batch = Vec<(usize, Vec<u8>)>;

type BoxFut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Polls every future concurrently until all are done (results in order).
async fn join_all<'a, T>(futs: Vec<BoxFut<'a, T>>) -> Vec<T> {
    let mut futs: Vec<Option<BoxFut<'a, T>>> = futs.into_iter().map(Some).collect();
    let mut out: Vec<Option<T>> = futs.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, o) in futs.iter_mut().zip(out.iter_mut()) {
            if let Some(fut) = f {
                match fut.as_mut().poll(cx) {
                    Poll::Ready(v) => {
                        *o = Some(v);
                        *f = None;
                    }
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    out.into_iter()
        .map(|o| o.expect("every future finished"))
        .collect()
}

impl Memcache for Cluster {
    fn home_server(&self, key: &[u8]) -> Option<usize> {
        self.inner.main.home.server_for(key)
    }

    async fn get_multi(&self, keys: &[&[u8]], opts: &GetOptions) -> Result<Vec<Option<Item>>> {
        for k in keys {
            validate_key(k)?;
        }
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        // First pass: one copy per key, grouped per server, one batch per server.
        let mut groups: Vec<(Target, Batch)> = Vec::new();
        let mut out: Vec<Option<Item>> = vec![None; keys.len()];
        let mut retry: Vec<(usize, Option<(Target, bool)>)> = Vec::new();
        for (i, key) in keys.iter().enumerate() {
            let mut copies = match self.placements(key) {
                Ok(c) => c,
                Err(Error::NoServer) => continue,
                Err(e) => return Err(e),
            };
            let hot = self.inner.config.hot_keys.copies(key) > 1;
            let (name, t) = if hot {
                copies.swap_remove(rand::rng().random_range(0..copies.len()))
            } else {
                copies.swap_remove(0)
            };
            match groups.iter_mut().find(|(g, _)| *g == t) {
                Some((_, v)) => v.push((i, name)),
                None => groups.push((t, vec![(i, name)])),
            }
        }
        let futs = groups
            .iter()
            .map(|(t, batch)| {
                Box::pin(self.on(*t, move |c| async move {
                    let names: Vec<&[u8]> = batch.iter().map(|(_, n)| &n[..]).collect();
                    c.get_multi(&names, opts).await
                })) as BoxFut<'_, _>
            })
            .collect();
        let results: Vec<Result<Vec<Option<Item>>>> = join_all(futs).await;
        for ((t, batch), res) in groups.iter().zip(results) {
            match res {
                Ok(items) => {
                    for ((i, _), item) in batch.iter().zip(items) {
                        let replicated = self.replicas(keys[*i]) > 1;
                        if item.is_none() && replicated {
                            retry.push((*i, Some((*t, false))));
                        }
                        out[*i] = item;
                    }
                }
                Err(e) if e.is_unavailable() => {
                    retry.extend(batch.iter().map(|(i, _)| (*i, Some((*t, true)))));
                }
                Err(e) => return Err(e),
            }
        }
        // Second pass, rare: replicas and the gutter for what the first pass missed.
        if !retry.is_empty() {
            let futs = retry
                .iter()
                .map(|&(i, skip)| Box::pin(self.read_one(keys[i], opts, skip)) as BoxFut<'_, _>)
                .collect();
            for (&(i, _), res) in retry.iter().zip(join_all(futs).await) {
                out[i] = res?;
            }
        }
        Ok(out)
    }

    async fn store(&self, key: &[u8], value: &[u8], opts: &StoreOptions) -> Result<Stored> {
        self.write_all(key, |c, name, gutter| async move {
            if gutter {
                let o = StoreOptions {
                    exptime: self.gutter_exptime(opts.exptime),
                    ..opts.clone()
                };
                c.store(&name, value, &o).await
            } else {
                c.store(&name, value, opts).await
            }
        })
        .await
    }

    async fn delete_with(&self, key: &[u8], opts: &DeleteOptions) -> Result<DeleteOutcome> {
        validate_key(key)?;
        let copies = self.placements(key)?;
        let futs = copies
            .into_iter()
            .map(|(name, t)| {
                Box::pin(async move {
                    let n = &name;
                    let res = self
                        .on(t, |c| async move { c.delete_with(n, opts).await })
                        .await;
                    // A delete must also reach the gutter, or it would serve the old value.
                    if let Some(g) = self.gutter_target(n) {
                        let gres = self
                            .on(g, |c| async move { c.delete_with(n, opts).await })
                            .await;
                        if matches!(&res, Err(e) if e.is_unavailable()) {
                            return gres;
                        }
                    }
                    res
                }) as BoxFut<'_, _>
            })
            .collect();
        let mut best: Option<Result<DeleteOutcome>> = None;
        for r in join_all(futs).await {
            best = Some(match (best, r) {
                (_, Ok(DeleteOutcome::Deleted)) | (Some(Ok(DeleteOutcome::Deleted)), _) => {
                    Ok(DeleteOutcome::Deleted)
                }
                (Some(Ok(o)), _) => Ok(o),
                (_, r) => r,
            });
        }
        best.unwrap_or(Err(Error::NoServer))
    }

    async fn arithmetic(&self, key: &[u8], opts: &ArithOptions) -> Result<ArithOutcome> {
        self.write_all(
            key,
            |c, name, _| async move { c.arithmetic(&name, opts).await },
        )
        .await
    }

    async fn touch(&self, key: &[u8], exptime: Exptime) -> Result<bool> {
        self.write_all(key, |c, name, gutter| async move {
            let e = if gutter {
                self.gutter_exptime(exptime)
            } else {
                exptime
            };
            c.touch(&name, e).await
        })
        .await
    }

    async fn flush_all(&self, delay: u32) -> Result<()> {
        let mut pools = vec![&self.inner.main];
        pools.extend(self.inner.gutter.as_ref());
        let mut futs: Vec<BoxFut<'_, Result<()>>> = Vec::new();
        for (gi, p) in pools.iter().enumerate() {
            for i in 0..p.servers.len() {
                let t = if gi == 0 {
                    Target::Main(i)
                } else {
                    Target::Gutter(i)
                };
                futs.push(Box::pin(
                    self.on(t, move |c| async move { c.flush_all(delay).await }),
                ));
            }
        }
        // Every reachable server is flushed; the first failure is reported.
        join_all(futs).await.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_pick_the_longest_prefix() {
        let r = Replicas {
            default: 1,
            prefixes: vec![(b"session:".to_vec(), 3), (b"session:admin:".to_vec(), 2)],
        };
        assert_eq!(r.for_key(b"page:1"), 1);
        assert_eq!(r.for_key(b"session:42"), 3);
        assert_eq!(r.for_key(b"session:admin:1"), 2);
        let h = HotKeys {
            rules: vec![(b"front-page".to_vec(), 4)],
        };
        assert_eq!((h.copies(b"front-page"), h.copies(b"other")), (4, 1));
    }

    #[tokio::test]
    async fn empty_pool_is_no_server() {
        let c = Cluster::new(Vec::new(), ClusterConfig::default());
        assert_eq!(
            c.set(b"k", b"v", 0, Exptime::NEVER).await,
            Err(Error::NoServer)
        );
        assert_eq!(c.get(b"k").await, Ok(None));
        assert_eq!(c.server_for(b"k"), None);
    }
}
