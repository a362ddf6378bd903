//! pecl memcache's placement: PHP's `Memcache` / `MemcachePool` classes (the `memcache`
//! extension 3.x, 4.x for PHP 7 and 8.x for PHP 8, Debian's `php-memcache`), key for key.
//!
//! Read from the extension's `memcache_consistent_hash.c`, `memcache_standard_hash.c` and
//! `memcache_pool.c`:
//!
//! - **Hash functions** (`memcache.hash_function`): `crc32` is the full 32-bit CRC-32
//!   (zlib's; `init ~0`, `finish ~`), not memcached's 15-bit one; `fnv` is 32-bit FNV-1a
//!   over `const char *`, so bytes `>= 0x80` are sign-extended on x86-64, exactly as
//!   libhashkit's `fnv1a_32` ([`crate::hash::fnv1a_32`]).
//! - **consistent** (`memcache.hash_strategy=consistent`, the default): each server added
//!   with weight `w` gets `160 * w` points, point `i` being the hash of `"host:port-i"`
//!   (the host exactly as given to `addServer`, the port always written). The sorted
//!   continuum is sampled into 1024 buckets: bucket `b` is the server of the first point
//!   at or after `b * (0xffffffff / 1024)`, wrapping to the first point. A key goes to
//!   bucket `hash(key) % 1024`, so keys are placed by the bucket grid, not by their own
//!   position on the continuum.
//! - **standard**: every server appears `w` times in a bucket list, in the order added; a
//!   key goes to bucket `h % buckets` with `h = (hash(key) >> 16) & 0x7fff`, 0 read as 1.
//! - **Failover** (`memcache.allow_failover=1`, `max_failover_attempts=20`): servers stay in
//!   the ring when they fail; a key whose server is down is looked up again as `"key-0"`,
//!   `"key-1"`, ... until a live server turns up (20 tries at most). Redundant copies
//!   (`memcache.redundancy`) continue the same sequence, skipping servers already chosen.

use super::ServerSpec;

/// pecl memcache's `MMC_CONSISTENT_POINTS`: points per unit of weight.
pub const CONSISTENT_POINTS: u64 = 160;
/// pecl memcache's `MMC_CONSISTENT_BUCKETS`.
pub const CONSISTENT_BUCKETS: u32 = 1024;
/// `memcache.max_failover_attempts`' default.
pub const MAX_FAILOVER_ATTEMPTS: u32 = 20;

/// `memcache.hash_function`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PhpHash {
    /// `crc32` (the default): the full CRC-32 of the key.
    #[default]
    Crc32,
    /// `fnv`: FNV-1a, 32 bits, high bytes sign-extended.
    Fnv,
}

impl PhpHash {
    /// Hashes `data` as the extension does.
    pub fn hash(self, data: &[u8]) -> u32 {
        match self {
            PhpHash::Crc32 => crc32fast::hash(data),
            PhpHash::Fnv => crate::hash::fnv1a_32(data),
        }
    }

    /// The ini value: `crc32` or `fnv`.
    pub fn name(self) -> &'static str {
        match self {
            PhpHash::Crc32 => "crc32",
            PhpHash::Fnv => "fnv",
        }
    }
}

impl std::str::FromStr for PhpHash {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "crc32" => Ok(PhpHash::Crc32),
            "fnv" => Ok(PhpHash::Fnv),
            _ => Err(format!(
                "unknown memcache.hash_function {s:?} (crc32 or fnv)"
            )),
        }
    }
}

/// A built pecl memcache placement over every configured server.
#[derive(Debug, Clone)]
pub(crate) struct PhpRing {
    consistent: bool,
    hash: PhpHash,
    /// The server of each lookup slot: 1024 buckets (consistent) or the weight-repeated
    /// server list (standard).
    slots: Vec<u32>,
    live: Vec<bool>,
}

impl PhpRing {
    /// Builds the ring of `servers` (all of them, live or not, as the extension keeps
    /// failed servers in place); also returns the sorted continuum (empty for standard).
    pub(crate) fn build(
        consistent: bool,
        hash: PhpHash,
        servers: &[ServerSpec],
        live: &[bool],
    ) -> (PhpRing, Vec<(u32, u32)>) {
        let live = (0..servers.len())
            .map(|i| live.get(i).copied().unwrap_or(true))
            .collect();
        let mut continuum = Vec::new();
        let slots = if servers.is_empty() {
            Vec::new()
        } else if consistent {
            for (i, s) in servers.iter().enumerate() {
                let points = u64::from(s.weight.max(1)) * CONSISTENT_POINTS;
                for p in 0..points {
                    let name = format!("{}:{}-{}", s.host, s.port, p);
                    continuum.push((hash.hash(name.as_bytes()), i as u32));
                }
            }
            // Stable: equal points keep the order servers were added in.
            continuum.sort_by_key(|&(v, _)| v);
            let step = u32::MAX / CONSISTENT_BUCKETS;
            (0..CONSISTENT_BUCKETS)
                .map(|b| {
                    let at = continuum.partition_point(|&(v, _)| v < step * b);
                    continuum.get(at).unwrap_or(&continuum[0]).1
                })
                .collect()
        } else {
            servers
                .iter()
                .enumerate()
                .flat_map(|(i, s)| std::iter::repeat_n(i as u32, s.weight.max(1) as usize))
                .collect()
        };
        let ring = PhpRing {
            consistent,
            hash,
            slots,
            live,
        };
        (ring, continuum)
    }

