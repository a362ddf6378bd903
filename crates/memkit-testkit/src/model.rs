//! The reference model: memcached 1.6 semantics in the plainest form we could write.
//!
//! One mutex around one `BTreeMap`, time from an injected [`Clock`], no memory limit and no
//! eviction. Every rule below follows a code path of memcached (`memcached.c`
//! `do_store_item`/`do_add_delta`, `items.c` `do_item_get`/`item_is_flushed`, `proto_parser.c`
//! `process_mget_cmd`/`process_mset_cmd`/`process_mdelete_cmd`/`process_marithmetic_cmd`), and
//! the observable ones were checked against a real memcached 1.6.18. Where memcached's answer
//! depends on things a model cannot see (LRU position, a concurrent reader holding a
//! reference, the process start time), the comment at that spot says what we chose.
//!
//! Meta flags inside one request are applied in a fixed order, because memcached applies
//! them in the order the client wrote them: reads apply `T` (touch), then `N` (vivify), then
//! `R` (recache), and report `t` after all three; arithmetic applies `N` then `T`.

use std::collections::BTreeMap;
use std::future::{Future, ready};
use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;
use memkit_types::{
    ArithMode, ArithOptions, ArithOutcome, Cas, Clock, DEFAULT_ITEM_SIZE_MAX, DeleteOptions,
    DeleteOutcome, Error, Exptime, Flags, GetOptions, Item, ManualClock, Memcache, Result,
    StoreMode, StoreOptions, StoreOutcome, Stored, Ttl, validate_key,
};

/// memcached's per-item overhead on a 64-bit build: `sizeof(item)` (48), the key's NUL (1),
/// the value's CRLF (2) and the CAS (8); flags add 4 bytes when non-zero. With `-I 1m` and a 1-byte key this admits values of up to 1,048,516 bytes, exactly what
/// memcached 1.6.18 accepts.
const ITEM_HEADER: usize = 48 + 1 + 2 + 8;

/// Total size memcached charges for an item (`item_make_header` + CAS).
pub fn item_total_size(key_len: usize, flags: Flags, value_len: usize) -> usize {
    ITEM_HEADER + key_len + if flags == 0 { 0 } else { 4 } + value_len
}

#[derive(Debug, Clone)]
struct Entry {
    value: Vec<u8>,
    flags: Flags,
    cas: Cas,
    /// Absolute Unix second at which the item expires; `None` never.
    deadline: Option<u64>,
    /// When the item was linked: `flush_all` compares this (memcached's `it->time`).
    linked: u64,
    /// Last access, for `l`. memcached's own notion depends on LRU segment moves.
    accessed: u64,
    fetched: bool,
    stale: bool,
    token_sent: bool,
}

#[derive(Debug, Default, Clone)]
struct State {
    map: BTreeMap<Vec<u8>, Entry>,
    last_cas: Cas,
    /// memcached's `settings.oldest_live`, in Unix seconds: once it has arrived, items
    /// linked at or before it are invisible. One slot: a later `flush_all` replaces it.
    oldest_live: Option<u64>,
}

impl State {
    fn next_cas(&mut self, explicit: Option<Cas>) -> Cas {
        explicit.unwrap_or_else(|| {
            self.last_cas += 1;
            self.last_cas
        })
    }

    fn flushed(&self, e: &Entry, now: u64) -> bool {
        self.oldest_live
            .is_some_and(|oldest| oldest <= now && e.linked <= oldest)
    }

    fn visible(&self, e: &Entry, now: u64) -> bool {
        e.deadline.is_none_or(|d| d > now) && !self.flushed(e, now)
    }

    /// The live item under `key`; an expired or flushed one is dropped on the way, as
    /// `do_item_get` unlinks it.
    fn live(&mut self, key: &[u8], now: u64) -> Option<&mut Entry> {
        let visible = self.map.get(key).map(|e| self.visible(e, now))?;
        if !visible {
            self.map.remove(key);
            return None;
        }
        self.map.get_mut(key)
    }

    fn purge(&mut self, now: u64) {
        let oldest = self.oldest_live;
        let dead: Vec<Vec<u8>> = self
            .map
            .iter()
            .filter(|(_, e)| {
                e.deadline.is_some_and(|d| d <= now)
                    || oldest.is_some_and(|o| o <= now && e.linked <= o)
            })
            .map(|(k, _)| k.clone())
            .collect();
        for k in dead {
            self.map.remove(&k);
        }
    }

