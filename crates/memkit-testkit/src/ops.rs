//! Model-based property testing: an op language over [`Memcache`], proptest strategies for
//! op sequences, and [`compare`], which runs one sequence on a backend and on a fresh
//! [`Model`] and reports the first divergence.
//!
//! CAS tokens are implementation-defined, so results are compared with CAS values mapped by
//! identity: the n-th distinct token one side hands out must pair with one distinct token on
//! the other side, for the whole run. Explicit tokens (`E`) and 0 must match literally. A
//! `cas` op does not carry a number but a [`CasRef`], which each side resolves against the
//! tokens *it* has observed, so "use the CAS read by op i" means the same on both.
//!
//! Keys come from [`KEYS`], a space small enough that ops collide often.

use std::collections::HashMap;

use memkit_types::{
    ArithMode, ArithOptions, ArithOutcome, Cas, Clock, DeleteOptions, DeleteOutcome, Exptime,
    GetOptions, Item, ManualClock, Memcache, REALTIME_MAXDELTA, Result, StoreMode, StoreOptions,
    Stored,
};
use proptest::option::weighted;
use proptest::prelude::*;
use proptest::sample::select;

use crate::Model;

/// The key space of generated ops.
pub const KEYS: [&str; 4] = ["a", "b", "c", "num"];

/// Explicit CAS values (`E`) ops may use. They sit far above any counter a backend could
/// have reached, so their order relative to counter-issued tokens is the same everywhere.
pub const EXPLICIT_CAS: [Cas; 3] = [1 << 62, (1 << 62) + 1, (1 << 62) + 7];

/// A token no backend issues: above every counter value and every explicit one.
pub const BOGUS_CAS: Cas = u64::MAX - 1;

/// Where a CAS-carrying op gets its token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CasRef {
    /// The last CAS this side observed for the op's key (read, store or arithmetic), or
    /// [`BOGUS_CAS`] if none yet. Often older than the current one, which exercises
    /// mismatches and stale (`I`) stores.
    LastSeen,
    /// 0, which memcached treats as "no token" in places and as a mismatch in others.
    Zero,
    /// [`BOGUS_CAS`].
    Bogus,
}

/// One call on the trait, or a move of the clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// `get_multi` (keys may repeat).
    Get {
        /// Keys, aligned with the result.
        keys: Vec<&'static str>,
        /// Read options; `new_cas` only matters with `vivify`.
        opts: GetOptions,
    },
    /// `store`; `opts.cas` is replaced by the resolved `cas`.
    Store {
        /// The key.
        key: &'static str,
        /// The data.
        value: Vec<u8>,
        /// Mode, flags, TTL and meta options.
        opts: StoreOptions,
        /// Token for a CAS store.
        cas: Option<CasRef>,
    },
    /// `delete_with`; `opts.cas` is replaced by the resolved `cas`.
    Delete {
        /// The key.
        key: &'static str,
        /// Meta options.
        opts: DeleteOptions,
        /// Token for a compare-and-delete.
        cas: Option<CasRef>,
    },
    /// `arithmetic`; `opts.cas` is replaced by the resolved `cas`.
    Arith {
        /// The key.
        key: &'static str,
        /// Mode, delta and meta options.
        opts: ArithOptions,
        /// Token for a CAS-checked update.
        cas: Option<CasRef>,
    },
    /// `touch`.
    Touch {
        /// The key.
        key: &'static str,
        /// The new expiry.
        exptime: Exptime,
    },
    /// `flush_all`.
    FlushAll {
        /// Seconds until the flush (0: now); above 30 days an absolute time.
        delay: u32,
    },
    /// Moves both clocks forward.
    Advance {
        /// How far, in milliseconds (sub-second steps check one-second granularity).
        millis: u64,
    },
}

