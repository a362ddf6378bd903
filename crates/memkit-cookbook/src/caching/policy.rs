//! What a caller asks of one cached value: how long it is fresh, how a rebuild is protected
//! from the dog-pile, XFetch, TTL jitter, tags, replica lag, and copies (hot-key
//! duplication, replicated important keys).

use std::borrow::Cow;
use std::time::Duration;

/// The most copies [`Copies`] keeps of one value (a copy's suffix is at most `#31`, or `#511`
/// when the cache's placement chooses the names).
pub const MAX_COPIES: usize = 32;

/// How many copies of a value the cache keeps, and how it reads them (see
/// `docs/cookbook/caching-hot-keys.md`). Copy `i` of cache key `key` is the memcached key
/// [`copy_key`]`(key, i)` = `<key>#<i>`, unless the cache has a placement
/// ([`CacheBuilder::placement`](super::CacheBuilder::placement)), which picks names
/// `<key>#<j>` on distinct servers ([`Cache::item_keys`](super::Cache::item_keys)); the cache
/// writes every copy, deletes every copy, and protects the rebuild with one lock on the
/// logical `key`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Copies {
    /// One item under `key` itself.
    #[default]
    One,
    /// Hot-key duplication: `n` copies `<key>#0` .. `<key>#{n-1}`; a read asks one copy
    /// chosen at random (spreading a hot key's reads over the servers the copies land on),
    /// and only when that copy is missing, the others (one multi-get).
    Hot(usize),
    /// Replicated important keys: `n` copies; a read asks `<key>#0` and only when it is
    /// missing (evicted, or its server is down) the others, taking the first present in
    /// copy order (one multi-get).
    Replicas(usize),
}

impl Copies {
    /// How many items one value occupies (1 ..= [`MAX_COPIES`]).
    pub fn count(self) -> usize {
        match self {
            Copies::One => 1,
            Copies::Hot(n) | Copies::Replicas(n) => n.clamp(1, MAX_COPIES),
        }
    }
}

/// The memcached key `<key>#<i>`: copy `i` of cache key `key` by default, a candidate name
/// for a placement. Keep `key` at most 247 bytes when it has copies, 246 with a placement
/// (memcached keys are at most 250 bytes; the cache checks).
pub fn copy_key(key: &str, i: usize) -> String {
    format!("{key}#{i}")
}

/// How a rebuild of an expired value is protected from the dog-pile (seed 003's
/// "одновременное перестроение кэшей"; cache stampede).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protection {
    /// Plain cache-aside: every caller that finds the value missing or expired runs the
    /// loader. The item's memcached TTL is the freshness TTL.
    None,
    /// Soft expiry + rebuild lock (seed 003): the value carries its own "valid until", the
    /// item lives `grace` longer in memcached, and on soft expiry one caller wins the
    /// rebuild lock (`add lock:<key>`, the part-1 [`Lock`](crate::Lock)) and recomputes while
    /// the others wait or are served the stale value ([`OnBusy`]).
    #[default]
    Lock,
    /// Server-side leases (memcached 1.6 meta protocol, memkitd): `mg <key> N<lock_ttl>
    /// R<recache>` hands exactly one caller the win flag `W` — on a miss (the server creates
    /// an empty placeholder), when the remaining TTL drops below the recache window, or when
    /// the item was marked stale (`md <key> I`) — and tells the others `Z` (someone is on it)
    /// and `X` (stale). No lock key. Needs a backend that speaks meta (the embedded store,
    /// memkitd, memcached >= 1.6 through the meta dialect of the client).
    Lease,
}

/// What a caller that did not win the rebuild does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnBusy {
    /// Wait (bounded, polling with linear back-off) for the winner's value; when the wait
    /// runs out, take the stale value if there is one.
    #[default]
    Wait,
    /// Return the stale value at once when there is one (wait only when there is none).
    ServeStale,
}

/// What a waiter does when [`WaitOptions::max_wait`] runs out and there is no stale value to
/// serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnTimeout {
    /// Keep polling and contending for the rebuild lock (or lease) for up to `lock_ttl` + 1 s
    /// more, then fail with [`Error::LockTimeout`](crate::Error). A winner that is merely slow
    /// delivers its value meanwhile; a winner that died leaves a lock that expires within
    /// `lock_ttl`, and exactly one waiter wins it and loads. One load per lock period, whatever
    /// the number of waiters.
    #[default]
    Contend,
    /// Fail with [`Error::LockTimeout`](crate::Error) at once.
    Fail,
    /// Run the loader anyway. Every waiter that times out loads: for a cold key whose loader
    /// is slower than `max_wait`, or whose winner died, that is the dog-pile the lock exists
    /// to prevent. Only for callers that must have a value from a source that can take it.
    Compute,
}

