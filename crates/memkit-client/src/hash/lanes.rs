//! Ketama's MD5 key hash of many keys at once: eight keys a run, one in each 32-bit lane of
//! AVX2 registers, where the CPU has AVX2.
//!
//! One MD5 is a chain of 64 dependent steps, so a single key's hash waits on each step's
//! latency; eight independent keys fill the same steps' slots. A router hashes every key of
//! a multi-get (`docs/BENCHMARKS.md`, router: 34 ns a key here against 118 alone). Only keys
//! of one block (55 bytes or fewer, the usual) go in lanes; longer ones, a last run of one
//! or two keys and CPUs without AVX2 take [`super::md5_hash`]. The results are the scalar
//! ones, bit for bit (the tests compare them over every key length).

/// Keys that fit in one MD5 block with its padding.
const ONE_BLOCK: usize = 55;

/// [`super::md5_hash`] of each key, in order, into `out` (cleared first).
pub fn md5_hashes(keys: &[&[u8]], out: &mut Vec<u32>) {
    out.clear();
    out.resize(keys.len(), 0);
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: this CPU has AVX2.
        unsafe { x86::hash_all(keys, out) };
        return;
    }
    for (o, k) in out.iter_mut().zip(keys) {
        *o = super::md5_hash(k);
    }
}

/// The 16 little-endian words of `key`'s one padded block.
fn block(key: &[u8]) -> [u32; 16] {
    let mut b = [0u8; 64];
    b[..key.len()].copy_from_slice(key);
    b[key.len()] = 0x80;
    b[56..].copy_from_slice(&((key.len() as u64) * 8).to_le_bytes());
    let mut w = [0u32; 16];
    for (w, c) in w.iter_mut().zip(b.chunks_exact(4)) {
        *w = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    }
    w
}

/// RFC 1321's sine table.
#[rustfmt::skip]
const K: [u32; 64] = [
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
];