/// What an op returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// From [`Op::Get`].
    Get(Result<Vec<Option<Item>>>),
    /// From [`Op::Store`].
    Store(Result<Stored>),
    /// From [`Op::Delete`].
    Delete(Result<DeleteOutcome>),
    /// From [`Op::Arith`].
    Arith(Result<ArithOutcome>),
    /// From [`Op::Touch`].
    Touch(Result<bool>),
    /// From [`Op::FlushAll`].
    Flush(Result<()>),
    /// From [`Op::Advance`].
    Advanced,
}

fn exptime() -> impl Strategy<Value = Exptime> {
    prop_oneof![
        3 => Just(Exptime::NEVER),
        4 => (1i64..4).prop_map(Exptime),
        1 => Just(Exptime(100)),
        1 => Just(Exptime::EXPIRED),
        1 => Just(Exptime(REALTIME_MAXDELTA + 1)),
        1 => Just(Exptime(2_000_000_000)),
        1 => Just(Exptime(REALTIME_MAXDELTA)),
    ]
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        1 => Just(Vec::new()),
        4 => (0u64..1000).prop_map(|n| n.to_string().into_bytes()),
        1 => Just(b"18446744073709551615".to_vec()),
        1 => Just(b" 7".to_vec()),
        1 => Just(b"9 ".to_vec()),
        2 => prop::collection::vec(any::<u8>(), 0..6),
    ]
}

fn flags() -> impl Strategy<Value = u32> {
    prop_oneof![3 => Just(0u32), 1 => Just(1u32), 1 => any::<u32>()]
}

fn cas_ref() -> impl Strategy<Value = Option<CasRef>> {
    weighted(
        0.35,
        prop_oneof![
            6 => Just(CasRef::LastSeen),
            1 => Just(CasRef::Zero),
            1 => Just(CasRef::Bogus),
        ],
    )
}

fn new_cas() -> impl Strategy<Value = Option<Cas>> {
    weighted(0.08, select(&EXPLICIT_CAS[..]))
}

fn key() -> impl Strategy<Value = &'static str> {
    select(&KEYS[..])
}

fn get_op() -> impl Strategy<Value = Op> {
    let opts = (
        weighted(0.15, exptime()),
        weighted(0.2, exptime()),
        weighted(0.15, select(&[0u32, 1, 2, 3, 100][..])),
        any::<bool>(),
        weighted(0.2, Just(())),
        new_cas(),
    )
        .prop_map(
            |(touch, vivify, recache_below, meta, no_bump, new_cas)| GetOptions {
                touch,
                vivify,
                recache_below,
                meta,
                ttl_before_touch: false,
                ttl_before_vivify: false,
                no_bump: no_bump.is_some(),
                new_cas,
                classic: false,
                replica: None,
            },
        );
    (prop::collection::vec(key(), 1..4), opts).prop_map(|(keys, opts)| Op::Get { keys, opts })
}

fn store_op() -> impl Strategy<Value = Op> {
    let mode = select(
        &[
            StoreMode::Set,
            StoreMode::Add,
            StoreMode::Replace,
            StoreMode::Append,
            StoreMode::Prepend,
        ][..],
    );
    (
        key(),
        value(),
        (mode, flags(), exptime()),
        (weighted(0.3, Just(())), weighted(0.2, exptime()), new_cas()),
        cas_ref(),
    )
        .prop_map(
            |(key, value, (mode, flags, exptime), (invalidate, vivify, new_cas), cas)| Op::Store {
                key,
                value,
                opts: StoreOptions {
                    mode,
                    flags,
                    exptime,
                    cas: None,
                    invalidate: invalidate.is_some(),
                    vivify,
                    new_cas,
                },
                cas,
            },
        )
}

fn delete_op() -> impl Strategy<Value = Op> {
    (
        key(),
        weighted(0.35, Just(())),
        weighted(0.3, exptime()),
        weighted(0.15, Just(())),
        new_cas(),
        cas_ref(),
    )
        .prop_map(
            |(key, invalidate, stale_ttl, remove_value, new_cas, cas)| Op::Delete {
                key,
                opts: DeleteOptions {
                    cas: None,
                    invalidate: invalidate.is_some(),
                    stale_ttl,
                    remove_value: remove_value.is_some(),
                    new_cas,
                },
                cas,
            },
        )
}