/// Bounds of waiting for someone else's rebuild.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitOptions {
    /// The longest a caller waits in total (seed 003: "2-3 seconds"). Counted as time slept.
    pub max_wait: Duration,
    /// The k-th poll sleeps `k * backoff_step`...
    pub backoff_step: Duration,
    /// ...but never more than this.
    pub max_backoff: Duration,
    /// Seconds the rebuild lock (or the lease placeholder) lives if its holder dies; longer
    /// than the slowest loader.
    pub lock_ttl: u32,
    /// When waiting runs out and there is no stale value ([`OnTimeout`]).
    pub on_timeout: OnTimeout,
}

impl WaitOptions {
    /// How long a waiter without a stale value keeps trying: `max_wait`, plus `lock_ttl` and
    /// a second of memcached's expiry granularity under [`OnTimeout::Contend`].
    pub fn budget(&self) -> Duration {
        match self.on_timeout {
            OnTimeout::Contend => {
                self.max_wait + Duration::from_secs(u64::from(self.lock_ttl.max(1)) + 1)
            }
            OnTimeout::Fail | OnTimeout::Compute => self.max_wait,
        }
    }
}

impl Default for WaitOptions {
    fn default() -> Self {
        WaitOptions {
            max_wait: Duration::from_secs(3),
            backoff_step: Duration::from_millis(10),
            max_backoff: Duration::from_millis(100),
            lock_ttl: 10,
            on_timeout: OnTimeout::Contend,
        }
    }
}

/// The per-value caching policy. Build with [`Policy::ttl`] and the chained setters.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// How long a value is fresh.
    pub ttl: Duration,
    /// With [`Protection::Lock`]: how much longer than `ttl` the item stays in memcached,
    /// serving as the stale value during a rebuild. `None`: `max(ttl, 60 s)`.
    pub grace: Option<Duration>,
    /// TTL jitter: `ttl` is multiplied by a factor drawn uniformly from this range, so keys
    /// written together do not expire together (seed 004: `rand(950, 1050) / 1000`).
    /// `None`: no jitter.
    pub jitter: Option<(f64, f64)>,
    /// Dog-pile protection.
    pub protection: Protection,
    /// What losers of the rebuild race do.
    pub on_busy: OnBusy,
    /// Waiting bounds and the lock TTL.
    pub wait: WaitOptions,
    /// XFetch (Vattani, Chierichetti, Lowenstein, VLDB 2015; seed 004): recompute a still
    /// fresh value early when `now - delta * beta * ln(rand()) >= valid_until`, where `delta`
    /// is how long the last recompute took. `beta > 1` favours earlier recomputes.
    /// With [`Protection::Lock`] the early recompute takes the lock (others keep being
    /// served the still-fresh value); with [`Protection::None`] it is the paper's plain
    /// algorithm. Not used with [`Protection::Lease`], whose recache window plays that role.
    pub xfetch_beta: Option<f64>,
    /// Tags whose invalidation drops this value.
    pub tags: Vec<String>,
    /// The DB's replication lag: when set, the loader is told to read the master while any
    /// tag was invalidated less than this long ago.
    pub replica_lag: Option<Duration>,
    /// With [`Protection::Lease`]: the `R` window in seconds (the first reader once the
    /// remaining TTL is below it recomputes while others get the current value). `None`:
    /// a tenth of the TTL; no window when that is under 1 s or not shorter than the TTL.
    pub recache_window: Option<u32>,
    /// Copies of the value: hot-key duplication or replicas ([`Copies`]). With more than
    /// one copy, [`Protection::Lease`] acts as [`Protection::Lock`] (a server-side lease
    /// lives on one item and cannot cover the other copies).
    pub copies: Copies,
}

impl Policy {
    /// Fresh for `ttl`, rebuild-lock protection, waiting, jitter `[0.95, 1.05]`.
    pub fn ttl(ttl: Duration) -> Self {
        Policy {
            ttl,
            grace: None,
            jitter: Some((0.95, 1.05)),
            protection: Protection::Lock,
            on_busy: OnBusy::Wait,
            wait: WaitOptions::default(),
            xfetch_beta: None,
            tags: Vec::new(),
            replica_lag: None,
            recache_window: None,
            copies: Copies::One,
        }
    }

