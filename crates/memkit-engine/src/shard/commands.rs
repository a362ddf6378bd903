//! The commands, following memcached 1.6: `do_store_item` for every storage command,
//! `do_add_delta` for incr/decr, and `proto_parser.c`'s meta handlers for the N/R/I/W/X/Z
//! rules of `mg`, `ms`, `md` and `ma`.

use memkit_types::{
    ArithMode, ArithOptions, ArithOutcome, DeleteOptions, DeleteOutcome, GetOptions, Result,
    StoreMode, StoreOptions, StoreOutcome, Stored, Ttl,
};

use super::{Dead, Found, ItemView, ReadTimes, Shard, Times};
use crate::arena::{Loc, Value, seg_of};
use crate::numeric;
use crate::policy::Policy;
use crate::segment::{FETCHED, Header, ItemAt, STALE, VISITED, WIN_SENT};
use memkit_types::item_fits;

impl Shard {
    /// `get`/`gets`/`gat`/`mg`: calls `f` with a view of the item while the lock is held.
    /// `rt`: now, and for a replicated node's read a later second to judge liveness and TTLs
    /// at without removing what is dead only then, and whether the read's touch, applied
    /// through the log, counted it already (`GetOptions::replica`).
    pub fn get<R>(
        &mut self,
        h: u64,
        key: &[u8],
        opts: &GetOptions,
        rt: ReadTimes,
        exptime: impl Fn(memkit_types::Exptime) -> u32,
        f: impl FnOnce(ItemView<'_>) -> R,
    ) -> Result<Option<R>> {
        let now = rt.now;
        let (mut e, at) = match self.lookup(h, key, now) {
            Found::Live(_, at) if let Some(d) = rt.judge.and_then(|j| self.dead_later(&at, j)) => {
                return self.get_miss(h, key, Found::Dead(d), opts, rt, exptime, f);
            }
            Found::Live(e, at) => (e, at),
            found => return self.get_miss(h, key, found, opts, rt, exptime, f),
        };
        // TTLs as the reader's clock has them.
        let seen = rt.judge.unwrap_or(now);
        if rt.touched_from.is_none() {
            self.count_hit(opts.touch.is_some(), at.header.logical_len());
        }
        let ttl_before = ttl_of(rt.touched_from.unwrap_or(at.header.exptime), seen);
        let mut hdr = at.header;
        let mut at = at;
        if let Some(t) = opts.touch {
            let new_exp = exptime(t);
            if let Some(new) = self.set_exptime(h, key, e, &at, new_exp, now)? {
                e = new;
            }
            at = self.arena.item_at(e);
            hdr = at.header;
        }
        let win_taken = hdr.bits & WIN_SENT != 0;
        let stale = hdr.bits & STALE != 0;
        let mut win = false;
        // memcached compares `it->exptime < realtime(token)`: the token is an expiry time
        // like any other, so `R0` (realtime 0) never wins, nor does an item without a TTL.
        if let Some(r) = opts.recache_below
            && !win_taken
            && hdr.exptime != 0
            && hdr.exptime < exptime(memkit_types::Exptime(i64::from(r)))
        {
            win = true;
        }
        if stale && !win_taken && !opts.classic {
            win = true;
        }
        let mut bits = hdr.bits;
        if !opts.no_bump {
            bits = self.policy.on_access(bits) | FETCHED;
        }
        if win {
            bits |= WIN_SENT;
        }
        if bits != hdr.bits {
            self.arena.set_bits(e, bits);
        }
        let last_access = now.saturating_sub(self.arena.seg(seg_of(e)).created);
        let (value, flash) = match self.arena.value_of(e, &at) {
            Value::Bytes(b) => (b, None),
            Value::Flash(loc) => (&[][..], Some((loc, hdr.vlen as usize, self.flash_read()))),
        };
        // `at` still describes the record: the bits above change in place, not its layout.
        Ok(Some(f(ItemView {
            key,
            value,
            flags: hdr.flags,
            cas: self.cas_of(&hdr),
            ttl: ttl_of(hdr.exptime, seen),
            ttl_before,
            created: false,
            fetched: hdr.bits & FETCHED != 0,
            last_access,
            win,
            stale,
            win_taken,
            flash,
        })))
    }

    /// Counts a read of a value on flash; whether it is the one in `ext_recache_rate` that
    /// brings the value back to RAM.
    fn flash_read(&mut self) -> bool {
        self.stats.counters.get_extstore += 1;
        self.flash_reads = self.flash_reads.wrapping_add(1);
        let rate = self.cfg.flash.as_ref().map_or(0, |t| t.recache_rate);
        rate != 0 && self.flash_reads.is_multiple_of(rate)
    }

    /// A hit, counted as memcached does: one that touches as a touch only, not as a get.
    fn count_hit(&mut self, touched: bool, len: usize) {
        let counters = &mut self.stats.counters;
        if touched {
            counters.cmd_touch += 1;
            counters.touch_hits += 1;
        } else {
            counters.cmd_get += 1;
            counters.get_hits += 1;
        }
        let class = self.stats.class_counters(len);
        if touched {
            class.touch_hits += 1;
        } else {
            class.get_hits += 1;
        }
    }

    /// A read that found no live item: counts the miss (unless its touch through the log
    /// did), and with `N` creates a stub item whose creator wins the right to fill it.
    #[allow(clippy::too_many_arguments)]
    fn get_miss<R>(
        &mut self,
        h: u64,
        key: &[u8],
        found: Found,
        opts: &GetOptions,
        rt: ReadTimes,
        exptime: impl Fn(memkit_types::Exptime) -> u32,
        f: impl FnOnce(ItemView<'_>) -> R,
    ) -> Result<Option<R>> {
        let now = rt.now;
        if rt.touched_from.is_some() {
            return Ok(None);
        }
        if let Found::Dead(d) = found {
            match d {
                Dead::Expired => self.stats.counters.get_expired += 1,
                Dead::Flushed => self.stats.counters.get_flushed += 1,
            }
        }
        // memcached counts a missed `gat` (or binary GAT) as a touch, and a missed `mg` as a
        // get whatever its flags: its meta handler knows it touches only once it has the item.
        let counters = &mut self.stats.counters;
        if opts.touch.is_some() && opts.classic {
            counters.cmd_touch += 1;
            counters.touch_misses += 1;
        } else {
            counters.cmd_get += 1;
            counters.get_misses += 1;
        }
        let Some(ttl) = opts.vivify else {
            return Ok(None);
        };
        // The read that creates the stub counts as an access, unless told not to.
        let bump = if opts.no_bump {
            0
        } else {
            self.policy.on_access(0) | FETCHED
        };
        let hdr = Header {
            bits: WIN_SENT | bump,
            exptime: exptime(ttl),
            ext_cas: opts.new_cas,
            ..Header::default()
        };
        let cas = self.write_new(h, key, hdr, [&[], &[]], now)?;
        Ok(Some(f(ItemView {
            key,
            value: &[],
            flags: 0,
            cas,
            ttl: ttl_of(hdr.exptime, now),
            ttl_before: Ttl::Never,
            created: true,
            fetched: false,
            last_access: 0,
            win: true,
            stale: false,
            win_taken: false,
            flash: None,
        })))
    }

    /// Sets a new expiry: in place when the record already has an exptime field, else by
    /// rewriting the record. Returns the new location if it moved.
    fn set_exptime(
        &mut self,
        h: u64,
        key: &[u8],
        e: Loc,
        at: &ItemAt,
        new_exp: u32,
        now: u32,
    ) -> Result<Option<Loc>> {
        if new_exp != 0 && self.arena.set_exptime(e, at, new_exp) {
            return Ok(None);
        }
        if new_exp == at.header.exptime {
            return Ok(None);
        }
        self.rewrite(h, key, e, now, |hdr, _| hdr.exptime = new_exp)?;
        Ok(self.find(h, key).map(|(e, _)| e))
    }

    /// `touch`.
    pub fn touch(&mut self, h: u64, key: &[u8], new_exp: u32, now: u32) -> Result<bool> {
        self.stats.counters.cmd_touch += 1;
        match self.lookup(h, key, now) {
            Found::Live(e, at) => {
                self.stats.counters.touch_hits += 1;
                self.stats
                    .class_counters(at.header.logical_len())
                    .touch_hits += 1;
                // memcached's touch bumps the item, which marks it fetched.
                self.arena.set_bits(e, at.header.bits | VISITED | FETCHED);
                self.set_exptime(h, key, e, &at, new_exp, now)?;
                Ok(true)
            }
            _ => {
                self.stats.counters.touch_misses += 1;
                Ok(false)
            }
        }
    }

    /// Every storage command, following memcached's `do_store_item`.
    ///
    /// A CAS token makes a `set`/`replace` a `cas` command (memcached's `NREAD_CAS`); with
    /// append/prepend it is only compared, and `add` ignores it. A token of 0 means "none"
    /// to memcached, so a `cas` carrying it never matches.
    pub fn store(
        &mut self,
        h: u64,
        key: &[u8],
        value: &[u8],
        opts: &StoreOptions,
        t: Times,
    ) -> Result<Stored> {
        let Times {
            exptime,
            vivify: vivify_exptime,
            now,
        } = t;
        self.stats.counters.cmd_set += 1;
        let not = |outcome| Ok(Stored { outcome, cas: 0 });
        let cas_mode =
            opts.cas.is_some() && matches!(opts.mode, StoreMode::Set | StoreMode::Replace);
        let mut hdr = Header {
            flags: opts.flags,
            exptime,
            ext_cas: opts.new_cas,
            ..Header::default()
        };
        // memcached counts a set in the class of the item the new data is read into.
        let incoming = Header {
            klen: key.len() as u8,
            vlen: value.len() as u32,
            ..hdr
        };
        self.stats.class_counters(incoming.logical_len()).cmd_set += 1;
        let Found::Live(e, at) = self.lookup(h, key, now) else {
            match opts.mode {
                _ if cas_mode => {
                    self.stats.counters.cas_misses += 1;
                    return not(StoreOutcome::NotFound);
                }
                StoreMode::Add | StoreMode::Set => {}
                StoreMode::Append | StoreMode::Prepend if vivify_exptime.is_some() => {
                    hdr.exptime = vivify_exptime.unwrap_or(0);
                }
                _ => return not(StoreOutcome::NotStored),
            }
            let cas = self.write_new(h, key, hdr, [value, &[]], now)?;
            return Ok(Stored {
                outcome: StoreOutcome::Stored,
                cas,
            });
        };
        let have = self.cas_of(&at.header);
        let cas_match = match opts.cas {
            None | Some(0) => None,
            Some(c) => Some(c == have),
        };
        match opts.mode {
            StoreMode::Add => {
                // memcached bumps the existing item on a failed add.
                self.arena.set_bits(e, at.header.bits | VISITED);
                return not(StoreOutcome::NotStored);
            }
            _ if cas_mode => {
                // Per class: the class of the item replaced or kept, as memcached's old_it.
                let old_len = at.header.logical_len();
                if cas_match == Some(true) {
                    self.stats.counters.cas_hits += 1;
                    self.stats.class_counters(old_len).cas_hits += 1;
                } else if opts.invalidate && opts.cas.is_some_and(|c| c != 0 && c < have) {
                    // A late writer with an older version: accepted, but readers are told
                    // the value is stale; the TTL and any handed-out win token carry over.
                    self.stats.counters.cas_hits += 1;
                    self.stats.class_counters(old_len).cas_hits += 1;
                    hdr.bits |= STALE | (at.header.bits & WIN_SENT);
                    hdr.exptime = at.header.exptime;
                } else {
                    self.stats.counters.cas_badval += 1;
                    self.stats.class_counters(old_len).cas_badval += 1;
                    return not(StoreOutcome::Exists);
                }
            }
            StoreMode::Set | StoreMode::Replace => {}
            StoreMode::Append | StoreMode::Prepend => {
                if cas_match == Some(false) {
                    return not(StoreOutcome::Exists);
                }
                let joined = at.header.vlen as usize + value.len();
                // memcached allocates the joined item with one byte more than a set of the
                // same length would, and answers NOT_STORED when that does not fit.
                if !item_fits(
                    self.cfg.item_size_max,
                    key.len(),
                    joined + 1,
                    at.header.flags,
                ) {
                    return not(StoreOutcome::NotStored);
                }
                hdr.flags = at.header.flags;
                hdr.exptime = at.header.exptime;
                // memcached refuses to append to a value on flash (its `ITEM_HDR` items).
                let Value::Bytes(old) = self.arena.value_of(e, &at) else {
                    return not(StoreOutcome::NotStored);
                };
                let mut scratch = std::mem::take(&mut self.scratch);
                scratch.clear();
                scratch.extend_from_slice(old);
                let parts: [&[u8]; 2] = if opts.mode == StoreMode::Append {
                    [&scratch, value]
                } else {
                    [value, &scratch]
                };
                let r = self.write_new(h, key, hdr, parts, now);
                self.scratch = scratch;
                return r.map(|cas| Stored {
                    outcome: StoreOutcome::Stored,
                    cas,
                });
            }
        }
        let cas = self.write_new(h, key, hdr, [value, &[]], now)?;
        Ok(Stored {
            outcome: StoreOutcome::Stored,
            cas,
        })
    }

    /// Removes a key if present, with no statistics: the aftermath of a failed `set`.
    pub fn drop_key(&mut self, h: u64, key: &[u8], now: u32) {
        if let Found::Live(e, at) = self.lookup(h, key, now) {
            self.unlink(h, e, &at, false);
        }
    }

    /// `delete` and `md`.
    pub fn delete(
        &mut self,
        h: u64,
        key: &[u8],
        opts: &DeleteOptions,
        stale_exptime: Option<u32>,
        now: u32,
    ) -> Result<DeleteOutcome> {
        let Found::Live(e, at) = self.lookup(h, key, now) else {
            self.stats.counters.delete_misses += 1;
            return Ok(DeleteOutcome::NotFound);
        };
        if let Some(want) = opts.cas
            && want != self.cas_of(&at.header)
        {
            self.stats.counters.delete_misses += 1;
            return Ok(DeleteOutcome::Exists);
        }
        if opts.remove_value {
            // `x`: an empty tombstone in place of the value, same CAS unless `E` says.
            let hdr = Header {
                exptime: stale_exptime.unwrap_or(0),
                ext_cas: Some(opts.new_cas.unwrap_or(self.cas_of(&at.header))),
                ..Header::default()
            };
            self.write_new(h, key, hdr, [&[], &[]], now)?;
        }
        if opts.invalidate {
            let Some((e, _)) = self.find(h, key) else {
                return Ok(DeleteOutcome::NotFound);
            };
            let new_cas = opts.new_cas;
            self.rewrite(h, key, e, now, |hdr, seq| {
                if let Some(t) = stale_exptime {
                    hdr.exptime = t;
                }
                hdr.bits = (hdr.bits | STALE) & !WIN_SENT;
                hdr.seq = seq;
                hdr.ext_cas = new_cas;
            })?;
            return Ok(DeleteOutcome::Deleted);
        }
        self.stats.counters.delete_hits += 1;
        self.stats
            .class_counters(at.header.logical_len())
            .delete_hits += 1;
        if !opts.remove_value {
            self.unlink(h, e, &at, false);
        }
        Ok(DeleteOutcome::Deleted)
    }

    /// `incr`/`decr`/`ma`.
    pub fn arithmetic(
        &mut self,
        h: u64,
        key: &[u8],
        opts: &ArithOptions,
        ttl_exptime: Option<u32>,
        t: Times,
    ) -> Result<ArithOutcome> {
        let Times {
            vivify: vivify_exptime,
            now,
            ..
        } = t;
        let incr = opts.mode == ArithMode::Incr;
        let miss = |s: &mut Self| {
            if incr {
                s.stats.counters.incr_misses += 1;
            } else {
                s.stats.counters.decr_misses += 1;
            }
        };
        let Found::Live(e, at) = self.lookup(h, key, now) else {
            miss(self);
            let (Some((initial, _)), Some(exp)) = (opts.vivify, vivify_exptime) else {
                return Ok(ArithOutcome::NotFound);
            };
            let digits = initial.to_string();
            // `T` on a vivified counter overrides `N`'s TTL.
            let exp = ttl_exptime.unwrap_or(exp);
            let hdr = Header {
                exptime: exp,
                ext_cas: opts.new_cas,
                ..Header::default()
            };
            let cas = self.write_new(h, key, hdr, [digits.as_bytes(), &[]], now)?;
            return Ok(ArithOutcome::Value {
                value: initial,
                cas,
                ttl: remaining(exp, now),
            });
        };
        // A value on flash is over `ext_item_size`: never a number memcached would take.
        let Value::Bytes(value) = self.arena.value_of(e, &at) else {
            return Ok(ArithOutcome::NonNumeric);
        };
        // memcached refuses empty values and chunked items (over half the item size limit)
        // before looking at the CAS or the digits.
        let chunked = !item_fits(
            self.cfg.item_size_max / 2,
            key.len(),
            value.len(),
            at.header.flags,
        );
        if value.is_empty() || chunked {
            return Ok(ArithOutcome::NonNumeric);
        }
        if opts
            .cas
            .is_some_and(|c| c != 0 && c != self.cas_of(&at.header))
        {
            return Ok(ArithOutcome::Exists);
        }
        let old_len = value.len();
        let Some(old) = numeric::parse_u64(value) else {
            return Ok(ArithOutcome::NonNumeric);
        };
        let class = self.stats.class_counters(at.header.logical_len());
        let new = if incr {
            class.incr_hits += 1;
            self.stats.counters.incr_hits += 1;
            old.wrapping_add(opts.delta)
        } else {
            class.decr_hits += 1;
            self.stats.counters.decr_hits += 1;
            old.saturating_sub(opts.delta)
        };
        let mut digits = std::mem::take(&mut self.scratch);
        numeric::render(new, old_len, &mut digits);
        // When the digits fit, memcached rewrites in place: padded, keeping the item's
        // stale/win/fetched marks. A longer number is a new item without them.
        let in_place = digits.len() == old_len;
        let hdr = Header {
            bits: if in_place {
                at.header.bits & (FETCHED | STALE | WIN_SENT)
            } else {
                0
            },
            flags: at.header.flags,
            exptime: ttl_exptime.unwrap_or(at.header.exptime),
            ext_cas: opts.new_cas,
            ..Header::default()
        };
        let r = self.write_new(h, key, hdr, [&digits, &[]], now);
        self.scratch = digits;
        let cas = r?;
        Ok(ArithOutcome::Value {
            value: new,
            cas,
            ttl: remaining(hdr.exptime, now),
        })
    }
}

fn ttl_of(exptime: u32, now: u32) -> Ttl {
    match remaining(exptime, now) {
        None => Ttl::Never,
        Some(s) => Ttl::Secs(s),
    }
}

fn remaining(exptime: u32, now: u32) -> Option<u32> {
    (exptime != 0).then(|| exptime.saturating_sub(now))
}
