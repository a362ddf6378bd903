//! Which server a key lives on: `modula` and libmemcached's `ketama`, key for key.
//!
//! - **Modula** (python-memcached, libmemcached `MEMCACHED_DISTRIBUTION_MODULA`): every live
//!   server appears `weight` times in a bucket list, in configuration order; a key goes to
//!   `buckets[hash(key) % buckets.len()]`. With the default hash, memcached's classic 15-bit
//!   CRC `(crc32(key) >> 16) & 0x7fff`, this is python-memcached's placement, and
//!   libmemcached MODULA+CRC's when every weight is 1 (libmemcached ignores weights here).
//! - **Ketama** (libmemcached `MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED`, `hosts.cc`
//!   `update_continuum`): each live server gets
//!   `floor(weight/total * 160/4 * live_servers + 1e-10) * 4` points computed in `float`;
//!   point strings are `host-i` on port 11211 and `host:port-i` elsewhere
//!   (i = 0, 1, ...); each string's MD5 digest yields four points (bytes 0-3, 4-7, 8-11,
//!   12-15, little-endian). Points are sorted by (value, server index); a key's MD5 hash
//!   (first four digest bytes, little-endian) goes to the first point at or after it,
//!   wrapping to the first point.
//! - **Ketama, unweighted** (libmemcached `MEMCACHED_BEHAVIOR_KETAMA` with every weight 1,
//!   i.e. `MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA` without weighting): 100 points per
//!   server, one per point string, valued by the pool's key hash (libmemcached's default,
//!   one_at_a_time, unless `hash` is set), which also hashes the keys.
//!
//! - **PHP** (pecl memcache's `Memcache` class, `memcache.hash_strategy` consistent or
//!   standard, `memcache.hash_function` crc32 or fnv): see [`php`].
//!
//! Ejected servers are left out of the build, exactly as libmemcached's auto-eject does, so
//! their keys move to the rest of the ring and come back when they return. The PHP
//! distributions keep them in place and fail over as the extension does ([`php`]).

pub mod php;

use crate::hash::{HashFn, md5_digest};
pub use php::PhpHash;
use php::PhpRing;

/// libmemcached's `MEMCACHED_DEFAULT_PORT`: omitted from ketama point strings.
pub const DEFAULT_PORT: u16 = 11211;
const POINTS_PER_SERVER_KETAMA: f32 = 160.0;
const POINTS_PER_SERVER: u32 = 100;

/// One server of a pool: `host:port[:weight]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServerSpec {
    /// The host exactly as configured: it is part of the ketama point strings, so
    /// `localhost` and `127.0.0.1` are different servers to the ring (as to libmemcached).
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// Relative weight, at least 1.
    pub weight: u32,
}

impl ServerSpec {
    /// A server with weight 1.
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        ServerSpec {
            host: host.into(),
            port,
            weight: 1,
        }
    }

    /// The same server with another weight.
    pub fn weight(mut self, weight: u32) -> Self {
        self.weight = weight.max(1);
        self
    }

    /// `host:port`, for connecting.
    pub fn addr(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// Parses a comma-separated list of [`ServerSpec`]s.
    pub fn parse_list(s: &str) -> Result<Vec<ServerSpec>, String> {
        s.split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::parse)
            .collect()
    }
}

impl std::fmt::Display for ServerSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.addr())?;
        if self.weight != 1 {
            write!(f, ":{}", self.weight)?;
        }
        Ok(())
    }
}

impl std::str::FromStr for ServerSpec {
    type Err = String;

    /// `host`, `host:port`, `host:port:weight`, `[v6]:port[:weight]`.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("bad server {s:?}: expected host[:port[:weight]]");
        let (host, rest) = if let Some(r) = s.strip_prefix('[') {
            let (h, rest) = r.split_once(']').ok_or_else(bad)?;
            (h, rest.strip_prefix(':').unwrap_or(rest))
        } else {
            match s.split_once(':') {
                Some((h, rest)) => (h, rest),
                None => (s, ""),
            }
        };
        if host.is_empty() {
            return Err(bad());
        }
        let mut parts = rest.split(':').filter(|p| !p.is_empty());
        let port = parts
            .next()
            .map_or(Ok(DEFAULT_PORT), str::parse)
            .map_err(|_| bad())?;
        let weight: u32 = parts.next().map_or(Ok(1), str::parse).map_err(|_| bad())?;
        if parts.next().is_some() || weight == 0 {
            return Err(bad());
        }
        Ok(ServerSpec {
            host: host.to_string(),
            port,
            weight,
        })
    }
}

