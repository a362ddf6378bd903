//! Op sequences from raw bytes, for coverage-guided fuzzing of a backend against the model.
//!
//! A fuzzer hands out byte strings; [`decode_ops`] reads them as a little program of
//! [`Op`]s. The format is written by hand rather than derived (`arbitrary`) so that the
//! checked-in corpus means the same thing to the cargo-fuzz target and to the stable replay
//! test, and does not shift meaning when a dependency changes its encoding. Any byte string
//! decodes; bytes missing at the end of an op read as zero, and decoding stops when the
//! input runs out at an op boundary.
//!
//! Compared with the proptest strategies in [`crate::ops`] the key space is larger
//! ([`FUZZ_KEYS`]) and values can be large (up to 64 KiB), so that a backend with a small
//! memory budget evicts: pair it with [`crate::ops::compare_with`] and an eviction hook.

use memkit_types::{
    ArithMode, ArithOptions, Cas, DeleteOptions, Exptime, GetOptions, REALTIME_MAXDELTA, StoreMode,
    StoreOptions,
};

use crate::ops::{CasRef, EXPLICIT_CAS, Op};

/// The key space of decoded ops: enough keys that large values overflow a 1 MiB budget.
pub const FUZZ_KEYS: [&str; 24] = [
    "a", "b", "c", "num", "k04", "k05", "k06", "k07", "k08", "k09", "k10", "k11", "k12", "k13",
    "k14", "k15", "k16", "k17", "k18", "k19", "k20", "k21", "k22", "k23",
];

/// The longest decoded op sequence: bounds one fuzz iteration.
pub const MAX_OPS: usize = 400;

/// `ManualClock::default()`'s start, 2024-01-01T00:00:00Z: absolute expiry times near it
/// exercise the relative/absolute boundary where it matters.
const CLOCK_START: i64 = 1_704_067_200;

/// Expiry times worth trying: never, a few seconds, past, the 30-day boundary on both
/// sides, absolute times just after the clock's start and far in the future.
const EXPTIMES: [Exptime; 12] = [
    Exptime::NEVER,
    Exptime(1),
    Exptime(2),
    Exptime(3),
    Exptime(100),
    Exptime::EXPIRED,
    Exptime(REALTIME_MAXDELTA),
    Exptime(REALTIME_MAXDELTA + 1),
    Exptime(2_000_000_000),
    Exptime(CLOCK_START + 2),
    Exptime(CLOCK_START),
    Exptime(-1000),
];

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn done(&self) -> bool {
        self.pos >= self.data.len()
    }

    fn u8(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.u8() as usize % from.len()]
    }

    fn key(&mut self) -> &'static str {
        self.pick(&FUZZ_KEYS)
    }

    fn exptime(&mut self) -> Exptime {
        self.pick(&EXPTIMES)
    }

    /// `Some` when bit `bit` of `flags` is set.
    fn maybe<T>(&mut self, flags: u8, bit: u8, f: impl FnOnce(&mut Self) -> T) -> Option<T> {
        (flags & (1 << bit) != 0).then(|| f(self))
    }

    fn new_cas(&mut self) -> Cas {
        self.pick(&EXPLICIT_CAS)
    }

    fn cas_ref(&mut self, flags: u8) -> Option<CasRef> {
        // Two bits: none most often, then the last seen token, zero, a bogus one.
        match (flags >> 6) & 3 {
            0 => None,
            1 => Some(CasRef::LastSeen),
            2 => Some(if flags & 1 != 0 {
                CasRef::Zero
            } else {
                CasRef::LastSeen
            }),
            _ => Some(CasRef::Bogus),
        }
    }

    fn value(&mut self) -> Vec<u8> {
        match self.u8() % 10 {
            0 => Vec::new(),
            1..=3 => self.u16().to_string().into_bytes(),
            4 => b"18446744073709551615".to_vec(),
            5 => self
                .pick(&[&b" 7"[..], b"9 ", b"-1", b"+3", b"1\x002"])
                .to_vec(),
            6 => {
                let n = self.u8() % 8;
                (0..n).map(|_| self.u8()).collect()
            }
            // Large values: what makes a 1 MiB budget evict.
            _ => vec![self.u8(); usize::from(self.u16())],
        }
    }

    fn flags(&mut self) -> u32 {
        match self.u8() % 4 {
            0 | 3 => 0,
            1 => 1,
            _ => self.u32(),
        }
    }
}

/// Decodes `data` into at most [`MAX_OPS`] ops. Total: every input gives some sequence.
pub fn decode_ops(data: &[u8]) -> Vec<Op> {
    let mut r = Reader { data, pos: 0 };
    let mut ops = Vec::new();
    while !r.done() && ops.len() < MAX_OPS {
        ops.push(decode_op(&mut r));
    }
    ops
}

