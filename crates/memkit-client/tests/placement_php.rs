//! pecl memcache's placement pinned to what PHP's extension itself answers:
//! `MemcachePool::findServer` for 64 keys (ASCII, UTF-8 with bytes >= 0x80, 250 bytes) over
//! three weighted servers, for both strategies and both hash functions, and with one server
//! added as failed (the extension's `"key-i"` failover). `tests/interop/test_php_placement.py`
//! checks the same against live servers holding keys PHP stored.

#[path = "fixtures/php.rs"]
mod fixture;

use memkit_client::distribution::PhpHash;
use memkit_client::{Distribution, Placement, ServerSpec};

fn pool() -> Vec<ServerSpec> {
    fixture::POOL
        .iter()
        .map(|&(h, p, w)| ServerSpec::new(h, p).weight(w))
        .collect()
}

fn distribution(strategy: &str, hash: &str) -> Distribution {
    let d: Distribution = format!("php-{strategy}:{hash}").parse().unwrap();
    let hash: PhpHash = hash.parse().unwrap();
    assert_eq!(
        d,
        match strategy {
            "consistent" => Distribution::PhpConsistent { hash },
            _ => Distribution::PhpStandard { hash },
        }
    );
    d
}

#[test]
fn pecl_memcache_find_server_fixture() {
    let servers = pool();
    for (strategy, hash, down, want) in fixture::CASES {
        let mut live = vec![true; servers.len()];
        if let Some(d) = down {
            live[d] = false;
        }
        let p = Placement::build(distribution(strategy, hash), &servers, &live);
        for (key, &want) in fixture::KEYS.iter().zip(&want) {
            assert_eq!(
                p.server_for(key.as_bytes()),
                Some(usize::from(want)),
                "{strategy}/{hash}, down {down:?}: key {key:?}"
            );
        }
    }
}

#[test]
fn default_hash_is_crc32_and_names_parse() {
    assert_eq!(
        "php-consistent".parse::<Distribution>(),
        Ok(Distribution::PhpConsistent {
            hash: PhpHash::Crc32
        })
    );
    assert_eq!(
        "php-standard".parse::<Distribution>(),
        Ok(Distribution::PhpStandard {
            hash: PhpHash::Crc32
        })
    );
    for bad in ["php-consistent:md5", "php-standardx", "php-consistent:"] {
        assert!(bad.parse::<Distribution>().is_err(), "{bad}");
    }
}

#[test]
fn consistent_continuum_has_160_points_per_weight() {
    let servers = pool();
    let p = Placement::build(distribution("consistent", "crc32"), &servers, &[]);
    assert_eq!(p.points().len(), 160 * 6);
    assert_eq!(p.len(), 1024);
    let s = Placement::build(distribution("standard", "fnv"), &servers, &[]);
    assert_eq!(s.len(), 6);
}
