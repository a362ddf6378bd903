//! Workloads: keys, values and request distributions, all deterministic from a seed.
//!
//! - [`KeyGen`]: key number -> key bytes (unique, length spread over a range).
//! - [`Zipf`]: Zipf(s) ranks over `1..=n` by rejection-inversion (Hörmann & Derflinger
//!   1996, as in Apache Commons RNG): O(1) set-up and O(1) expected time per sample, exact
//!   for any `s > 0`, so a 5M-key space costs nothing to set up.
//! - [`Dist`]: uniform or Zipf picks of key numbers.
//! - [`value_bytes`]: the value written for a key.

use rand::Rng;

/// SplitMix64's finaliser: a cheap, good 64-bit mixer.
pub fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The longest key [`KeyGen`] makes.
pub const MAX_GEN_KEY: usize = 64;

/// Turns key numbers into key bytes: `mk:` + 13 hex digits of the number (unique below
/// 2^52), padded with `_` to a length between `min_len` and `max_len` picked by a hash of
/// the number, so every run and every cache sees the same key for the same number.
#[derive(Debug, Clone, Copy)]
pub struct KeyGen {
    /// Shortest key, at least 16.
    pub min_len: usize,
    /// Longest key, at most [`MAX_GEN_KEY`].
    pub max_len: usize,
}

impl KeyGen {
    /// Keys of `min_len..=max_len` bytes.
    pub fn new(min_len: usize, max_len: usize) -> Self {
        assert!((16..=max_len).contains(&min_len) && max_len <= MAX_GEN_KEY);
        KeyGen { min_len, max_len }
    }

    /// The length of key `id`.
    pub fn len_of(&self, id: u64) -> usize {
        let span = (self.max_len - self.min_len + 1) as u64;
        self.min_len + (mix64(id ^ 0x6b65_795f_6c65_6e00) % span) as usize
    }

    /// Writes key `id` into `buf` and returns it.
    pub fn write<'a>(&self, id: u64, buf: &'a mut [u8; MAX_GEN_KEY]) -> &'a [u8] {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let len = self.len_of(id);
        buf[..3].copy_from_slice(b"mk:");
        for i in 0..13 {
            buf[3 + i] = HEX[((id >> (4 * (12 - i))) & 0xf) as usize];
        }
        buf[16..len].fill(b'_');
        &buf[..len]
    }

    /// Average key length over the range (exact for a uniform spread).
    pub fn mean_len(&self) -> f64 {
        (self.min_len + self.max_len) as f64 / 2.0
    }
}

/// A value of `len` bytes for key `id` (its first bytes carry the id, the rest a pattern).
pub fn value_bytes(id: u64, len: usize) -> Vec<u8> {
    let mut v: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
    let tag = id.to_le_bytes();
    let n = tag.len().min(len);
    v[..n].copy_from_slice(&tag[..n]);
    v
}

/// Zipf(s) over ranks `1..=n` (rank 1 the most popular), rejection-inversion sampling.
#[derive(Debug, Clone)]
pub struct Zipf {
    n: f64,
    s: f64,
    h_integral_x1: f64,
    h_integral_n: f64,
    cutoff: f64,
}

impl Zipf {
    /// Zipf with exponent `s > 0` over `n >= 1` ranks.
    pub fn new(n: u64, s: f64) -> Self {
        assert!(n >= 1 && s > 0.0);
        let mut z = Zipf {
            n: n as f64,
            s,
            h_integral_x1: 0.0,
            h_integral_n: 0.0,
            cutoff: 0.0,
        };
        z.h_integral_x1 = z.h_integral(1.5) - 1.0;
        z.h_integral_n = z.h_integral(n as f64 + 0.5);
        z.cutoff = 2.0 - z.h_integral_inv(z.h_integral(2.5) - z.h(2.0));
        z
    }

    /// A rank in `1..=n`.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        loop {
            let u =
                self.h_integral_n + rng.random::<f64>() * (self.h_integral_x1 - self.h_integral_n);
            let x = self.h_integral_inv(u);
            let k = (x + 0.5).floor().clamp(1.0, self.n);
            if k - x <= self.cutoff || u >= self.h_integral(k + 0.5) - self.h(k) {
                return k as u64;
            }
        }
    }

    fn h(&self, x: f64) -> f64 {
        (-self.s * x.ln()).exp()
    }

    fn h_integral(&self, x: f64) -> f64 {
        let log_x = x.ln();
        helper2((1.0 - self.s) * log_x) * log_x
    }

    fn h_integral_inv(&self, x: f64) -> f64 {
        let t = (x * (1.0 - self.s)).max(-1.0);
        (helper1(t) * x).exp()
    }
}

/// `ln(1+x)/x`, accurate near 0.
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// `(e^x-1)/x`, accurate near 0.
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x))
    }
}

/// How key numbers are picked from `0..n`.
#[derive(Debug, Clone)]
pub enum Dist {
    /// Every key equally likely.
    Uniform(u64),
    /// Zipf; key number = rank - 1, so key 0 is the hottest.
    Zipf(Zipf),
}

impl Dist {
    /// A key number in `0..n`.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        match self {
            Dist::Uniform(n) => rng.random_range(0..*n),
            Dist::Zipf(z) => z.sample(rng) - 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    #[test]
    fn keys_are_unique_and_in_range() {
        let g = KeyGen::new(16, 32);
        let mut seen = std::collections::HashSet::new();
        let mut buf = [0u8; MAX_GEN_KEY];
        for id in 0..10_000u64 {
            let k = g.write(id, &mut buf);
            assert!((16..=32).contains(&k.len()));
            assert!(seen.insert(k.to_vec()));
        }
        assert_eq!(KeyGen::new(20, 20).write(7, &mut buf).len(), 20);
    }

    #[test]
    fn zipf_frequencies_follow_the_law() {
        // P(rank 1) / P(rank 2) = 2^s; with s = 0.99 about 1.99.
        let z = Zipf::new(1000, 0.99);
        let mut rng = SmallRng::seed_from_u64(1);
        let mut counts = vec![0u32; 1001];
        for _ in 0..400_000 {
            let k = z.sample(&mut rng);
            assert!((1..=1000).contains(&k));
            counts[k as usize] += 1;
        }
        let r = f64::from(counts[1]) / f64::from(counts[2]);
        assert!((1.8..2.2).contains(&r), "ratio {r}");
        // Expected share of rank 1: 1 / H(1000, 0.99) ~ 0.1326.
        let p1 = f64::from(counts[1]) / 400_000.0;
        assert!((0.12..0.145).contains(&p1), "p1 {p1}");
    }
}