    /// `find_server`: the configured server of `key`, dead or alive.
    fn find(&self, key: &[u8]) -> usize {
        let h = self.hash.hash(key);
        let slot = if self.consistent {
            h % CONSISTENT_BUCKETS
        } else {
            let h = (h >> 16) & 0x7fff;
            h.max(1) % self.slots.len() as u32
        };
        self.slots[slot as usize] as usize
    }

    /// `find_server` of `"key-i"`, the failover sequence.
    fn find_next(&self, key: &[u8], i: u32) -> usize {
        let mut k = key.to_vec();
        k.extend_from_slice(format!("-{i}").as_bytes());
        self.find(&k)
    }

    fn is_live(&self, i: usize) -> bool {
        self.live.get(i).copied().unwrap_or(true)
    }

    /// `mmc_pool_find`: the key's server, failing over along `"key-0"`, `"key-1"`, ...
    /// when it is down. `None` when there is no server or none is live.
    pub(crate) fn server_for(&self, key: &[u8]) -> Option<usize> {
        if self.slots.is_empty() || !self.live.iter().any(|&l| l) {
            return None;
        }
        let mut s = self.find(key);
        let mut i = 0;
        while !self.is_live(s) && i < MAX_FAILOVER_ATTEMPTS {
            s = self.find_next(key, i);
            i += 1;
        }
        Some(s)
    }

    /// The primary, then the servers `memcache.redundancy` would add: the failover sequence
    /// continued, skipping servers already chosen; only live ones are kept.
    pub(crate) fn servers_for(&self, key: &[u8], n: usize) -> Vec<usize> {
        let Some(first) = self.server_for(key) else {
            return Vec::new();
        };
        let mut out = vec![first];
        let mut skip = Vec::new();
        let mut cur = first;
        let mut i = 0;
        for _ in 0..n.saturating_sub(1).min(self.live.len().saturating_sub(1)) {
            skip.push(cur);
            loop {
                cur = self.find_next(key, i);
                i += 1;
                if !skip.contains(&cur) || i >= MAX_FAILOVER_ATTEMPTS {
                    break;
                }
            }
            if self.is_live(cur) && !out.contains(&cur) {
                out.push(cur);
            }
        }
        out
    }

    /// Lookup slots: 1024 (consistent) or the total weight (standard).
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_php_crc32_and_fnv1a() {
        // PHP: crc32("The quick brown fox jumps over the lazy dog") === 0x414fa339.
        let fox = b"The quick brown fox jumps over the lazy dog";
        assert_eq!(PhpHash::Crc32.hash(fox), 0x414f_a339);
        // FNV-1a 32 of "a" (the reference test vector).
        assert_eq!(PhpHash::Fnv.hash(b"a"), 0xe40c_292c);
        assert_eq!("fnv".parse::<PhpHash>(), Ok(PhpHash::Fnv));
        assert!("md5".parse::<PhpHash>().is_err());
    }

    #[test]
    fn standard_reads_a_zero_hash_as_one() {
        // Three buckets: h = 0 would pick bucket 0, the extension picks bucket 1.
        let servers: Vec<ServerSpec> = ["a:1", "b:1", "c:1"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        let (ring, continuum) = PhpRing::build(false, PhpHash::Crc32, &servers, &[]);
        assert!(continuum.is_empty());
        let key = (0u32..)
            .map(|i| format!("k{i}"))
            .find(|k| (crc32fast::hash(k.as_bytes()) >> 16) & 0x7fff == 0)
            .unwrap();
        assert_eq!(ring.find(key.as_bytes()), 1);
    }

    #[test]
    fn consistent_points_and_buckets() {
        let servers: Vec<ServerSpec> = ["a:1:1", "b:2:3"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        let (ring, continuum) = PhpRing::build(true, PhpHash::Crc32, &servers, &[]);
        assert_eq!(continuum.len(), 160 * 4);
        assert_eq!(ring.len(), 1024);
        let p0 = crc32fast::hash(b"b:2-0");
        assert!(continuum.contains(&(p0, 1)));
        // Bucket 0 samples point 0: the first point of the continuum.
        assert_eq!(ring.slots[0], continuum[0].1);
    }

    #[test]
    fn failover_walks_key_dash_i() {
        let servers: Vec<ServerSpec> = ["a:1", "b:1", "c:1"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        let (all, _) = PhpRing::build(true, PhpHash::Crc32, &servers, &[]);
        let key = b"some key";
        let home = all.server_for(key).unwrap();
        let mut live = vec![true; 3];
        live[home] = false;
        let (without, _) = PhpRing::build(true, PhpHash::Crc32, &servers, &live);
        let first_live = (0..)
            .map(|i| all.find_next(key, i))
            .find(|&s| s != home)
            .unwrap();
        assert_eq!(without.server_for(key), Some(first_live));
        // Keys of live servers stay where they are.
        for i in 0..500 {
            let k = format!("k{i}");
            let s = all.server_for(k.as_bytes()).unwrap();
            if s != home {
                assert_eq!(without.server_for(k.as_bytes()), Some(s));
            }
        }
        let (none, _) = PhpRing::build(true, PhpHash::Crc32, &servers, &[false; 3]);
        assert_eq!(none.server_for(key), None);
        let copies = all.servers_for(key, 3);
        assert_eq!(copies[0], home);
        assert!(copies.len() >= 2, "{copies:?}");
    }
}
