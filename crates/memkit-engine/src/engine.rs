//! The engine: shards, configuration, time, and the synchronous command API.
//!
//! The engine turns memcached's wire-level time (expiry times relative or absolute, in
//! seconds) into its own clock: seconds since a private epoch, read from the injected
//! [`Clock`]. A key hashes to one shard; each command locks that one shard.

use std::hash::BuildHasher;
use std::sync::Arc;

use memkit_types::{
    ArithOptions, ArithOutcome, Clock, DEFAULT_ITEM_SIZE_MAX, DeleteOptions, DeleteOutcome, Error,
    Exptime, GetOptions, Item, MAX_KEY_LEN, Result, StoreMode, StoreOptions, Stored, SystemClock,
};
use parking_lot::Mutex;

use crate::hook::{Change, Flush, Record, StoreHook};
use crate::policy::EvictionPolicy;
use crate::shard::{ReadTimes, Shard, ShardConfig, Times};
use crate::stats::{EngineStats, class_sizes};
use crate::view::ItemView;

mod crawl;
mod flash;
mod restart;
pub use crawl::{CrawledItem, DumpCursor};
pub use restart::{WarmError, WarmRestored, WarmSaved};

/// The key hash: foldhash keyed end to end by a per-engine random seed, kept so that a warm
/// restart can rebuild the same key-to-shard mapping (and so the same CAS values) in a new
/// process.
///
/// End to end: the seed makes foldhash's shared seeds as well as its per-hasher one.
/// `foldhash::fast::FixedState` takes its shared seeds from public constants, and a key
/// whose input word cancels one of them (`x ^ seed == 0`) zeroes a folded multiply: every
/// 16-byte key whose last 8 bytes are that constant then had one 64-bit hash, whatever the
/// per-hasher seed, so a client could send keys that all share a shard, an index home and a
/// tag. With every constant derived from the secret seed, no input is known to cancel one
/// without the seed (`docs/limits.md`, "Keys chosen to collide", for what crowding costs).
#[derive(Clone, Debug)]
pub(crate) struct KeyHasher {
    seed: u64,
    shared: foldhash::SharedSeed,
}

impl KeyHasher {
    pub fn with_seed(seed: u64) -> KeyHasher {
        KeyHasher {
            seed,
            shared: foldhash::SharedSeed::from_u64(seed),
        }
    }

    /// The hasher with foldhash's public shared seeds, under which known keys collide in
    /// every bit: for tests of what the engine does with such keys.
    #[cfg(test)]
    pub fn with_public_shared_seed(seed: u64) -> KeyHasher {
        KeyHasher {
            seed,
            shared: foldhash::SharedSeed::global_fixed().clone(),
        }
    }
}

impl BuildHasher for KeyHasher {
    type Hasher = foldhash::fast::FoldHasher;

    #[inline]
    fn build_hasher(&self) -> Self::Hasher {
        foldhash::fast::FoldHasher::with_seed(self.seed, &self.shared)
    }
}

/// How the engine is built. `Default` is memcached's defaults: 64 MiB, 1 MiB items, evict.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// The memory limit in bytes (`-m`): everything the engine holds counts against it.
    pub memory_limit: usize,
    /// The largest item (`-I`), computed as memcached computes it.
    pub item_size_max: usize,
    /// Evict when full (default) or refuse stores with out-of-memory (`-M`).
    pub evict: bool,
    /// Number of shards (rounded up to a power of two); `None` picks from the budget.
    pub shards: Option<usize>,
    /// Which items to drop when memory is full: S3-FIFO (default) or SIEVE.
    pub eviction: EvictionPolicy,
    /// The time source.
    pub clock: Arc<dyn Clock>,
    /// A flash tier under RAM (memkitd's `-o ext_path`): large values RAM lets go are
    /// written there and their stubs kept.
    pub flash: Option<crate::flash::FlashTier>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            memory_limit: 64 << 20,
            item_size_max: DEFAULT_ITEM_SIZE_MAX,
            evict: true,
            shards: None,
            eviction: EvictionPolicy::default(),
            clock: Arc::new(SystemClock),
            flash: None,
        }
    }
}