fn arith_op() -> impl Strategy<Value = Op> {
    let delta = prop_oneof![
        6 => 0u64..5,
        1 => Just(u64::MAX),
        1 => Just(u64::MAX - 1),
        1 => Just(1000u64),
    ];
    let initial = prop_oneof![4 => 0u64..20, 1 => Just(u64::MAX)];
    (
        key(),
        select(&[ArithMode::Incr, ArithMode::Decr][..]),
        delta,
        weighted(0.3, (initial, exptime())),
        weighted(0.15, exptime()),
        new_cas(),
        cas_ref(),
    )
        .prop_map(
            |(key, mode, delta, vivify, update_ttl, new_cas, cas)| Op::Arith {
                key,
                opts: ArithOptions {
                    mode,
                    delta,
                    vivify,
                    cas: None,
                    update_ttl,
                    new_cas,
                },
                cas,
            },
        )
}

/// One op, weighted towards reads and writes.
pub fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => get_op(),
        6 => store_op(),
        2 => delete_op(),
        3 => arith_op(),
        1 => (key(), exptime()).prop_map(|(key, exptime)| Op::Touch { key, exptime }),
        1 => prop_oneof![
            2 => Just(0u32),
            3 => 1u32..4,
            1 => Just(2_000_000_000u32),
        ]
        .prop_map(|delay| Op::FlushAll { delay }),
        3 => prop_oneof![
            2 => (1u64..4).prop_map(|s| s * 1000),
            1 => 1u64..1000,
        ]
        .prop_map(|millis| Op::Advance { millis }),
    ]
}

/// A sequence of ops, its length drawn from `len`.
pub fn ops(len: impl Into<prop::collection::SizeRange>) -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(), len)
}

/// One implementation's view while a sequence runs: the tokens it has observed per key.
#[derive(Debug, Default, Clone)]
struct Side {
    seen: HashMap<&'static str, Cas>,
}

impl Side {
    fn resolve(&self, key: &'static str, cas: Option<CasRef>) -> Option<Cas> {
        cas.map(|r| match r {
            CasRef::LastSeen => self.seen.get(key).copied().unwrap_or(BOGUS_CAS),
            CasRef::Zero => 0,
            CasRef::Bogus => BOGUS_CAS,
        })
    }

    async fn apply<M: Memcache>(&mut self, store: &M, clock: &ManualClock, op: &Op) -> Outcome {
        let out = match op {
            Op::Get { keys, opts } => {
                let keys: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
                Outcome::Get(store.get_multi(&keys, opts).await)
            }
            Op::Store {
                key,
                value,
                opts,
                cas,
            } => {
                let opts = StoreOptions {
                    cas: self.resolve(key, *cas),
                    ..opts.clone()
                };
                Outcome::Store(store.store(key.as_bytes(), value, &opts).await)
            }
            Op::Delete { key, opts, cas } => {
                let opts = DeleteOptions {
                    cas: self.resolve(key, *cas),
                    ..opts.clone()
                };
                Outcome::Delete(store.delete_with(key.as_bytes(), &opts).await)
            }
            Op::Arith { key, opts, cas } => {
                let opts = ArithOptions {
                    cas: self.resolve(key, *cas),
                    ..opts.clone()
                };
                Outcome::Arith(store.arithmetic(key.as_bytes(), &opts).await)
            }
            Op::Touch { key, exptime } => {
                Outcome::Touch(store.touch(key.as_bytes(), *exptime).await)
            }
            Op::FlushAll { delay } => Outcome::Flush(store.flush_all(*delay).await),
            Op::Advance { millis } => {
                clock.advance_millis(*millis);
                Outcome::Advanced
            }
        };
        self.observe(op, &out);
        out
    }