/// The initial state (A, B, C, D).
const INIT: [u32; 4] = [0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476];

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{INIT, K, ONE_BLOCK, block};

    /// Hashes every key into `out`: the one-block keys eight at a time (the last run's
    /// empty lanes repeat a key unless the run is too short to be worth it), the longer
    /// ones alone.
    #[target_feature(enable = "avx2")]
    pub fn hash_all(keys: &[&[u8]], out: &mut [u32]) {
        let mut lanes = [0usize; 8];
        let mut n = 0;
        let run = |lanes: &[usize; 8], out: &mut [u32], n: usize| {
            let mut words = [[0u32; 8]; 16];
            for (l, &k) in lanes.iter().enumerate() {
                for (w, v) in block(keys[k]).into_iter().enumerate() {
                    words[w][l] = v;
                }
            }
            let h = md5x8(&words);
            for (l, &i) in lanes[..n].iter().enumerate() {
                out[i] = h[l];
            }
        };
        for (i, k) in keys.iter().enumerate() {
            if k.len() > ONE_BLOCK {
                out[i] = super::super::md5_hash(k);
                continue;
            }
            lanes[n] = i;
            n += 1;
            if n == 8 {
                run(&lanes, out, 8);
                n = 0;
            }
        }
        // Eight lanes cost about as much as three keys hashed alone.
        if n >= 3 {
            let fill = lanes[0];
            lanes[n..].fill(fill);
            run(&lanes, out, n);
        } else {
            for &i in &lanes[..n] {
                out[i] = super::super::md5_hash(keys[i]);
            }
        }
    }

    /// One MD5 step on eight lanes: `b + ((a + f + m + k) <<< s)`; `$r` is `32 - $s`.
    macro_rules! step {
        ($a:expr, $b:expr, $f:expr, $m:expr, $k:expr, $s:literal, $r:literal) => {{
            let sum = _mm256_add_epi32(_mm256_add_epi32($a, $f), _mm256_add_epi32($m, $k));
            let rot = _mm256_or_si256(_mm256_slli_epi32::<$s>(sum), _mm256_srli_epi32::<$r>(sum));
            $a = _mm256_add_epi32($b, rot);
        }};
    }

    /// Four steps of a round: its function `$f` of the other three words, the message word
    /// `$g` picks for step `$i`, the round's four rotations (and 32 less each).
    macro_rules! four {
        ($st:ident, $m:ident, $f:ident, $g:expr, $i:expr, $s:literal $r:literal, $s1:literal $r1:literal,
         $s2:literal $r2:literal, $s3:literal $r3:literal) => {{
            let [a, b, c, d] = &mut $st;
            let k = |i: usize| _mm256_set1_epi32(K[i] as i32);
            step!(*a, *b, $f(*b, *c, *d), $m[$g($i)], k($i), $s, $r);
            step!(*d, *a, $f(*a, *b, *c), $m[$g($i + 1)], k($i + 1), $s1, $r1);
            step!(*c, *d, $f(*d, *a, *b), $m[$g($i + 2)], k($i + 2), $s2, $r2);
            step!(*b, *c, $f(*c, *d, *a), $m[$g($i + 3)], k($i + 3), $s3, $r3);
        }};
    }

    // The round functions, in forms of fewer operations than RFC 1321's.
    #[target_feature(enable = "avx2")]
    fn f(b: __m256i, c: __m256i, d: __m256i) -> __m256i {
        // (b & c) | (!b & d)
        _mm256_xor_si256(d, _mm256_and_si256(b, _mm256_xor_si256(c, d)))
    }
    #[target_feature(enable = "avx2")]
    fn g(b: __m256i, c: __m256i, d: __m256i) -> __m256i {
        // (b & d) | (c & !d)
        _mm256_xor_si256(c, _mm256_and_si256(d, _mm256_xor_si256(b, c)))
    }
    #[target_feature(enable = "avx2")]
    fn h(b: __m256i, c: __m256i, d: __m256i) -> __m256i {
        _mm256_xor_si256(_mm256_xor_si256(b, c), d)
    }
    #[target_feature(enable = "avx2")]
    fn i(b: __m256i, c: __m256i, d: __m256i) -> __m256i {
        // c ^ (b | !d)
        _mm256_xor_si256(
            c,
            _mm256_or_si256(b, _mm256_xor_si256(d, _mm256_set1_epi32(-1))),
        )
    }

    /// The first digest word (A, little-endian: ketama's hash) of eight one-block messages,
    /// `words[w][lane]` the message word `w` of each lane.
    #[target_feature(enable = "avx2")]
    fn md5x8(words: &[[u32; 8]; 16]) -> [u32; 8] {
        // SAFETY: each row is 32 bytes; the loads are unaligned.
        let m: [__m256i; 16] =
            std::array::from_fn(|w| unsafe { _mm256_loadu_si256(words[w].as_ptr().cast()) });
        let init = INIT.map(|v| _mm256_set1_epi32(v as i32));
        let mut st = init;
        let (g1, g2, g3, g4) = (
            |i: usize| i,
            |i: usize| (5 * i + 1) % 16,
            |i: usize| (3 * i + 5) % 16,
            |i: usize| (7 * i) % 16,
        );
        for q in 0..4 {
            four!(st, m, f, g1, q * 4, 7 25, 12 20, 17 15, 22 10);
        }
        for q in 4..8 {
            four!(st, m, g, g2, q * 4, 5 27, 9 23, 14 18, 20 12);
        }
        for q in 8..12 {
            four!(st, m, h, g3, q * 4, 4 28, 11 21, 16 16, 23 9);
        }
        for q in 12..16 {
            four!(st, m, i, g4, q * 4, 6 26, 10 22, 15 17, 21 11);
        }
        let a = _mm256_add_epi32(st[0], init[0]);
        let mut out = [0u32; 8];
        // SAFETY: `out` is 32 bytes; the store is unaligned.
        unsafe { _mm256_storeu_si256(out.as_mut_ptr().cast(), a) };
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::md5_hash;

    #[test]
    fn every_length_and_mix_agrees_with_the_scalar_hash() {
        // Keys of 0..=120 bytes (one block, the 55/56 edge, two blocks) interleaved, so runs
        // of eight hold keys of mixed lengths and the long ones sit between them.
        let keys: Vec<Vec<u8>> = (0..=600u32)
            .map(|i| {
                let len = (i * 7 % 121) as usize;
                (0..len).map(|j| (i as usize * 31 + j * 13) as u8).collect()
            })
            .collect();
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        // The lanes themselves: where they cannot run, `md5_hashes` is the scalar hash and
        // this test would compare it with itself, so CI's machine must have them.
        #[cfg(target_arch = "x86_64")]
        let lanes = std::is_x86_feature_detected!("avx2");
        #[cfg(not(target_arch = "x86_64"))]
        let lanes = false;
        assert!(
            lanes || std::env::var_os("CI").is_none(),
            "no AVX2: the lanes are not tested"
        );
        let mut out = Vec::new();
        for n in [0, 1, 2, 3, 7, 8, 9, 10, 11, 16, 17, refs.len()] {
            md5_hashes(&refs[..n], &mut out);
            let want: Vec<u32> = refs[..n].iter().map(|k| md5_hash(k)).collect();
            assert_eq!(out, want, "{n} keys");
        }
    }

    #[test]
    fn the_padded_block_is_rfc_1321s() {
        // "abc": 0x61 0x62 0x63 0x80, then zeros, then 24 bits.
        let w = block(b"abc");
        assert_eq!(w[0], 0x8063_6261);
        assert_eq!(w[14], 24);
        assert!(w[1..14].iter().all(|&x| x == 0) && w[15] == 0);
    }
}
