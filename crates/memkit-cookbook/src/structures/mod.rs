//! The structures of seeds 000–002, and a queue and a stack beyond them.
//!
//! The helpers here are the two idioms every seed recipe repeats, written once:
//! [`incr_or_create`] (the seeds' `incr`/`add` loop, now one `ma ... N J` round trip) and
//! [`append_or_add`] (the `append`/`add` loop, *falling through* to `add` when `append`
//! finds no key — the seed's array-2 version returned there and dropped the element).

pub mod array;
pub mod counter;
pub mod event_log;
pub mod lock;
pub mod online;
pub mod queue;
pub mod table;
pub mod visitors;

use std::time::Duration;

use memkit_types::{ArithMode, ArithOptions, ArithOutcome, Exptime, Memcache, StoreMode};

use crate::{Error, Result};

/// The clock skew between hosts that the time-keyed structures (event log, visitor and online
/// counters) tolerate: a producer this far ahead of or behind the others and the server
/// loses nothing. Their keys are named by absolute period or chunk number, so skew never
/// makes two periods share a key; it only decides how long a key must outlive its last read.
pub const MAX_CLOCK_SKEW_SECS: u64 = 5;

/// How long a time-keyed key outlives the last instant it is read. memcached's clock ticks
/// once a second at its own phase, so a relative TTL can end up to a second early; a producer
/// whose clock is ahead computes a TTL that ends early by its skew.
pub(crate) const EXPIRY_MARGIN_SECS: u64 = MAX_CLOCK_SKEW_SECS + 1;

/// How many times an optimistic loop retries before reporting [`Error::Contended`]. Each
/// retry means the key vanished or changed between two of our commands; hitting this bound
/// means the key is evicted as fast as it is created.
pub(crate) const MAX_ATTEMPTS: u32 = 64;

/// Increments `key` by `delta`, creating it holding `delta` with `ttl` when it is absent — in
/// one atomic command (`ma key N<ttl> J<delta> D<delta>`), so two processes that both find
/// the key missing cannot lose an increment (the seed needed an `incr`/`add`/`incr` loop for
/// this).
pub async fn incr_or_create<M: Memcache + ?Sized>(
    mc: &M,
    key: &[u8],
    delta: u64,
    ttl: Exptime,
) -> Result<u64> {
    arith_or_create(mc, key, ArithMode::Incr, delta, delta, ttl).await
}

pub(crate) async fn arith_or_create<M: Memcache + ?Sized>(
    mc: &M,
    key: &[u8],
    mode: ArithMode,
    delta: u64,
    initial: u64,
    ttl: Exptime,
) -> Result<u64> {
    let opts = ArithOptions {
        mode,
        delta,
        vivify: Some((initial, ttl)),
        ..Default::default()
    };
    for _ in 0..MAX_ATTEMPTS {
        match mc.arithmetic(key, &opts).await? {
            ArithOutcome::Value { value, .. } => return Ok(value),
            ArithOutcome::NonNumeric => {
                return Err(Error::Codec(format!(
                    "{} does not hold a number",
                    String::from_utf8_lossy(key)
                )));
            }
            // Vivify lost a race with a concurrent create: the key exists now; retry.
            ArithOutcome::NotStored | ArithOutcome::NotFound | ArithOutcome::Exists => {}
        }
    }
    Err(Error::Contended(MAX_ATTEMPTS))
}

/// Appends `data` to `key`, or creates `key` holding `data` with `ttl` when it is absent.
///
/// `append` first (the common case, one round trip); when it finds no key, `add`; when `add`
/// finds that someone created the key in between, `append` again. Exactly one of these
/// stores `data` exactly once. (Seed 002's array 2 *returned* when `append` failed, so the
/// first element of every array was silently dropped.)
pub async fn append_or_add<M: Memcache + ?Sized>(
    mc: &M,
    key: &[u8],
    data: &[u8],
    ttl: Exptime,
) -> Result<()> {
    for _ in 0..MAX_ATTEMPTS {
        if mc.append(key, data).await? {
            return Ok(());
        }
        if mc.store_mode(StoreMode::Add, key, data, 0, ttl).await? {
            return Ok(());
        }
    }
    Err(Error::Contended(MAX_ATTEMPTS))
}

/// Seconds as a relative [`Exptime`], `0` meaning "never".
pub(crate) fn ttl_secs(secs: u64) -> Exptime {
    if secs == 0 {
        Exptime::NEVER
    } else {
        Exptime::secs(secs.min(u64::from(u32::MAX)) as u32)
    }
}

/// Sleeps on tokio's timer.
pub(crate) async fn sleep(d: Duration) {
    if !d.is_zero() {
        tokio::time::sleep(d).await;
    }
}

/// A token unique to this call, across processes and hosts with overwhelming probability:
/// process id, a process-wide counter, the time, and 64 random bits from `std`'s randomly
/// seeded hasher (no `rand` dependency).
pub(crate) fn unique_token() -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(seq ^ nanos);
    format!(
        "{:x}.{:x}.{:x}.{:016x}",
        std::process::id(),
        seq,
        nanos,
        h.finish()
    )
}