    fn observe(&mut self, op: &Op, out: &Outcome) {
        match (op, out) {
            (Op::Get { keys, .. }, Outcome::Get(Ok(items))) => {
                for (key, item) in keys.iter().zip(items) {
                    if let Some(item) = item {
                        self.seen.insert(key, item.cas);
                    }
                }
            }
            (Op::Store { key, .. }, Outcome::Store(Ok(s))) if s.cas != 0 => {
                self.seen.insert(key, s.cas);
            }
            (Op::Arith { key, .. }, Outcome::Arith(Ok(ArithOutcome::Value { cas, .. }))) => {
                self.seen.insert(key, *cas);
            }
            _ => {}
        }
    }
}

/// Takes every CAS out of an outcome (in a fixed order) and blanks what implementations may
/// legitimately differ on: CAS numbers and `last_access` (and `fetched` if asked).
fn normalise(out: &Outcome, ignore_fetched: bool) -> (Outcome, Vec<Cas>) {
    let mut out = out.clone();
    let mut cas = Vec::new();
    match &mut out {
        Outcome::Get(Ok(items)) => {
            for item in items.iter_mut().flatten() {
                cas.push(std::mem::take(&mut item.cas));
                item.last_access = item.last_access.map(|_| 0);
                if ignore_fetched {
                    item.fetched = item.fetched.map(|_| false);
                }
            }
        }
        Outcome::Store(Ok(s)) => cas.push(std::mem::take(&mut s.cas)),
        Outcome::Arith(Ok(ArithOutcome::Value { cas: c, .. })) => cas.push(std::mem::take(c)),
        _ => {}
    }
    (out, cas)
}

/// Pairs of tokens seen so far, model -> backend and back.
#[derive(Debug, Default)]
struct CasMap {
    forward: HashMap<Cas, Cas>,
    backward: HashMap<Cas, Cas>,
}

impl CasMap {
    fn pair(&mut self, model: Cas, backend: Cas) -> std::result::Result<(), String> {
        let literal = |c: Cas| c == 0 || EXPLICIT_CAS.contains(&c);
        if literal(model) || literal(backend) {
            return if model == backend {
                Ok(())
            } else {
                Err(format!("CAS {backend} where the model has {model}"))
            };
        }
        let f = *self.forward.entry(model).or_insert(backend);
        let b = *self.backward.entry(backend).or_insert(model);
        if f != backend {
            return Err(format!(
                "CAS {backend} where the model's token {model} was earlier seen as {f}"
            ));
        }
        if b != model {
            return Err(format!(
                "CAS {backend} stands for two model tokens ({b} and {model})"
            ));
        }
        Ok(())
    }
}

/// Runs `ops` on `backend` (whose clock is `backend_clock`) and on a fresh [`Model`] whose
/// clock starts at the same instant and moves with it. Returns the first divergence, naming
/// the op index and both results; after the last op every key is read back with metadata.
///
/// The backend must start empty and must not evict during the run (see [`compare_with`]
/// for one that may).
pub async fn compare<M: Memcache>(
    backend: &M,
    backend_clock: &ManualClock,
    ops: &[Op],
) -> std::result::Result<(), String> {
    compare_with(
        backend,
        backend_clock,
        ops,
        &CompareOptions::default(),
        |_| {},
    )
    .await
}

/// What [`compare_with`] needs to know beyond the ops.
#[derive(Clone, Copy)]
pub struct CompareOptions<'a> {
    /// Keys read back after the last op: every key the ops may use.
    pub keys: &'a [&'static str],
    /// Takes the keys the backend evicted since the last call (an eviction hook feeding a
    /// buffer). `None`: the backend must not evict.
    pub evicted: Option<&'a (dyn Fn() -> Vec<Vec<u8>> + Sync)>,
    /// The item size limit (`-I`) the backend was given.
    pub item_size_max: usize,
    /// Blank the `h` flag on both sides: for a backend where it is a RAM-only hint that an
    /// eviction or a restart resets (persistent mode).
    pub ignore_fetched: bool,
}