/// How keys are spread over a pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Distribution {
    /// `hash(key) % buckets`, buckets weighted by repetition (python-memcached).
    Modula {
        /// The key hash; [`HashFn::Crc`] for python-memcached and libmemcached's `crc`.
        hash: HashFn,
    },
    /// libmemcached's weighted ketama (MD5 for points and keys).
    #[default]
    Ketama,
    /// libmemcached's unweighted ketama: 100 points per server, points and keys hashed
    /// with `hash` ([`HashFn::OneAtATime`] is libmemcached's default).
    KetamaUnweighted {
        /// The key (and point) hash.
        hash: HashFn,
    },
    /// pecl memcache (PHP's `Memcache` class) with `memcache.hash_strategy=consistent`:
    /// 160 points per unit of weight, sampled into 1024 buckets.
    PhpConsistent {
        /// `memcache.hash_function`.
        hash: PhpHash,
    },
    /// pecl memcache with `memcache.hash_strategy=standard`: weight-repeated buckets,
    /// `((hash >> 16) & 0x7fff) % buckets`.
    PhpStandard {
        /// `memcache.hash_function`.
        hash: PhpHash,
    },
}

impl Distribution {
    /// Modula with memcached's classic CRC.
    pub const MODULA: Distribution = Distribution::Modula { hash: HashFn::Crc };
}

impl std::str::FromStr for Distribution {
    type Err = String;
    /// `ketama`, `ketama-unweighted[:<hash>]`, `modula`, `modula:<hash>` (e.g.
    /// `modula:fnv1a_32`), `php-consistent[:crc32|fnv]`, `php-standard[:crc32|fnv]`.
    fn from_str(s: &str) -> Result<Self, String> {
        let php = |rest: &str| match rest.strip_prefix(':') {
            None if rest.is_empty() => Ok(PhpHash::Crc32),
            Some(h) => h.parse(),
            None => Err(format!("unknown distribution {s:?}")),
        };
        if let Some(rest) = s.strip_prefix("php-consistent") {
            return Ok(Distribution::PhpConsistent { hash: php(rest)? });
        }
        if let Some(rest) = s.strip_prefix("php-standard") {
            return Ok(Distribution::PhpStandard { hash: php(rest)? });
        }
        match s {
            "ketama" | "consistent" => Ok(Distribution::Ketama),
            "ketama-unweighted" => Ok(Distribution::KetamaUnweighted {
                hash: HashFn::OneAtATime,
            }),
            "modula" => Ok(Distribution::MODULA),
            _ => {
                if let Some(h) = s.strip_prefix("modula:") {
                    Ok(Distribution::Modula { hash: h.parse()? })
                } else if let Some(h) = s.strip_prefix("ketama-unweighted:") {
                    Ok(Distribution::KetamaUnweighted { hash: h.parse()? })
                } else {
                    Err(format!("unknown distribution {s:?}"))
                }
            }
        }
    }
}

/// A built placement: the ring or bucket list for one set of live servers.
#[derive(Debug, Clone)]
pub struct Placement {
    dist: Distribution,
    /// Ketama: (point, server index), sorted. Modula: (0, server index) per bucket. PHP
    /// consistent: its continuum; PHP standard: empty.
    points: Vec<(u32, u32)>,
    /// The PHP distributions' lookup (over every server, with the live marks).
    php: Option<PhpRing>,
}

impl Placement {
    /// Builds the placement of `servers`, leaving out those whose `live` entry is false
    /// (all are live when `live` is empty).
    pub fn build(dist: Distribution, servers: &[ServerSpec], live: &[bool]) -> Placement {
        let is_live = |i: usize| live.get(i).copied().unwrap_or(true);
        let mut points = Vec::new();
        match dist {
            Distribution::PhpConsistent { hash } | Distribution::PhpStandard { hash } => {
                let consistent = matches!(dist, Distribution::PhpConsistent { .. });
                let (ring, continuum) = PhpRing::build(consistent, hash, servers, live);
                return Placement {
                    dist,
                    points: continuum,
                    php: Some(ring),
                };
            }
            Distribution::Modula { .. } => {
                for (i, s) in servers.iter().enumerate().filter(|&(i, _)| is_live(i)) {
                    points.extend((0..s.weight.max(1)).map(|_| (0, i as u32)));
                }
            }
            Distribution::Ketama | Distribution::KetamaUnweighted { .. } => {
                let weighted = dist == Distribution::Ketama;
                let live_n = (0..servers.len()).filter(|&i| is_live(i)).count();
                let total: u64 = servers
                    .iter()
                    .enumerate()
                    .filter(|&(i, _)| is_live(i))
                    .map(|(_, s)| u64::from(s.weight))
                    .sum();
                for (i, s) in servers.iter().enumerate().filter(|&(i, _)| is_live(i)) {
                    let (per_server, per_hash) = if weighted {
                        (ketama_points(s.weight, total, live_n), 4)
                    } else {
                        (POINTS_PER_SERVER, 1)
                    };
                    for p in 0..per_server / per_hash {
                        let name = point_name(s, p);
                        if let Distribution::KetamaUnweighted { hash } = dist {
                            points.push((hash.hash(name.as_bytes()), i as u32));
                        } else {
                            let d = md5_digest(name.as_bytes());
                            for a in 0..4 {
                                let b = &d[a * 4..a * 4 + 4];
                                let v = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                                points.push((v, i as u32));
                            }
                        }
                    }
                }
                points.sort_unstable();
            }
        }
        Placement {
            dist,
            points,
            php: None,
        }
    }