impl EngineConfig {
    /// Default configuration with a memory limit of `bytes`.
    pub fn with_memory(bytes: usize) -> Self {
        EngineConfig {
            memory_limit: bytes,
            ..Default::default()
        }
    }

    /// The same configuration on another clock.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The same configuration with another eviction policy.
    pub fn eviction(mut self, policy: EvictionPolicy) -> Self {
        self.eviction = policy;
        self
    }
}

/// What an eviction reports to the hook.
#[derive(Debug, Clone, Copy)]
pub struct Evicted<'a> {
    /// The key.
    pub key: &'a [u8],
    /// Whether it was ever read.
    pub fetched: bool,
    /// Remaining TTL in seconds; `None` for never.
    pub ttl: Option<u32>,
    /// Seconds since its segment was written (an upper bound of its age).
    pub age: u32,
    /// Stored size.
    pub size: usize,
}

/// A callback run for every evicted item, inside the shard lock: keep it cheap and never
/// call back into the engine.
#[derive(Clone)]
pub struct EvictHook(Arc<dyn Fn(&Evicted<'_>) + Send + Sync>);

impl EvictHook {
    pub(crate) fn call(&self, e: &Evicted<'_>) {
        (self.0)(e)
    }
}

impl std::fmt::Debug for EvictHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EvictHook")
    }
}

/// What [`Engine::prefetch`] loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prefetch {
    /// The key's index bucket.
    Bucket,
    /// The record of the first entry in the key's bucket run whose tag matches: the key's,
    /// unless another key shares the tag.
    Record,
}

/// Padded so that two shards' locks never share a cache line.
#[repr(align(128))]
#[derive(Debug)]
struct Padded(Mutex<Shard>);

/// The in-process store. Thread-safe; share it with an `Arc`.
#[derive(Debug)]
pub struct Engine {
    shards: Box<[Padded]>,
    shard_mask: u64,
    hasher: KeyHasher,
    hash_seed: u64,
    clock: Arc<dyn Clock>,
    /// Unix second that engine time counts from. Two seconds before start-up, so that engine
    /// time is always >= 2 and an exptime of 1 means "already expired".
    epoch: u64,
    item_size_max: usize,
    memory_limit: std::sync::atomic::AtomicUsize,
    seg_size: usize,
    evict_hook: Arc<std::sync::OnceLock<EvictHook>>,
    /// The persistent layer under this engine, if any (see [`crate::hook`]).
    hook: Option<Arc<dyn StoreHook>>,
    /// The flash tier under RAM, if any (see [`crate::flash`]).
    pub(crate) flash: Option<crate::flash::FlashTier>,
}

impl Engine {
    /// Builds an engine. Nothing is allocated up front: segments are mapped as items arrive.
    pub fn new(cfg: EngineConfig) -> Self {
        let seed = std::hash::RandomState::new().hash_one(0x6d656d6b6974u64);
        Self::with_hash_seed(cfg, seed)
    }

    /// [`Engine::new`] with a given key hash seed (a warm restart's).
    pub(crate) fn with_hash_seed(cfg: EngineConfig, hash_seed: u64) -> Self {
        Self::with_key_hasher(cfg, KeyHasher::with_seed(hash_seed))
    }