impl Default for CompareOptions<'_> {
    fn default() -> Self {
        CompareOptions {
            keys: &KEYS,
            evicted: None,
            item_size_max: memkit_types::DEFAULT_ITEM_SIZE_MAX,
            ignore_fetched: false,
        }
    }
}

impl std::fmt::Debug for CompareOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompareOptions")
            .field("keys", &self.keys)
            .field("evicted", &self.evicted.is_some())
            .field("item_size_max", &self.item_size_max)
            .field("ignore_fetched", &self.ignore_fetched)
            .finish()
    }
}

/// The keys an op reads or writes.
fn op_keys(op: &Op) -> Vec<&'static str> {
    match op {
        Op::Get { keys, .. } => keys.clone(),
        Op::Store { key, .. }
        | Op::Delete { key, .. }
        | Op::Arith { key, .. }
        | Op::Touch { key, .. } => vec![key],
        Op::FlushAll { .. } | Op::Advance { .. } => Vec::new(),
    }
}

/// An op's `Debug` with a large value shown as its length and first bytes: divergence
/// reports of fuzzed programs stay readable.
pub fn short(op: &Op) -> String {
    match op {
        Op::Store { value, .. } if value.len() > 16 => {
            let mut op = op.clone();
            if let Op::Store { value: v, .. } = &mut op {
                v.truncate(8);
            }
            format!("{op:?} (value: {} bytes)", value.len())
        }
        _ => format!("{op:?}"),
    }
}

/// What a peek shows of an item: what the op left, without tokens, times or win flags
/// (the backend's peek is a classic read, the model's is not).
fn peek_view(items: Result<Vec<Option<Item>>>) -> Result<Vec<Option<Item>>> {
    items.map(|v| {
        v.into_iter()
            .map(|i| {
                i.map(|i| Item {
                    cas: 0,
                    last_access: None,
                    win: false,
                    win_taken: false,
                    ..i
                })
            })
            .collect()
    })
}

/// Runs `op` on the model when the backend evicted one of the op's own keys during it:
/// tries "evicted before the op" and then "only an old copy was evicted", and keeps the
/// first whose answer matches the backend's (`got`) and whose resulting items match what a
/// side-effect-free read (classic, no bump) of the backend shows. Failing that, the first
/// whose answer matches; failing that, the second (the divergence is reported next).
async fn ambiguous<M: Memcache>(
    backend: &M,
    (model, model_clock): (&Model, &ManualClock),
    side: &Side,
    op: &Op,
    own_evicted: &[Vec<u8>],
    got: &Outcome,
    ignore_fetched: bool,
) -> (Outcome, Side) {
    let keys: Vec<&[u8]> = own_evicted.iter().map(|k| &k[..]).collect();
    let peek = GetOptions {
        meta: true,
        no_bump: true,
        classic: true,
        ..Default::default()
    };
    let backend_view = peek_view(backend.get_multi(&keys, &peek).await);
    let before = model.snapshot();
    let mut fallback = None;
    for forget_first in [true, false] {
        model.restore(before.clone());
        let mut s = side.clone();
        if forget_first {
            for k in own_evicted {
                model.forget(k);
            }
        }
        let out = s.apply(model, model_clock, op).await;
        let after = model.snapshot();
        // The model's read may hand out a win token: look, then put the state back.
        let model_view = peek_view(model.get_multi_now(&keys, &peek));
        model.restore(after.clone());
        if normalise(&out, ignore_fetched).0 != *got {
            continue;
        }
        if model_view == backend_view {
            return (out, s);
        }
        if fallback.is_none() {
            fallback = Some((out, s, after));
        }
    }
    if let Some((out, s, after)) = fallback {
        model.restore(after);
        return (out, s);
    }
    model.restore(before);
    let mut s = side.clone();
    (s.apply(model, model_clock, op).await, s)
}