    fn link(&mut self, key: &[u8], e: Entry) {
        self.map.insert(key.to_vec(), e);
    }
}

fn fresh(value: Vec<u8>, flags: Flags, cas: Cas, deadline: Option<u64>, now: u64) -> Entry {
    Entry {
        value,
        flags,
        cas,
        deadline,
        linked: now,
        accessed: now,
        fetched: false,
        stale: false,
        token_sent: false,
    }
}

fn remaining(deadline: Option<u64>, now: u64) -> Option<u32> {
    // memcached prints `exptime - current_time` as u32, which wraps for an item just
    // touched into the past; we report 0 instead of a number that depends on uptime.
    deadline.map(|d| d.saturating_sub(now).min(u64::from(u32::MAX)) as u32)
}

/// memcached's `safe_strtoull` applied to an item's data (which memcached stores followed by
/// `\r\n`, and reads as a C string, so an embedded NUL ends the number).
pub fn parse_u64_like_memcached(data: &[u8]) -> Option<u64> {
    let is_space = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
    let at = |i: usize| -> u8 {
        match i.cmp(&data.len()) {
            std::cmp::Ordering::Less => data[i],
            std::cmp::Ordering::Equal => b'\r',
            std::cmp::Ordering::Greater => b'\n',
        }
    };
    let mut i = 0;
    while i < data.len() && is_space(data[i]) {
        i += 1;
    }
    let mut negative = false;
    if i < data.len() && (data[i] == b'+' || data[i] == b'-') {
        negative = data[i] == b'-';
        i += 1;
    }
    let digits_start = i;
    let mut acc: u64 = 0;
    let mut overflow = false;
    while i < data.len() && data[i].is_ascii_digit() {
        match acc
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(data[i] - b'0')))
        {
            Some(v) => acc = v,
            None => overflow = true,
        }
        i += 1;
    }
    if i == digits_start || overflow {
        return None;
    }
    let end = at(i);
    if !(is_space(end) || end == 0) {
        return None;
    }
    let value = if negative { acc.wrapping_neg() } else { acc };
    // strtoull accepts "-5" as 2^64-5; memcached rejects a sign only when that makes the
    // result look negative as i64, so "-0" and "-18446744073709551615" pass.
    if (value as i64) < 0 && data[..i].contains(&b'-') {
        return None;
    }
    Some(value)
}

/// A saved model state ([`Model::snapshot`]).
#[derive(Debug, Clone)]
pub struct Snapshot(State);

/// The reference implementation of [`Memcache`].
#[derive(Debug)]
pub struct Model<C: Clock = ManualClock> {
    clock: C,
    item_size_max: usize,
    state: Mutex<State>,
}

impl<C: Clock> Model<C> {
    /// A model reading time from `clock`, with memcached's default `-I 1m`.
    pub fn new(clock: C) -> Self {
        Model::with_item_size_max(clock, DEFAULT_ITEM_SIZE_MAX)
    }

    /// A model with an item size limit other than 1 MiB (memcached's `-I`).
    pub fn with_item_size_max(clock: C, item_size_max: usize) -> Self {
        Model {
            clock,
            item_size_max,
            state: Mutex::new(State::default()),
        }
    }

    /// The clock this model reads.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// How many live items the model holds.
    pub fn len(&self) -> usize {
        let now = self.clock.now_secs();
        let mut st = self.lock();
        st.purge(now);
        st.map.len()
    }

    /// Whether no live item is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops `key` without a trace, as an eviction does. Comparisons against a backend that
    /// evicts call this for every key the backend reports evicted, since the model has no
    /// memory limit of its own.
    pub fn forget(&self, key: &[u8]) {
        self.lock().map.remove(key);
    }

    /// A copy of the whole state (items, CAS counter, pending flush), for [`Model::restore`].
    pub fn snapshot(&self) -> Snapshot {
        Snapshot(self.lock().clone())
    }