    /// The distribution this was built for.
    pub fn distribution(&self) -> Distribution {
        self.dist
    }

    /// The key's hash as this distribution computes it.
    pub fn key_hash(&self, key: &[u8]) -> u32 {
        match self.dist {
            Distribution::Modula { hash } | Distribution::KetamaUnweighted { hash } => {
                hash.hash(key)
            }
            Distribution::Ketama => HashFn::Md5.hash(key),
            Distribution::PhpConsistent { hash } | Distribution::PhpStandard { hash } => {
                hash.hash(key)
            }
        }
    }

    /// Position of the key's primary point or bucket.
    fn start(&self, key: &[u8]) -> Option<usize> {
        if self.points.is_empty() {
            return None;
        }
        Some(self.position(self.key_hash(key)))
    }

    /// Position of the point or bucket of a key whose hash is `h` (points not empty).
    fn position(&self, h: u32) -> usize {
        match self.dist {
            Distribution::Modula { .. } => h as usize % self.points.len(),
            _ => {
                let i = self.points.partition_point(|&(v, _)| v < h);
                if i == self.points.len() { 0 } else { i }
            }
        }
    }

    /// The server index `key` maps to; `None` when no server is live.
    pub fn server_for(&self, key: &[u8]) -> Option<usize> {
        if let Some(php) = &self.php {
            return php.server_for(key);
        }
        self.start(key).map(|i| self.points[i].1 as usize)
    }

    /// [`Placement::server_for`] of each key, in order, into `out` (cleared first): the
    /// same answers, with an MD5 key hash taken for many keys at once
    /// ([`crate::hash::md5_hashes`]), as a router places a multi-get's keys.
    pub fn servers_of(&self, keys: &[&[u8]], out: &mut Vec<Option<usize>>) {
        out.clear();
        let md5 = match self.dist {
            Distribution::Ketama => true,
            Distribution::Modula { hash } | Distribution::KetamaUnweighted { hash } => {
                hash == HashFn::Md5
            }
            Distribution::PhpConsistent { .. } | Distribution::PhpStandard { .. } => false,
        };
        if !md5 || self.php.is_some() || self.points.is_empty() {
            out.extend(keys.iter().map(|k| self.server_for(k)));
            return;
        }
        let mut hashes = Vec::with_capacity(keys.len());
        crate::hash::md5_hashes(keys, &mut hashes);
        out.extend(
            hashes
                .into_iter()
                .map(|h| Some(self.points[self.position(h)].1 as usize)),
        );
    }

    /// Up to `n` distinct servers for `key`: the primary, then the next distinct servers
    /// walking the ring (or the bucket list) forward; with the PHP distributions, the
    /// servers pecl memcache's `memcache.redundancy` picks. Used for replicas.
    pub fn servers_for(&self, key: &[u8], n: usize) -> Vec<usize> {
        if let Some(php) = &self.php {
            return php.servers_for(key, n);
        }
        let mut out = Vec::with_capacity(n);
        let Some(start) = self.start(key) else {
            return out;
        };
        let len = self.points.len();
        for step in 0..len {
            if out.len() >= n {
                break;
            }
            let s = self.points[(start + step) % len].1 as usize;
            if !out.contains(&s) {
                out.push(s);
            }
        }
        out
    }

    /// The sorted `(point, server index)` continuum (ketama), or `(0, server index)` per
    /// bucket (modula).
    pub fn points(&self) -> &[(u32, u32)] {
        &self.points
    }