/// [`compare`] for a backend that may evict. Each op runs on the backend first; the keys it
/// evicted meanwhile are then dropped from the model ([`Model::forget`]) before the model
/// runs the op, as if the eviction happened just before it. An eviction is the one thing the
/// model cannot predict, so this is the only freedom the backend gets: every answer must
/// still be one memcached could give after losing exactly those keys.
///
/// A key the op itself uses is ambiguous: the backend may have evicted it before reading it
/// (the op then sees a miss) or evicted the old copy while making room for the new one (the
/// op saw it). Both readings are tried on the model (see `ambiguous`) and the one matching
/// the backend's answer and resulting item is kept.
///
/// `between(i)` runs before op `i` reaches the backend (and with `ops.len()` before the final
/// read-back), so a test can disturb the backend where the model sees nothing: evict its RAM,
/// close and reopen a persistent store. Whatever it does must not change what the backend
/// answers.
pub async fn compare_with<M: Memcache>(
    backend: &M,
    backend_clock: &ManualClock,
    ops: &[Op],
    opts: &CompareOptions<'_>,
    mut between: impl FnMut(usize),
) -> std::result::Result<(), String> {
    let start = backend_clock.now_millis();
    let model_clock = ManualClock::new(start / 1000);
    model_clock.advance_millis(start % 1000);
    let model = Model::with_item_size_max(model_clock.clone(), opts.item_size_max);
    let (mut ms, mut bs) = (Side::default(), Side::default());
    let mut cas_map = CasMap::default();
    let final_read = Op::Get {
        keys: opts.keys.to_vec(),
        opts: GetOptions {
            meta: true,
            no_bump: true,
            ..Default::default()
        },
    };
    for (i, op) in ops.iter().chain(std::iter::once(&final_read)).enumerate() {
        between(i);
        let got = bs.apply(backend, backend_clock, op).await;
        let evicted = opts.evicted.map(|f| f()).unwrap_or_default();
        let own = op_keys(op);
        let (own_evicted, other): (Vec<_>, Vec<_>) = evicted
            .into_iter()
            .partition(|k| own.iter().any(|o| o.as_bytes() == &k[..]));
        for k in &other {
            model.forget(k);
        }
        let (g, g_cas) = normalise(&got, opts.ignore_fetched);
        let expected = if own_evicted.is_empty() {
            ms.apply(&model, &model_clock, op).await
        } else {
            let (out, side) = ambiguous(
                backend,
                (&model, &model_clock),
                &ms,
                op,
                &own_evicted,
                &g,
                opts.ignore_fetched,
            )
            .await;
            ms = side;
            out
        };
        let (e, e_cas) = normalise(&expected, opts.ignore_fetched);
        let label = if i == ops.len() {
            "final read-back".to_string()
        } else {
            format!("op #{i}")
        };
        let diverged = |why: String| {
            format!(
                "{label} {}: {why}\n  backend: {got:?}\n  model:   {expected:?}",
                short(op)
            )
        };
        if e != g || e_cas.len() != g_cas.len() {
            return Err(diverged("results differ".into()));
        }
        for (m, b) in e_cas.into_iter().zip(g_cas) {
            cas_map.pair(m, b).map_err(diverged)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cas_map_is_a_bijection() {
        let mut m = CasMap::default();
        assert!(m.pair(1, 100).is_ok());
        assert!(m.pair(1, 100).is_ok());
        assert!(
            m.pair(2, 100).is_err(),
            "two model tokens, one backend token"
        );
        assert!(
            m.pair(1, 101).is_err(),
            "one model token, two backend tokens"
        );
        assert!(m.pair(0, 0).is_ok());
        assert!(m.pair(0, 5).is_err());
        assert!(m.pair(EXPLICIT_CAS[0], EXPLICIT_CAS[0]).is_ok());
        assert!(m.pair(EXPLICIT_CAS[0], 7).is_err());
    }
}