    /// Puts back a state taken by [`Model::snapshot`]: lets a comparison try one reading of
    /// an ambiguous backend answer and fall back to the other.
    pub fn restore(&self, snapshot: Snapshot) {
        *self.lock() = snapshot.0;
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere cannot leave the map half-updated in a way that matters to a test.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn fits(&self, key: &[u8], flags: Flags, value_len: usize) -> bool {
        item_total_size(key.len(), flags, value_len) <= self.item_size_max
    }

    /// `mg`, one key at a time (`process_mget_cmd`).
    pub fn get_multi_now(&self, keys: &[&[u8]], opts: &GetOptions) -> Result<Vec<Option<Item>>> {
        for key in keys {
            validate_key(key)?;
        }
        let now = self.clock.now_secs();
        let mut st = self.lock();
        let mut out = Vec::with_capacity(keys.len());
        for key in keys {
            let mut created = false;
            if st.live(key, now).is_none() {
                let Some(viv) = opts.vivify else {
                    out.push(None);
                    continue;
                };
                let cas = st.next_cas(opts.new_cas);
                st.link(key, fresh(Vec::new(), 0, cas, viv.deadline(now), now));
                created = true;
            }
            // Not `live` again: memcached answers from the item in hand even when `N`/`T`
            // gave it a TTL in the past or a pending flush already covers it.
            let e = st.map.get_mut(*key).expect("present or just created");
            let mut won = created;
            if let Some(t) = opts.touch {
                e.deadline = t.deadline(now);
            }
            if created {
                // `N` sets the TTL after `T`, so a vivified item keeps the vivify TTL.
                e.deadline = opts.vivify.and_then(|v| v.deadline(now));
            }
            if let Some(r) = opts.recache_below {
                // `it->exptime < realtime(token)`: strictly less; never-expiring items and
                // `R0` never win.
                let limit = Exptime(i64::from(r)).deadline(now);
                if !e.token_sent
                    && !created
                    && let (Some(d), Some(limit)) = (e.deadline, limit)
                    && d < limit
                {
                    won = true;
                }
            }
            let win_taken = e.token_sent;
            if e.stale && !e.token_sent {
                won = true;
            }
            if won {
                e.token_sent = true;
            }
            let item = Item {
                value: Bytes::copy_from_slice(&e.value),
                flags: e.flags,
                cas: e.cas,
                ttl: opts
                    .meta
                    .then(|| remaining(e.deadline, now).map_or(Ttl::Never, Ttl::Secs)),
                fetched: opts.meta.then_some(e.fetched),
                last_access: opts
                    .meta
                    .then(|| now.saturating_sub(e.accessed).min(u64::from(u32::MAX)) as u32),
                win: won,
                stale: e.stale,
                win_taken,
            };
            // The bump comes after the reply is built, so `h`/`l` show the state before it.
            if !opts.no_bump {
                e.fetched = true;
                e.accessed = now;
            }
            out.push(Some(item));
        }
        Ok(out)
    }

    /// `set`/`add`/`replace`/`append`/`prepend`/`cas`/`ms` (`do_store_item`).
    pub fn store_now(&self, key: &[u8], value: &[u8], opts: &StoreOptions) -> Result<Stored> {
        validate_key(key)?;
        let now = self.clock.now_secs();
        let mut st = self.lock();
        let cas_mode =
            opts.cas.is_some() && matches!(opts.mode, StoreMode::Set | StoreMode::Replace);
        if !self.fits(key, opts.flags, value.len()) {
            // "Avoid stale data persisting in cache because we failed alloc": the text
            // protocol does this for a plain `set` only.
            if opts.mode == StoreMode::Set && !cas_mode {
                st.map.remove(key);
            }
            return Err(Error::TooLarge);
        }
        let not = |outcome| Ok(Stored { outcome, cas: 0 });
        let Some(old) = st.live(key, now).cloned() else {
            let deadline = match opts.mode {
                StoreMode::Add | StoreMode::Set if !cas_mode => opts.exptime.deadline(now),
                StoreMode::Append | StoreMode::Prepend if opts.vivify.is_some() => {
                    opts.vivify.and_then(|v| v.deadline(now))
                }
                _ if cas_mode => return not(StoreOutcome::NotFound),
                _ => return not(StoreOutcome::NotStored),
            };
            let cas = st.next_cas(opts.new_cas);
            st.link(key, fresh(value.to_vec(), opts.flags, cas, deadline, now));
            return Ok(Stored {
                outcome: StoreOutcome::Stored,
                cas,
            });
        };
        // A CAS of 0 means "no CAS" to memcached: a `cas` command carrying it never matches.
        let cas_match = match opts.cas {
            None | Some(0) => None,
            Some(c) => Some(c == old.cas),
        };
        let stale_ok = opts.invalidate && opts.cas.is_some_and(|c| c != 0 && c < old.cas);
        let entry = match opts.mode {
            StoreMode::Add => return not(StoreOutcome::NotStored),
            _ if cas_mode => {
                if cas_match == Some(true) {
                    fresh(
                        value.to_vec(),
                        opts.flags,
                        0,
                        opts.exptime.deadline(now),
                        now,
                    )
                } else if stale_ok {
                    // Replaces the value but keeps the TTL and the win token, marked stale.
                    let mut e = fresh(value.to_vec(), opts.flags, 0, old.deadline, now);
                    e.stale = true;
                    e.token_sent = old.token_sent;
                    e
                } else {
                    return not(StoreOutcome::Exists);
                }
            }
            StoreMode::Set | StoreMode::Replace => fresh(
                value.to_vec(),
                opts.flags,
                0,
                opts.exptime.deadline(now),
                now,
            ),
            StoreMode::Append | StoreMode::Prepend => {
                if cas_match == Some(false) {
                    return not(StoreOutcome::Exists);
                }
                let joined = if opts.mode == StoreMode::Append {
                    [&old.value[..], value].concat()
                } else {
                    [value, &old.value[..]].concat()
                };
                // memcached 1.6.18 refuses an append whose result is exactly at the limit
                // (NOT_STORED, not TOO_LARGE): one byte less than a set of that length.
                if !self.fits(key, old.flags, joined.len() + 1) {
                    return not(StoreOutcome::NotStored);
                }
                fresh(joined, old.flags, 0, old.deadline, now)
            }
        };
        let cas = st.next_cas(opts.new_cas);
        st.link(key, Entry { cas, ..entry });
        Ok(Stored {
            outcome: StoreOutcome::Stored,
            cas,
        })
    }

    /// `delete`/`md` (`process_mdelete_cmd`).
    pub fn delete_now(&self, key: &[u8], opts: &DeleteOptions) -> Result<DeleteOutcome> {
        validate_key(key)?;
        let now = self.clock.now_secs();
        let mut st = self.lock();
        let Some(old) = st.live(key, now).cloned() else {
            return Ok(DeleteOutcome::NotFound);
        };
        if opts.cas.is_some_and(|c| c != old.cas) {
            return Ok(DeleteOutcome::Exists);
        }
        let mut e = old;
        if opts.remove_value {
            // A new empty item: flags 0, TTL from `T` (none means never), and the old CAS
            // unless `E` gives one.
            let deadline = opts.stale_ttl.and_then(|t| t.deadline(now));
            e = fresh(Vec::new(), 0, opts.new_cas.unwrap_or(e.cas), deadline, now);
        }
        if opts.invalidate {
            if let Some(t) = opts.stale_ttl {
                e.deadline = t.deadline(now);
            }
            e.stale = true;
            e.token_sent = false;
            e.cas = st.next_cas(opts.new_cas);
        }
        if opts.remove_value || opts.invalidate {
            st.link(key, e);
        } else {
            st.map.remove(key);
        }
        Ok(DeleteOutcome::Deleted)
    }

    /// `incr`/`decr`/`ma` (`do_add_delta` + `process_marithmetic_cmd`).
    pub fn arithmetic_now(&self, key: &[u8], opts: &ArithOptions) -> Result<ArithOutcome> {
        validate_key(key)?;
        let now = self.clock.now_secs();
        let mut st = self.lock();
        let Some(old) = st.live(key, now).cloned() else {
            let Some((initial, ttl)) = opts.vivify else {
                return Ok(ArithOutcome::NotFound);
            };
            // The created item holds `initial` itself: the delta is not applied.
            let cas = st.next_cas(opts.new_cas);
            let mut e = fresh(
                initial.to_string().into_bytes(),
                0,
                cas,
                ttl.deadline(now),
                now,
            );
            if let Some(t) = opts.update_ttl {
                e.deadline = t.deadline(now);
            }
            let ttl = remaining(e.deadline, now);
            st.link(key, e);
            return Ok(ArithOutcome::Value {
                value: initial,
                cas,
                ttl,
            });
        };
        // memcached checks, in this order: empty value, CAS (0 means none), the number.
        // Chunked (large) items are refused as non-numeric without being parsed.
        if old.value.is_empty()
            || item_total_size(key.len(), old.flags, old.value.len()) > self.item_size_max / 2
        {
            return Ok(ArithOutcome::NonNumeric);
        }
        if opts.cas.is_some_and(|c| c != 0 && c != old.cas) {
            return Ok(ArithOutcome::Exists);
        }
        let Some(current) = parse_u64_like_memcached(&old.value) else {
            return Ok(ArithOutcome::NonNumeric);
        };
        let value = match opts.mode {
            ArithMode::Incr => current.wrapping_add(opts.delta),
            ArithMode::Decr => current.saturating_sub(opts.delta),
        };
        let digits = value.to_string().into_bytes();
        let cas = st.next_cas(opts.new_cas);
        let mut e = if digits.len() <= old.value.len() {
            // Rewritten in place: padded with spaces to the old length, and the item keeps
            // its stale/win/fetched marks (`"10"` decr 1 reads back as `"9 "`).
            let mut padded = digits;
            padded.resize(old.value.len(), b' ');
            Entry {
                value: padded,
                cas,
                ..old
            }
        } else {
            fresh(digits, old.flags, cas, old.deadline, now)
        };
        if let Some(t) = opts.update_ttl {
            e.deadline = t.deadline(now);
        }
        let ttl = remaining(e.deadline, now);
        st.link(key, e);
        Ok(ArithOutcome::Value { value, cas, ttl })
    }

    /// `touch` (`do_item_touch`): new TTL, a bump, the CAS unchanged.
    pub fn touch_now(&self, key: &[u8], exptime: Exptime) -> Result<bool> {
        validate_key(key)?;
        let now = self.clock.now_secs();
        let mut st = self.lock();
        let Some(e) = st.live(key, now) else {
            return Ok(false);
        };
        e.deadline = exptime.deadline(now);
        e.fetched = true;
        e.accessed = now;
        Ok(true)
    }

    /// `flush_all [delay]` (`process_flush_all_command`).
    ///
    /// memcached sets `oldest_live = realtime(delay) - 1` (or `now - 1` for 0): the flush
    /// arrives one second before `now + delay`, and items linked in that very second are
    /// flushed too. So `flush_all 1` hides even items stored right after it in the same
    /// second (checked on 1.6.18), while items stored after `flush_all 0` live.
    pub fn flush_all_now(&self, delay: u32) -> Result<()> {
        let now = self.clock.now_secs();
        let mut st = self.lock();
        // Make the previous flush final before replacing it; memcached's lazy unlinking can
        // let never-touched items resurface when a later delayed flush overwrites
        // `oldest_live`, which no caller can rely on.
        st.purge(now);
        // An absolute time already past flushes now (see `Exptime::flush_delay`).
        if Exptime::flush_delay(delay, now) == 0 {
            st.map.clear();
            st.oldest_live = Some(now.saturating_sub(1));
        } else {
            let at = now + u64::from(Exptime::flush_delay(delay, now));
            st.oldest_live = Some(at.saturating_sub(1));
            st.purge(now);
        }
        Ok(())
    }
}

impl<C: Clock> Memcache for Model<C> {
    fn get_multi(
        &self,
        keys: &[&[u8]],
        opts: &GetOptions,
    ) -> impl Future<Output = Result<Vec<Option<Item>>>> + Send {
        ready(self.get_multi_now(keys, opts))
    }