    /// The same policy with another protection.
    pub fn protection(mut self, p: Protection) -> Self {
        self.protection = p;
        self
    }

    /// The same policy with another [`OnBusy`].
    pub fn on_busy(mut self, b: OnBusy) -> Self {
        self.on_busy = b;
        self
    }

    /// Serve stale values to the losers of the rebuild race.
    pub fn serve_stale(self) -> Self {
        self.on_busy(OnBusy::ServeStale)
    }

    /// The same policy with other waiting bounds.
    pub fn wait(mut self, w: WaitOptions) -> Self {
        self.wait = w;
        self
    }

    /// The longest a loser waits.
    pub fn max_wait(mut self, d: Duration) -> Self {
        self.wait.max_wait = d;
        self
    }

    /// What a loser without a stale value does when `max_wait` runs out.
    pub fn on_timeout(mut self, o: OnTimeout) -> Self {
        self.wait.on_timeout = o;
        self
    }

    /// The rebuild lock's (or lease placeholder's) TTL in seconds.
    pub fn lock_ttl(mut self, secs: u32) -> Self {
        self.wait.lock_ttl = secs;
        self
    }

    /// The stale window after soft expiry ([`Protection::Lock`]).
    pub fn grace(mut self, d: Duration) -> Self {
        self.grace = Some(d);
        self
    }

    /// No TTL jitter.
    pub fn no_jitter(mut self) -> Self {
        self.jitter = None;
        self
    }

    /// TTL jitter factor range `[lo, hi]`.
    pub fn jitter(mut self, lo: f64, hi: f64) -> Self {
        self.jitter = Some((lo.min(hi), lo.max(hi)));
        self
    }

    /// XFetch with `beta` (1.0 is the paper's default).
    pub fn xfetch(mut self, beta: f64) -> Self {
        self.xfetch_beta = Some(beta);
        self
    }

    /// The value's tags.
    pub fn tags<I, S>(mut self, tags: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.tags = tags.into_iter().map(Into::into).collect();
        self.tags.sort();
        self.tags.dedup();
        self
    }

    /// The DB replication lag for master routing.
    pub fn replica_lag(mut self, lag: Duration) -> Self {
        self.replica_lag = Some(lag);
        self
    }

    /// The lease recache window in seconds.
    pub fn recache_window(mut self, secs: u32) -> Self {
        self.recache_window = Some(secs);
        self
    }

    /// Hot-key duplication: keep `n` copies and read a random one ([`Copies::Hot`]);
    /// `n <= 1` means one item, more than [`MAX_COPIES`] is capped.
    pub fn hot_copies(mut self, n: usize) -> Self {
        self.copies = if n <= 1 { Copies::One } else { Copies::Hot(n) };
        self
    }

    /// Replicated important key: keep `n` copies and read the first present in order
    /// ([`Copies::Replicas`]); `n <= 1` means one item, more than [`MAX_COPIES`] is capped.
    pub fn replicas(mut self, n: usize) -> Self {
        self.copies = if n <= 1 {
            Copies::One
        } else {
            Copies::Replicas(n)
        };
        self
    }

    /// The memcached keys holding `key`'s value in a cache without a placement: `key` itself,
    /// or its copies `<key>#0` .. `<key>#{n-1}` (a cache's own names:
    /// [`Cache::item_keys`](super::Cache::item_keys)).
    pub fn item_keys(&self, key: &str) -> Vec<String> {
        match self.copies.count() {
            1 => vec![key.to_owned()],
            n => (0..n).map(|i| copy_key(key, i)).collect(),
        }
    }

    /// The policy the cache runs: with copies, leases become the rebuild lock.
    pub(crate) fn effective(&self) -> Cow<'_, Policy> {
        if self.copies.count() > 1 && self.protection == Protection::Lease {
            Cow::Owned(self.clone().protection(Protection::Lock))
        } else {
            Cow::Borrowed(self)
        }
    }

    pub(crate) fn grace_ms(&self) -> u64 {
        self.grace
            .unwrap_or_else(|| self.ttl.max(Duration::from_secs(60)))
            .as_millis() as u64
    }

    /// The `R` flag: only when the window is shorter than the TTL (a window as long as the
    /// TTL would hand out a recompute right after every write).
    pub(crate) fn recache_secs(&self, ttl_ms: u64) -> Option<u32> {
        let ttl_secs = ttl_ms / 1000;
        let w = u64::from(self.recache_window.unwrap_or((ttl_secs / 10) as u32));
        (w >= 1 && w < ttl_secs).then_some(w as u32)
    }
}