fn decode_op(r: &mut Reader<'_>) -> Op {
    match r.u8() % 16 {
        0..=2 => {
            let n = 1 + r.u8() as usize % 3;
            let keys = (0..n).map(|_| r.key()).collect();
            let f = r.u8();
            let opts = GetOptions {
                touch: r.maybe(f, 0, Reader::exptime),
                vivify: r.maybe(f, 1, Reader::exptime),
                recache_below: r.maybe(f, 2, |r| r.pick(&[0u32, 1, 2, 3, 100])),
                meta: f & (1 << 3) != 0,
                ttl_before_touch: false,
                ttl_before_vivify: false,
                no_bump: f & (1 << 4) != 0,
                new_cas: r.maybe(f, 5, Reader::new_cas),
                classic: false,
                replica: None,
            };
            Op::Get { keys, opts }
        }
        3..=7 => {
            let key = r.key();
            let mode = r.pick(&[
                StoreMode::Set,
                StoreMode::Set,
                StoreMode::Add,
                StoreMode::Replace,
                StoreMode::Append,
                StoreMode::Prepend,
            ]);
            let value = r.value();
            let (flags, exptime) = (r.flags(), r.exptime());
            let f = r.u8();
            let opts = StoreOptions {
                mode,
                flags,
                exptime,
                cas: None,
                invalidate: f & 1 != 0,
                vivify: r.maybe(f, 1, Reader::exptime),
                new_cas: r.maybe(f, 2, Reader::new_cas),
            };
            Op::Store {
                key,
                value,
                opts,
                cas: r.cas_ref(f),
            }
        }
        8 => {
            let key = r.key();
            let f = r.u8();
            let opts = DeleteOptions {
                cas: None,
                invalidate: f & 1 != 0,
                stale_ttl: r.maybe(f, 1, Reader::exptime),
                remove_value: f & (1 << 2) != 0,
                new_cas: r.maybe(f, 3, Reader::new_cas),
            };
            Op::Delete {
                key,
                opts,
                cas: r.cas_ref(f),
            }
        }
        9..=10 => {
            let key = r.key();
            let f = r.u8();
            let mode = if f & 1 == 0 {
                ArithMode::Incr
            } else {
                ArithMode::Decr
            };
            let delta = match r.u8() % 8 {
                0 => u64::MAX,
                1 => u64::MAX - 1,
                2 => 1000,
                n => u64::from(n) - 3,
            };
            let opts = ArithOptions {
                mode,
                delta,
                vivify: r.maybe(f, 1, |r| {
                    let initial = match r.u8() % 5 {
                        0 => u64::MAX,
                        n => u64::from(n),
                    };
                    (initial, r.exptime())
                }),
                cas: None,
                update_ttl: r.maybe(f, 2, Reader::exptime),
                new_cas: r.maybe(f, 3, Reader::new_cas),
            };
            Op::Arith {
                key,
                opts,
                cas: r.cas_ref(f),
            }
        }
        11 => Op::Touch {
            key: r.key(),
            exptime: r.exptime(),
        },
        12 => Op::FlushAll {
            delay: r.pick(&[0u32, 0, 1, 2, 3, 2_000_000_000, CLOCK_START as u32 + 5]),
        },
        _ => Op::Advance {
            millis: match r.u8() % 4 {
                0 => u64::from(r.u8()) * 10,
                3 => u64::from(r.u8()) * 1000,
                n => u64::from(n) * 1000,
            },
        },
    }
}

/// The checked-in seeds of fuzz target `target` (`fuzz/corpus/<target>/`), sorted by
/// content (so a mutation run picks the same seeds on every machine), for the stable replay
/// tests of every crate; panics when there are none (a moved corpus must not turn the
/// replay into a test of nothing).
pub fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut seeds: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.map(|e| {
                let path = e.expect("a corpus entry").path();
                std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            })
            .collect()
        })
        .unwrap_or_default();
    assert!(!seeds.is_empty(), "no seeds in {}", dir.display());
    seeds.sort();
    seeds
}

/// xorshift64*, the replay tests' mutation source: deterministic, so a failure reproduces.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_input_decodes_and_the_length_is_bounded() {
        assert!(decode_ops(b"").is_empty());
        assert_eq!(decode_ops(&[3]).len(), 1, "a truncated op reads zeros");
        assert_eq!(decode_ops(&[13; 10_000]).len(), MAX_OPS);
    }

    #[test]
    fn large_values_are_reachable() {
        // Store (3), key 4, mode set, value kind 7: 0xffff bytes of 'x'.
        let ops = decode_ops(&[3, 4, 0, 7, b'x', 0xff, 0xff]);
        match &ops[0] {
            Op::Store { key, value, .. } => {
                assert_eq!((*key, value.len()), ("k04", 0xffff));
            }
            other => panic!("{other:?}"),
        }
    }
}
