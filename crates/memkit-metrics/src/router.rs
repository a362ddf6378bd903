//! A router's routing (`memkitd --route`): its `stats router` lines as `memkit_router_*`
//! families. Counters of the router as a whole, then per backend server, labelled `pool`
//! and `server` (the server's `host:port`). A server that is not a router answers no
//! `stats router`, and so gets none of these families.

use crate::{Families, Kind, label_set, lookup, number};

// (metric, stat, help): the router's own counters.
const ROUTER: &[(&str, &str, &str)] = &[
    (
        "memkit_router_requests_total",
        "requests",
        "Commands the router forwarded.",
    ),
    (
        "memkit_router_unrouted_total",
        "unrouted",
        "Commands no route took.",
    ),
    (
        "memkit_router_failovers_total",
        "failovers",
        "Commands a failover route sent to a later pool.",
    ),
    (
        "memkit_router_gutter_total",
        "gutter",
        "Commands sent to a gutter pool.",
    ),
    (
        "memkit_router_shadowed_total",
        "shadowed",
        "Commands mirrored to a shadow pool.",
    ),
    (
        "memkit_router_warmed_total",
        "warmed",
        "Warm-up misses filled from the warm pool.",
    ),
    (
        "memkit_router_reloads_total",
        "reloads",
        "Route files reloaded.",
    ),
    (
        "memkit_router_reload_failures_total",
        "reload_failures",
        "Route files refused on reload (the routes in force kept).",
    ),
];

// (metric, field, kind, help): per server, from `pool:NAME:I:field`.
const SERVER: &[(&str, &str, Kind, &str)] = &[
    (
        "memkit_router_server_requests_total",
        "requests",
        Kind::Counter,
        "Commands sent to a backend server.",
    ),
    (
        "memkit_router_server_errors_total",
        "errors",
        Kind::Counter,
        "Commands a backend server could not take (unreachable, timed out, marked down).",
    ),
    (
        "memkit_router_server_tko_total",
        "tko_events",
        Kind::Counter,
        "Times a backend server was marked down.",
    ),
    (
        "memkit_router_server_down",
        "down",
        Kind::Gauge,
        "1 while a backend server is marked down.",
    ),
    (
        "memkit_router_server_latency_p50_microseconds",
        "latency_p50_us",
        Kind::Gauge,
        "Median round trip of a batch to a backend server (upper bound of its power-of-two bucket).",
    ),
    (
        "memkit_router_server_latency_p99_microseconds",
        "latency_p99_us",
        Kind::Gauge,
        "99th percentile round trip of a batch to a backend server (upper bound of its bucket).",
    ),
];

impl Families {
    /// The `memkit_router_*` families of a router's `stats router` lines.
    pub(crate) fn push_router(&mut self, base: &[(&str, &str)], router: &[(String, String)]) {
        for (metric, stat, help) in ROUTER {
            if let Some(v) = lookup(router, stat).and_then(number) {
                self.push(metric, Kind::Counter, help, label_set(base, &[]), v);
            }
        }
        // `pool:NAME:I:addr` names each server; its other fields follow under the same stem.
        for (k, addr) in router {
            let Some(stem) = k.strip_suffix(":addr") else {
                continue;
            };
            let Some((pool, _index)) = stem.strip_prefix("pool:").and_then(|s| s.rsplit_once(':'))
            else {
                continue;
            };
            let labels = label_set(base, &[("pool", pool), ("server", addr)]);
            for (metric, field, kind, help) in SERVER {
                if let Some(v) = lookup(router, &format!("{stem}:{field}")).and_then(number) {
                    self.push(metric, *kind, help, labels.clone(), v);
                }
            }
        }
    }
}