    pub(crate) fn with_key_hasher(cfg: EngineConfig, hasher: KeyHasher) -> Self {
        let budget = cfg.memory_limit.max(1 << 20);
        // Up to 16 shards of at least 8 MiB each; past 4 GiB more shards, so that up to
        // 64 GiB none is larger than 256 MiB (its index then keeps at least 3 tag bits, see
        // `index::Layout`), and below 1 TiB none needs more segments than a location can
        // name (4096 of at most 1 MiB).
        let shards = cfg
            .shards
            .unwrap_or_else(|| {
                (budget / (8 << 20))
                    .clamp(1, 16)
                    .max(budget.div_ceil(256 << 20))
            })
            .clamp(1, 256)
            .next_power_of_two();
        let per_shard = budget / shards;
        // About 256 segments a shard: evicting one takes back under half a percent of it, so
        // the eviction order is fine-grained (a better hit ratio than with 64 measured on the
        // bench's Zipf trace) and the partly filled heads a shard keeps stay a small share.
        let seg_size =
            prev_power_of_two(per_shard / 256).clamp(16 << 10, crate::arena::MAX_SEGMENT_SIZE);
        let class_sizes: Arc<[u32]> = class_sizes((cfg.item_size_max / 2).max(1024))
            .into_boxed_slice()
            .into();
        let shard_bits = shards.trailing_zeros();
        let shard_cfg = ShardConfig {
            seg_size,
            budget: per_shard,
            evict: cfg.evict,
            class_sizes,
            item_size_max: cfg.item_size_max,
            evict_hook: Arc::default(),
            policy: cfg.eviction,
            flash: cfg.flash.clone(),
        };
        let shards_vec: Vec<Padded> = (0..shards)
            .map(|i| {
                Padded(Mutex::new(Shard::new(
                    shard_cfg.clone(),
                    i as u64,
                    shard_bits,
                    hasher.clone(),
                )))
            })
            .collect();
        Engine {
            evict_hook: shard_cfg.evict_hook.clone(),
            shards: shards_vec.into_boxed_slice(),
            shard_mask: (shards - 1) as u64,
            hash_seed: hasher.seed,
            hasher,
            epoch: cfg.clock.now_secs().saturating_sub(2),
            clock: cfg.clock,
            item_size_max: cfg.item_size_max,
            memory_limit: budget.into(),
            seg_size,
            hook: None,
            flash: cfg.flash,
        }
    }

    /// An engine over a persistent layer: RAM becomes a cache of hot items, a RAM miss is
    /// answered from `hook`, and every change is recorded there before the command returns.
    /// `cas_floor`: every CAS this engine derives is greater (the layer's reservation).
    /// The flash tier is not used under a persistent layer (whose disk already holds every
    /// item RAM lets go): `cfg.flash` is ignored.
    pub fn with_hook(cfg: EngineConfig, hook: Arc<dyn StoreHook>, cas_floor: u64) -> Self {
        let cfg = EngineConfig { flash: None, ..cfg };
        let mut engine = Engine::new(cfg);
        for s in engine.shards.iter() {
            s.0.lock().raise_cas_floor(cas_floor);
        }
        engine.hook = Some(hook);
        engine
    }

    /// Whether a persistent layer sits under this engine.
    pub fn is_persistent(&self) -> bool {
        self.hook.is_some()
    }

    /// Brings `key` back from the persistent layer if RAM does not hold it. Returns whether
    /// the key is live after that.
    fn preload(
        &self,
        hook: &dyn StoreHook,
        shard: &mut Shard,
        h: u64,
        key: &[u8],
        now: u32,
    ) -> Result<bool> {
        if shard.is_live(h, key, now) {
            return Ok(true);
        }
        let Some(item) = hook.load(key, self.clock.now_secs())? else {
            return Ok(false);
        };
        let exptime = match item.exptime_unix {
            None => 0,
            Some(d) if d <= self.epoch => 1,
            Some(d) => (d - self.epoch).min(u64::from(u32::MAX - 1)) as u32,
        };
        shard.install(h, key, &item, exptime, now)?;
        Ok(true)
    }

    /// Tells the persistent layer what a command left under `key`. If it cannot record it,
    /// the key leaves RAM, so the next command sees the recorded version, and the command
    /// fails.
    fn record(
        &self,
        hook: &dyn StoreHook,
        shard: &mut Shard,
        h: u64,
        key: &[u8],
        now: u32,
        meta_only: bool,
    ) -> Result<()> {
        let issued = shard.issued_cas();
        let epoch = self.epoch;
        let r = match shard.snapshot(h, key, now) {
            Ok(Some(s)) => hook.changed(
                &Change::Put {
                    record: Record {
                        key,
                        value: s.value,
                        flags: s.flags,
                        exptime_unix: (s.exptime != 0).then(|| epoch + u64::from(s.exptime)),
                        cas: s.cas,
                        stale: s.stale,
                        win_sent: s.win_sent,
                    },
                    meta_only,
                },
                issued,
            ),
            // A metadata change whose item left RAM while making room for the new header:
            // the stored version stays as it was rather than being removed.
            Ok(None) if meta_only => Ok(()),
            // Deleted, or written or touched into the past: gone for memcached.
            Ok(None) | Err(()) => hook.changed(&Change::Remove { key }, issued),
        };
        if r.is_err() {
            shard.drop_key(h, key, now);
        }
        r
    }

