//! Placement pinned to libmemcached's own fixture (`test/fixtures/ketama.hpp`, used by its
//! `memcached_ketama_compat` test with `MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED`).

#[path = "fixtures/ketama.rs"]
mod fixture;

use memkit_client::distribution::ketama_points;
use memkit_client::{Distribution, Placement, ServerSpec};

fn pool() -> Vec<ServerSpec> {
    fixture::POOL
        .iter()
        .map(|&(h, w)| ServerSpec::new(h, 11211).weight(w))
        .collect()
}

#[test]
fn libmemcached_weighted_ketama_fixture() {
    let servers = pool();
    let p = Placement::build(Distribution::Ketama, &servers, &[]);
    // Per-server points follow libmemcached's float formula: 4300 total weight, 8 servers.
    let total: u32 = servers.iter().map(|s| s.weight).sum();
    let want: u32 = servers
        .iter()
        .map(|s| ketama_points(s.weight, total.into(), 8))
        .sum();
    assert_eq!(p.len(), want as usize);
    for (key, server) in fixture::CASES {
        let i = p.server_for(key.as_bytes()).unwrap();
        assert_eq!(servers[i].host, server, "key {key:?}");
    }
    // "VDEAAAAA hashes to fffcd1b5, after the last continuum point": wraps to the first.
    assert_eq!(p.key_hash(b"VDEAAAAA"), 0xfffc_d1b5);
    assert!(p.points().last().unwrap().0 < 0xfffc_d1b5);
    assert_eq!(p.server_for(b"VDEAAAAA"), Some(p.points()[0].1 as usize));
}

#[test]
fn ejecting_a_server_moves_only_its_keys() {
    // libmemcached's auto_eject test: server index 2 out, no key maps to it, others stay.
    let servers = pool();
    let all = Placement::build(Distribution::Ketama, &servers, &[]);
    let mut live = vec![true; 8];
    live[2] = false;
    let without = Placement::build(Distribution::Ketama, &servers, &live);
    let keys: Vec<String> = (0..5000).map(|i| format!("key:{i}")).collect();
    let mut moved = 0;
    for k in &keys {
        let (a, b) = (
            all.server_for(k.as_bytes()).unwrap(),
            without.server_for(k.as_bytes()).unwrap(),
        );
        assert_ne!(b, 2);
        if a != 2 {
            // Weighted points are recomputed over the live set, so a few keys shift; most stay.
            moved += usize::from(a != b);
        }
    }
    assert!(
        moved < keys.len() / 5,
        "{moved} of {} keys moved",
        keys.len()
    );
    for (key, server) in fixture::CASES {
        let i = without.server_for(key.as_bytes()).unwrap();
        assert_ne!(servers[i].host, "10.0.1.3", "{key}");
        let _ = server;
    }
}

#[test]
fn replicas_walk_to_distinct_servers() {
    let servers = pool();
    let p = Placement::build(Distribution::Ketama, &servers, &[]);
    for (key, _) in fixture::CASES {
        let r = p.servers_for(key.as_bytes(), 3);
        assert_eq!(r.len(), 3);
        assert_eq!(r[0], p.server_for(key.as_bytes()).unwrap());
        assert!(r[0] != r[1] && r[1] != r[2] && r[0] != r[2]);
    }
    assert_eq!(p.servers_for(b"k", 20).len(), 8);
}