    fn store(
        &self,
        key: &[u8],
        value: &[u8],
        opts: &StoreOptions,
    ) -> impl Future<Output = Result<Stored>> + Send {
        ready(self.store_now(key, value, opts))
    }

    fn delete_with(
        &self,
        key: &[u8],
        opts: &DeleteOptions,
    ) -> impl Future<Output = Result<DeleteOutcome>> + Send {
        ready(self.delete_now(key, opts))
    }

    fn arithmetic(
        &self,
        key: &[u8],
        opts: &ArithOptions,
    ) -> impl Future<Output = Result<ArithOutcome>> + Send {
        ready(self.arithmetic_now(key, opts))
    }

    fn touch(&self, key: &[u8], exptime: Exptime) -> impl Future<Output = Result<bool>> + Send {
        ready(self.touch_now(key, exptime))
    }

    fn flush_all(&self, delay: u32) -> impl Future<Output = Result<()>> + Send {
        ready(self.flush_all_now(delay))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strtoull_like_memcached() {
        // Each case was run through `incr` on memcached 1.6.18.
        let p = parse_u64_like_memcached;
        assert_eq!(p(b"10"), Some(10));
        assert_eq!(p(b"  5"), Some(5));
        assert_eq!(p(b"+12"), Some(12));
        assert_eq!(p(b"\t7\n"), Some(7));
        assert_eq!(p(b"5 x"), Some(5));
        assert_eq!(p(b"5\0x"), Some(5));
        assert_eq!(p(b"-0"), Some(0));
        assert_eq!(p(b"-18446744073709551615"), Some(1));
        assert_eq!(p(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(p(b"18446744073709551616"), None);
        assert_eq!(p(b"-1"), None);
        assert_eq!(p(b"5x "), None);
        assert_eq!(p(b" "), None);
        assert_eq!(p(b""), None);
        assert_eq!(p(b"+"), None);
    }

    fn get(m: &Model, key: &[u8]) -> Option<Vec<u8>> {
        let items = m.get_multi_now(&[key], &GetOptions::default()).unwrap();
        items.into_iter().next().flatten().map(|i| i.value.to_vec())
    }

    fn set(m: &Model, key: &[u8]) {
        m.store_now(key, b"v", &StoreOptions::default()).unwrap();
    }

    #[test]
    fn flush_boundaries_as_memcached_1_6_18_shows_them() {
        let clock = ManualClock::new(1_000_000);
        let m = Model::new(clock.clone());
        // flush_all 0: everything now is gone, a set right after lives.
        set(&m, b"a");
        m.flush_all_now(0).unwrap();
        assert_eq!(get(&m, b"a"), None);
        set(&m, b"a");
        assert!(get(&m, b"a").is_some());
        // flush_all 1: even a set in the same second is hidden; the next second is free.
        m.flush_all_now(1).unwrap();
        set(&m, b"b");
        assert_eq!(get(&m, b"b"), None);
        clock.advance(1);
        set(&m, b"b");
        assert!(get(&m, b"b").is_some());
        // flush_all 3 at T acts at T+2 on everything linked up to T+2.
        m.flush_all_now(3).unwrap();
        clock.advance(1);
        set(&m, b"c");
        assert!(get(&m, b"b").is_some() && get(&m, b"c").is_some());
        clock.advance(1);
        assert_eq!((get(&m, b"b"), get(&m, b"c")), (None, None));
        set(&m, b"d");
        assert_eq!(get(&m, b"d"), None, "linked in the flush second");
        clock.advance(1);
        set(&m, b"d");
        assert!(get(&m, b"d").is_some());
    }

    #[test]
    fn flush_all_0_cancels_a_pending_delayed_flush() {
        let clock = ManualClock::new(1_000_000);
        let m = Model::new(clock.clone());
        m.flush_all_now(10).unwrap();
        m.flush_all_now(0).unwrap();
        set(&m, b"a");
        clock.advance(20);
        assert!(get(&m, b"a").is_some());
    }

    #[test]
    fn vivify_into_the_past_still_answers_once() {
        let m = Model::new(ManualClock::default());
        let opts = GetOptions {
            vivify: Some(Exptime::EXPIRED),
            ..Default::default()
        };
        let first = m.get_multi_now(&[b"k"], &opts).unwrap().remove(0).unwrap();
        assert!(first.win && first.value.is_empty());
        assert_eq!(get(&m, b"k"), None);
    }

    #[test]
    fn size_limit_matches_memcached() {
        let m = Model::new(ManualClock::default());
        assert!(m.fits(b"k", 0, 1_048_516));
        assert!(!m.fits(b"k", 0, 1_048_517));
        assert!(m.fits(b"k", 5, 1_048_512));
        assert!(!m.fits(b"k", 5, 1_048_513));
        assert!(m.fits(&[b'k'; 250], 0, 1_048_267));
        assert!(!m.fits(&[b'k'; 250], 0, 1_048_268));
    }
}