    /// Number of points (ketama), buckets (modula, PHP standard) or lookup buckets (PHP
    /// consistent: 1024).
    pub fn len(&self) -> usize {
        self.php.as_ref().map_or(self.points.len(), PhpRing::len)
    }

    /// Whether no server is configured (PHP) or live (the others).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// libmemcached's weighted points per server, in its `float` arithmetic.
pub fn ketama_points(weight: u32, total_weight: u64, live_servers: usize) -> u32 {
    let pct = weight as f32 / total_weight as f32;
    let x = pct * POINTS_PER_SERVER_KETAMA / 4.0 * live_servers as f32 + 0.000_000_000_1_f32;
    (x.floor() as u32) * 4
}

/// `host-i` on the default port, `host:port-i` otherwise.
fn point_name(s: &ServerSpec, i: u32) -> String {
    if s.port == DEFAULT_PORT {
        format!("{}-{}", s.host, i)
    } else {
        format!("{}:{}-{}", s.host, s.port, i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_servers() {
        let s: ServerSpec = "10.0.0.1:11212:3".parse().unwrap();
        assert_eq!((s.host.as_str(), s.port, s.weight), ("10.0.0.1", 11212, 3));
        let s: ServerSpec = "cache".parse().unwrap();
        assert_eq!((s.port, s.weight), (11211, 1));
        let s: ServerSpec = "[::1]:5:2".parse().unwrap();
        assert_eq!((s.host.as_str(), s.port, s.weight), ("::1", 5, 2));
        assert_eq!(s.addr(), "[::1]:5");
        assert!("h:x".parse::<ServerSpec>().is_err());
        assert!("h:1:0".parse::<ServerSpec>().is_err());
        assert_eq!(ServerSpec::parse_list("a:1, b:2:5").unwrap().len(), 2);
    }

    #[test]
    fn weighted_points_match_libmemcached_arithmetic() {
        // Equal weights: 160 points each, whatever the count.
        assert_eq!(ketama_points(1, 3, 3), 160);
        assert_eq!(ketama_points(5, 10, 2), 160);
        // 600 of 4300 over 8 servers: floor(0.13953 * 40 * 8) * 4 = 44 * 4.
        assert_eq!(ketama_points(600, 4300, 8), 176);
    }

    #[test]
    fn servers_of_many_keys_are_server_for_each() {
        let servers: Vec<ServerSpec> = (0..5)
            .map(|i| ServerSpec::new(format!("10.0.0.{i}"), 11211).weight(i + 1))
            .collect();
        // Keys of 1..=120 bytes: one MD5 block and two.
        let keys: Vec<Vec<u8>> = (0..300u32)
            .map(|i| format!("key:{i}:{}", "x".repeat(i as usize % 115)).into_bytes())
            .collect();
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let dists = [
            Distribution::Ketama,
            Distribution::MODULA,
            Distribution::Modula { hash: HashFn::Md5 },
            Distribution::KetamaUnweighted { hash: HashFn::Md5 },
            Distribution::KetamaUnweighted {
                hash: HashFn::OneAtATime,
            },
            Distribution::PhpConsistent {
                hash: PhpHash::Crc32,
            },
            Distribution::PhpStandard { hash: PhpHash::Fnv },
        ];
        let mut out = Vec::new();
        for dist in dists {
            for live in [
                vec![true; 5],
                vec![true, false, true, true, false],
                vec![false; 5],
            ] {
                let p = Placement::build(dist, &servers, &live);
                p.servers_of(&refs, &mut out);
                let want: Vec<Option<usize>> = refs.iter().map(|k| p.server_for(k)).collect();
                assert_eq!(out, want, "{dist:?} {live:?}");
            }
        }
    }

    #[test]
    fn modula_buckets_repeat_by_weight() {
        let servers = vec![ServerSpec::new("a", 1), ServerSpec::new("b", 1).weight(3)];
        let p = Placement::build(Distribution::MODULA, &servers, &[]);
        assert_eq!(p.len(), 4);
        let key = b"some key";
        let want = [0, 1, 1, 1][crate::hash::crc15(key) as usize % 4];
        assert_eq!(p.server_for(key), Some(want));
        assert_eq!(p.servers_for(key, 5).len(), 2);
        let dead = Placement::build(Distribution::MODULA, &servers, &[false, true]);
        assert_eq!(dead.server_for(key), Some(1));
        let none = Placement::build(Distribution::MODULA, &servers, &[false, false]);
        assert_eq!(none.server_for(key), None);
    }
}