    pub(crate) fn now(&self) -> u32 {
        self.clock
            .now_secs()
            .saturating_sub(self.epoch)
            .min(u64::from(u32::MAX - 1)) as u32
    }

    /// A Unix second as this engine's (seconds since its epoch).
    fn engine_secs(&self, unix: u64) -> u32 {
        unix.saturating_sub(self.epoch).min(u64::from(u32::MAX - 1)) as u32
    }

    /// Engine-relative expiry second for `e` given now; 0 = never, 1 = already expired.
    fn rel_exptime(&self, e: Exptime) -> u32 {
        match e.deadline(self.clock.now_secs()) {
            None => 0,
            Some(d) if d <= self.epoch => 1,
            Some(d) => (d - self.epoch).min(u64::from(u32::MAX - 1)) as u32,
        }
    }

    pub(crate) fn shard(&self, key: &[u8]) -> (u64, parking_lot::MutexGuard<'_, Shard>) {
        let h = self.hasher.hash_one(key);
        // The index finds a key's home bucket from the low 32 bits and tags it with bits 48
        // and up, so the shard is taken from bits 32 and up to keep both uncorrelated with it.
        let s = ((h >> 32) & self.shard_mask) as usize;
        (h, self.shards[s].0.lock())
    }

    fn check_key(key: &[u8]) -> Result<()> {
        if key.is_empty() || key.len() > MAX_KEY_LEN {
            return Err(Error::InvalidKey);
        }
        Ok(())
    }

    /// Whether memcached would accept an item of this shape under `-I`: the rule the
    /// decoder applies too ([`memkit_types::item_fits`]), so the same value is accepted or
    /// refused by memkit's decoder, its engine and memcached.
    pub fn item_fits(&self, key_len: usize, value_len: usize, flags: u32) -> bool {
        memkit_types::item_fits(self.item_size_max, key_len, value_len, flags)
    }

    /// The item size limit (`-I`).
    pub fn item_size_max(&self) -> usize {
        self.item_size_max
    }

    /// Starts loading, without waiting for it, what a lookup of `key` will read: the index
    /// bucket ([`Prefetch::Bucket`]), or the record the bucket points to ([`Prefetch::Record`]), which
    /// is worth asking only once the bucket has had time to arrive. Both are cache misses a
    /// lookup otherwise stalls on, one after the other (`docs/BENCHMARKS.md`, "Warming a
    /// multi-get's keys"). A caller holding several requests warms the buckets of all, then
    /// their records, then answers them, so their misses overlap. A hint: a shard that is busy
    /// is skipped, and a key that is not there costs only the lines loaded for nothing.
    pub fn prefetch(&self, key: &[u8], what: Prefetch) {
        let h = self.hasher.hash_one(key);
        let s = ((h >> 32) & self.shard_mask) as usize;
        if let Some(shard) = self.shards[s].0.try_lock() {
            shard.prefetch(h, what);
        }
    }

