//! `stats router` (router mode only, memcached has no such group): the router's counters,
//! then a block per pool and per server, names as `pool:NAME:I:what` (I the server's place
//! in the pool's list). Latencies are per batch sent to a server (a client's pipelined
//! requests to it travel together), in µs, each the upper bound of the power-of-two bucket
//! the quantile falls in.

use std::sync::atomic::Ordering::Relaxed;

use memkit_protocol::render::{write_stat, write_stat_u64};

use crate::state::Shared;

/// Writes the group; `false` when this server is not a router (the caller answers ERROR,
/// as memcached does for a group it does not know).
pub(super) fn lines(sh: &Shared, out: &mut Vec<u8>) -> bool {
    let Some(router) = sh.router() else {
        return false;
    };
    let c = &router.counters;
    for (name, v) in [
        ("jobs", c.jobs.load()),
        ("requests", c.ops.load()),
        ("unrouted", c.unrouted.load(Relaxed)),
        ("failovers", c.failovers.load(Relaxed)),
        ("gutter", c.gutter.load(Relaxed)),
        ("shadowed", c.shadowed.load(Relaxed)),
        ("warmed", c.warmed.load(Relaxed)),
        ("reloads", c.reloads.load(Relaxed)),
        ("reload_failures", c.reload_failures.load(Relaxed)),
    ] {
        write_stat_u64(out, name, v);
    }
    let table = router.table();
    write_stat_u64(out, "routes", table.routes.len() as u64);
    for (name, pool) in &table.pools {
        let p = |what: &str| format!("pool:{name}:{what}");
        write_stat_u64(out, &p("servers"), pool.servers.len() as u64);
        let down = pool.servers.iter().filter(|s| s.is_down()).count();
        write_stat_u64(out, &p("servers_down"), down as u64);
        for (i, (s, spec)) in pool.servers.iter().zip(&pool.spec.servers).enumerate() {
            let q = |what: &str| format!("pool:{name}:{i}:{what}");
            write_stat(out, &q("addr"), spec.addr().as_bytes());
            write_stat_u64(out, &q("down"), u64::from(s.is_down()));
            write_stat_u64(out, &q("requests"), s.requests());
            write_stat_u64(out, &q("errors"), s.errors());
            write_stat_u64(out, &q("tko_events"), s.tko_events.load(Relaxed));
            write_stat_u64(out, &q("latency_p50_us"), s.latency_quantile_us(0.5));
            write_stat_u64(out, &q("latency_p99_us"), s.latency_quantile_us(0.99));
        }
    }
    true
}