    /// Reads one key and hands a borrowed view of it to `f` while the shard is locked, so a
    /// server can copy the value straight into its output buffer. A value on flash is read
    /// first, on this thread, and `f` called once it is in (a server that must not wait
    /// uses [`Engine::get_or_flash`]).
    pub fn get_view<R>(
        &self,
        key: &[u8],
        opts: &GetOptions,
        f: impl FnOnce(ItemView<'_>) -> R,
    ) -> Result<Option<R>> {
        let mut f = Some(f);
        let got = self.get_or_flash(key, opts, |v| f.take().map(|f| f(v)))?;
        Ok(match got {
            None => None,
            Some(crate::flash::Got::Now(r)) => r,
            Some(crate::flash::Got::Flash(read)) => {
                let value = self.read_flash_now(key, &read);
                value.and_then(|v| f.take().map(|f| f(read.view(key, &v))))
            }
        })
    }

    /// [`Engine::get_view`] without the flash read: `f` sees the item with the shard
    /// locked, a value on flash as `ItemView::flash`.
    pub(crate) fn get_view_locked<R>(
        &self,
        key: &[u8],
        opts: &GetOptions,
        f: impl FnOnce(ItemView<'_>) -> R,
    ) -> Result<Option<R>> {
        Self::check_key(key)?;
        let now = self.now();
        let rt = ReadTimes {
            now,
            judge: opts
                .replica
                .map(|r| self.engine_secs(r.at_unix))
                .filter(|&j| j > now),
            touched_from: opts.replica.and_then(|r| r.touched_from).map(|before| {
                // 0: none (as in a header); 1: already expired.
                before.map_or(0, |t| self.engine_secs(t).max(1))
            }),
        };
        let (h, mut shard) = self.shard(key);
        let Some(hook) = &self.hook else {
            return shard.get(h, key, opts, rt, |e| self.rel_exptime(e), f);
        };
        let live = self.preload(&**hook, &mut shard, h, key, now)?;
        let mut won = false;
        let r = shard.get(
            h,
            key,
            opts,
            rt,
            |e| self.rel_exptime(e),
            |v| {
                won = v.win;
                f(v)
            },
        )?;
        // A touch rewrites the TTL of a live item; a vivify creates one on a miss; a win
        // token handed out on a hit must outlive the item's stay in RAM (else the next
        // reader after an eviction or a restart would win too).
        let touched = live && (opts.touch.is_some() || won);
        if r.is_some() && (touched || (!live && opts.vivify.is_some())) {
            self.record(&**hook, &mut shard, h, key, now, touched)?;
        }
        Ok(r)
    }

    /// Reads one key into an owned [`Item`].
    pub fn get(&self, key: &[u8], opts: &GetOptions) -> Result<Option<Item>> {
        self.get_view(key, opts, |v| Item {
            value: bytes::Bytes::copy_from_slice(v.value),
            flags: v.flags,
            cas: v.cas,
            ttl: opts.meta.then_some(v.ttl),
            fetched: opts.meta.then_some(v.fetched),
            last_access: opts.meta.then_some(v.last_access),
            win: v.win,
            stale: v.stale,
            win_taken: v.win_taken,
        })
    }

    /// Every storage command (`set`, `add`, `replace`, `append`, `prepend`, `cas`, `ms`).
    pub fn store(&self, key: &[u8], value: &[u8], opts: &StoreOptions) -> Result<Stored> {
        Self::check_key(key)?;
        if matches!(opts.mode, StoreMode::Append | StoreMode::Prepend) {
            self.fetch_from_flash(key);
        }
        let now = self.now();
        let exptime = self.rel_exptime(opts.exptime);
        let vivify = opts.vivify.map(|e| self.rel_exptime(e));
        let (h, mut shard) = self.shard(key);
        if !self.item_fits(key.len(), value.len(), opts.flags) {
            shard.stats.counters.store_too_large += 1;
            // As memcached: a failed set must not leave the old value readable.
            if opts.mode == StoreMode::Set && opts.cas.is_none() {
                shard.drop_key(h, key, now);
                if let Some(hook) = &self.hook {
                    hook.changed(&Change::Remove { key }, shard.issued_cas())?;
                }
            }
            return Err(Error::TooLarge);
        }
        let times = Times {
            exptime,
            vivify,
            now,
        };
        let Some(hook) = &self.hook else {
            return shard.store(h, key, value, opts, times);
        };
        // A plain `set` does not depend on the old version: no need to read it back.
        if opts.mode != StoreMode::Set || opts.cas.is_some() {
            self.preload(&**hook, &mut shard, h, key, now)?;
        }
        let r = shard.store(h, key, value, opts, times)?;
        if r.outcome == memkit_types::StoreOutcome::Stored {
            self.record(&**hook, &mut shard, h, key, now, false)?;
        }
        Ok(r)
    }

    /// Counts a store refused before it reached the engine (the codec knows the size limit
    /// first) and, for `set`, removes the old value as memcached does, without counting a
    /// delete.
    pub fn refuse_too_large(&self, unlink: Option<&[u8]>) {
        let key = unlink.unwrap_or(b"-");
        let now = self.now();
        let (h, mut shard) = self.shard(key);
        shard.stats.counters.store_too_large += 1;
        if unlink.is_some() {
            shard.drop_key(h, key, now);
            if let Some(hook) = &self.hook {
                // Nothing to answer with here: the reply (object too large) is already
                // decided, and a failed removal leaves the old version, as a failed set may.
                let _ = hook.changed(&Change::Remove { key }, shard.issued_cas());
            }
        }
    }

    /// `delete` and `md`.
    pub fn delete(&self, key: &[u8], opts: &DeleteOptions) -> Result<DeleteOutcome> {
        Self::check_key(key)?;
        let now = self.now();
        let stale_exptime = opts.stale_ttl.map(|e| self.rel_exptime(e));
        let (h, mut shard) = self.shard(key);
        let Some(hook) = &self.hook else {
            return shard.delete(h, key, opts, stale_exptime, now);
        };
        self.preload(&**hook, &mut shard, h, key, now)?;
        let r = shard.delete(h, key, opts, stale_exptime, now)?;
        if r == DeleteOutcome::Deleted {
            let meta_only = opts.invalidate && !opts.remove_value;
            self.record(&**hook, &mut shard, h, key, now, meta_only)?;
        }
        Ok(r)
    }

    /// `incr`, `decr` and `ma`.
    pub fn arithmetic(&self, key: &[u8], opts: &ArithOptions) -> Result<ArithOutcome> {
        Self::check_key(key)?;
        self.fetch_from_flash(key);
        let now = self.now();
        let ttl = opts.update_ttl.map(|e| self.rel_exptime(e));
        let vivify = opts.vivify.map(|(_, e)| self.rel_exptime(e));
        let (h, mut shard) = self.shard(key);
        let times = Times {
            exptime: 0,
            vivify,
            now,
        };
        let Some(hook) = &self.hook else {
            return shard.arithmetic(h, key, opts, ttl, times);
        };
        self.preload(&**hook, &mut shard, h, key, now)?;
        let r = shard.arithmetic(h, key, opts, ttl, times)?;
        if matches!(r, ArithOutcome::Value { .. }) {
            self.record(&**hook, &mut shard, h, key, now, false)?;
        }
        Ok(r)
    }

    /// `touch`.
    pub fn touch(&self, key: &[u8], exptime: Exptime) -> Result<bool> {
        Self::check_key(key)?;
        let now = self.now();
        let exp = self.rel_exptime(exptime);
        let (h, mut shard) = self.shard(key);
        let Some(hook) = &self.hook else {
            return shard.touch(h, key, exp, now);
        };
        self.preload(&**hook, &mut shard, h, key, now)?;
        let touched = shard.touch(h, key, exp, now)?;
        if touched {
            self.record(&**hook, &mut shard, h, key, now, true)?;
        }
        Ok(touched)
    }

    /// `flush_all [delay]`: O(shards), whatever the number of items.
    pub fn flush_all(&self, delay: u32) {
        // Without a persistent layer this cannot fail.
        let _ = self.try_flush_all(delay);
    }

    /// `flush_all`, failing (and flushing nothing) if the persistent layer cannot record it.
    pub fn try_flush_all(&self, delay: u32) -> Result<()> {
        // memcached: `oldest_live = realtime(delay) - 1`, see `Shard::apply_flush`.
        let now = self.now();
        let at = (delay > 0).then(|| now.saturating_add(delay - 1));
        if let Some(hook) = &self.hook {
            // The one place that holds every shard lock (in shard order, so it cannot
            // deadlock): the persistent layer's flush mark must fall between the same
            // writes as the engine's, or a flushed item could come back from disk.
            let mut guards: Vec<_> = self.shards.iter().map(|s| s.0.lock()).collect();
            let flush = at.map_or(Flush::Now, |t| Flush::At(self.epoch + u64::from(t)));
            hook.flush(flush, self.clock.now_secs())?;
            for (i, shard) in guards.iter_mut().enumerate() {
                if i == 0 {
                    shard.stats.counters.cmd_flush += 1;
                }
                shard.flush(at, now);
            }
            return Ok(());
        }
        for (i, s) in self.shards.iter().enumerate() {
            let mut shard = s.0.lock();
            if i == 0 {
                shard.stats.counters.cmd_flush += 1;
            }
            shard.flush(at, now);
        }
        Ok(())
    }

    /// Re-arms a delayed `flush_all` a persistent layer recorded before a restart: items
    /// written up to and during Unix second `at_unix` become invalid when it arrives.
    pub fn restore_pending_flush(&self, at_unix: u64) {
        let now = self.now();
        let at = at_unix
            .saturating_sub(self.epoch)
            .min(u64::from(u32::MAX - 1)) as u32;
        for s in self.shards.iter() {
            s.0.lock().flush(Some(at), now);
        }
    }

    /// Runs `f` with `key`'s shard locked, so that nothing else changes the key meanwhile
    /// (a persistent layer purging an expired item from disk uses it).
    pub fn with_key_locked<R>(&self, key: &[u8], f: impl FnOnce() -> R) -> R {
        let (_, _guard) = self.shard(key);
        f()
    }

    /// Reclaims the memory of expired and flushed items, walking at most `max_segments`
    /// segments per shard. Run it periodically (the server and [`crate::Embedded`] do).
    pub fn reclaim_expired(&self, max_segments: usize) -> u64 {
        let now = self.now();
        self.shards
            .iter()
            .map(|s| s.0.lock().reclaim_expired(now, max_segments))
            .sum()
    }

    /// The flash tier's housekeeping, for a caller's timer (memkitd's housekeeping tick):
    /// walks up to `max_segments` segments a shard, unlinking stubs whose value's page was
    /// reclaimed and writing values idle for `ext_item_age` to flash. Returns the values
    /// written.
    pub fn flash_walk(&self, max_segments: usize) -> u64 {
        if self.flash.is_none() {
            return 0;
        }
        let now = self.now();
        self.shards
            .iter()
            .map(|s| s.0.lock().flash_walk(now, max_segments))
            .sum()
    }

    /// Changes the memory limit at run time (`cache_memlimit`). A smaller limit is reached
    /// by eviction as new items arrive.
    pub fn set_memory_limit(&self, bytes: usize) {
        let bytes = bytes.max(1 << 20);
        self.memory_limit
            .store(bytes, std::sync::atomic::Ordering::Relaxed);
        let per_shard = bytes / self.shards.len();
        for s in self.shards.iter() {
            s.0.lock().set_budget(per_shard);
        }
    }

    /// Drops every item and gives their memory back, keeping the counters: a replica that
    /// installs a snapshot empties the engine its server reads in place, rather than
    /// swapping in another one under readers that hold this one.
    pub fn clear(&self) {
        let budget =
            self.memory_limit.load(std::sync::atomic::Ordering::Relaxed) / self.shards.len();
        for s in self.shards.iter() {
            s.0.lock().clear_keeping_counters(budget);
        }
    }

    /// Installs the eviction callback (once; later calls are ignored and return `false`).
    pub fn set_evict_hook(&self, hook: impl Fn(&Evicted<'_>) + Send + Sync + 'static) -> bool {
        self.evict_hook.set(EvictHook(Arc::new(hook))).is_ok()
    }

    /// Zeroes the counters (`stats reset`); gauges such as `curr_items` and `bytes` stay.
    pub fn reset_stats(&self) {
        for s in self.shards.iter() {
            s.0.lock().stats.reset();
        }
    }

    /// A statistics snapshot.
    pub fn stats(&self) -> EngineStats {
        let mut out = EngineStats {
            limit_maxbytes: self.memory_limit.load(std::sync::atomic::Ordering::Relaxed) as u64,
            segment_size: self.seg_size as u64,
            shards: self.shards.len() as u64,
            ..Default::default()
        };
        let now = self.now();
        for s in self.shards.iter() {
            s.0.lock().add_stats(&mut out, now);
        }
        out
    }

    /// The engine's clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }
}

fn prev_power_of_two(n: usize) -> usize {
    if n == 0 {
        1
    } else {
        1 << (usize::BITS - 1 - n.leading_zeros())
    }
}

#[cfg(test)]
mod flood_tests;
