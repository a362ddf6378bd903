//! memcached's `stats` in the Prometheus text exposition format (0.0.4), under the metric
//! names of the community exporter (`prometheus/memcached_exporter`, `pkg/exporter`), so that
//! dashboards and alerts written for it work unchanged against memkitd.
//!
//! A crate of its own, with no dependencies and no I/O, because two very different programs
//! render with it: `memkitd --metrics-addr` (its own stats, plus its process figures) and
//! `memkit stats --format prometheus` (any pool's stats, memcached included), and the CLI
//! must not pull the server (its store, TLS stack and runtime setup) in to do so.
//!
//! Input is what a server answers to `stats`, `stats settings`, `stats items` and `stats
//! slabs`, as name/value pairs. A stat a server does not report is left out (as the exporter
//! does), so the same code renders memcached 1.4–1.6 and memkitd. Families are written once
//! each, with the samples of every server under them.
//!
//! Mapping (exporter names; `stats` field in parentheses; tables in `names.rs`):
//! - `memcached_up`, `memcached_version{version}`, `memcached_uptime_seconds` (uptime),
//!   `memcached_time_seconds` (time), `memcached_process_{user,system}_cpu_seconds_total`
//!   (rusage_*)
//! - `memcached_commands_total{command,status}`: get/delete/incr/decr/cas/touch ×
//!   hit/miss (`*_hits`, `*_misses`), cas/badval, flush/hit (cmd_flush), set/hit
//!   (cmd_set − cas_hits − cas_misses − cas_badval: memcached counts CAS in cmd_set)
//! - items, bytes, connections, LRU crawler counters; `memcached_auth_commands_total`,
//!   `memcached_auth_errors_total` (auth_cmds, auth_errors)
//! - `memcached_ssl_handshake_errors_total` (ssl_handshake_errors, with `-Z`)
//! - `memcached_extstore_*` (the exporter's, for memcached's `extstore_*` lines, with
//!   memkitd's `-o ext_path`) and `memkit_extstore_*` (the read counters the exporter leaves
//!   out, and memkitd's own lines about the flash tier)
//! - `memkit_persist_*` (memkitd's `persist_*`, with `--persist`), and
//!   `memkit_persist_durability_info{durability}`
//! - `memkit_raft_*` (memkitd's `raft_*`, in a replicated group; `raft.rs`):
//!   `memkit_raft_role{role}`, term, leader, log/commit/applied index, and on the leader
//!   `memkit_raft_follower_lag{node}` ([`ServerStats::followers`])
//! - `memkit_router_*` (a router's `stats router`; `router.rs`): its counters, and per
//!   backend server (labels `pool`, `server`) requests, errors, marks down, latency
//! - per size class, label `slab`: from `stats items` and from `stats slabs`
//! - with [`render_own`]: `process_cpu_seconds_total`, `process_resident_memory_bytes`,
//!   `process_open_fds`, ... ([`ProcessFigures`])

mod names;
mod process;
mod raft;
mod router;

use std::collections::BTreeMap;
use std::fmt::Write;

pub use process::ProcessFigures;
pub use raft::Follower as RaftFollower;

use names::{EXTSTORE, GENERAL, ITEMS, PERSIST, SLABS};

/// The Prometheus text format's content type.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// One server's replies (empty slices for what was not fetched or not answered).
#[derive(Debug, Clone, Copy, Default)]
pub struct ServerStats<'a> {
    /// Extra labels on every sample (e.g. `server="10.0.0.1:11211"` for a pool; none for a
    /// server's own endpoint, where Prometheus adds `instance`).
    pub labels: &'a [(&'a str, &'a str)],
    /// Whether the server answered; `memcached_up` is 0 and nothing else is written if not.
    pub up: bool,
    /// `stats`.
    pub general: &'a [(String, String)],
    /// `stats settings`.
    pub settings: &'a [(String, String)],
    /// `stats items` (`items:<class>:<field>`).
    pub items: &'a [(String, String)],
    /// `stats slabs` (`<class>:<field>`, `active_slabs`, `total_malloced`).
    pub slabs: &'a [(String, String)],
    /// A group's leader: each follower's progress (from the node itself; `stats` does not
    /// carry it).
    pub followers: &'a [RaftFollower],
    /// A router's `stats router` (empty for any other server).
    pub router: &'a [(String, String)],
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Kind {
    Counter,
    Gauge,
}

#[derive(Debug)]
struct Family {
    help: &'static str,
    kind: Kind,
    samples: Vec<(String, String)>,
}

/// Families in first-use order, each written once.
#[derive(Debug, Default)]
pub(crate) struct Families {
    order: Vec<&'static str>,
    map: BTreeMap<&'static str, Family>,
}

impl Families {
    pub(crate) fn push(
        &mut self,
        name: &'static str,
        kind: Kind,
        help: &'static str,
        labels: String,
        value: String,
    ) {
        let f = self.map.entry(name).or_insert_with(|| {
            self.order.push(name);
            Family {
                help,
                kind,
                samples: Vec::new(),
            }
        });
        f.samples.push((labels, value));
    }

    fn write(&self) -> String {
        let mut out = String::new();
        for name in &self.order {
            let fam = &self.map[name];
            let kind = match fam.kind {
                Kind::Counter => "counter",
                Kind::Gauge => "gauge",
            };
            let _ = writeln!(out, "# HELP {name} {}", fam.help);
            let _ = writeln!(out, "# TYPE {name} {kind}");
            for (labels, value) in &fam.samples {
                let _ = writeln!(out, "{name}{labels} {value}");
            }
        }
        out
    }
}

/// Renders every server's stats as one exposition.
pub fn render(servers: &[ServerStats<'_>]) -> String {
    let mut f = Families::default();
    for s in servers {
        collect(&mut f, s);
    }
    f.write()
}

/// A server's own endpoint: its stats and the figures of the process serving them.
pub fn render_own(server: &ServerStats<'_>, process: &ProcessFigures) -> String {
    let mut f = Families::default();
    collect(&mut f, server);
    f.push_process(process);
    f.write()
}

fn escape(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

fn label_set(base: &[(&str, &str)], extra: &[(&str, &str)]) -> String {
    if base.is_empty() && extra.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = base
        .iter()
        .chain(extra)
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect();
    format!("{{{}}}", parts.join(","))
}

/// A stat value as a Prometheus sample value: numbers as they are; memcached's
/// `seconds.micros` rusage is a number too; anything else is not a sample.
fn number(v: &str) -> Option<String> {
    let v = v.trim();
    match v.parse::<f64>() {
        Ok(f) if f.is_finite() => Some(v.to_owned()),
        _ => None,
    }
}

fn lookup<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn int(pairs: &[(String, String)], name: &str) -> Option<i128> {
    lookup(pairs, name)?.trim().parse().ok()
}

/// Per-class fields: `prefix<class>:<field>` → class → field → value.
fn by_class<'a>(
    pairs: &'a [(String, String)],
    prefix: &str,
) -> BTreeMap<u32, Vec<(&'a str, &'a str)>> {
    let mut m: BTreeMap<u32, Vec<(&str, &str)>> = BTreeMap::new();
    for (k, v) in pairs {
        let Some(rest) = k.strip_prefix(prefix) else {
            continue;
        };
        let Some((class, field)) = rest.split_once(':') else {
            continue;
        };
        if let Ok(c) = class.parse::<u32>() {
            m.entry(c).or_default().push((field, v.as_str()));
        }
    }
    m
}

const COMMANDS_HELP: &str =
    "Total number of all requests broken down by command (get, set, etc.) and status.";
const SLAB_COMMANDS_HELP: &str =
    "Total number of all requests broken down by command (get, set, etc.) and status per slab.";
const MEM_REQUESTED_HELP: &str = "Number of bytes of memory actual items take up within a slab.";
const OPS: [&str; 6] = ["get", "delete", "incr", "decr", "cas", "touch"];

/// One server's families: `memcached_up` always, the rest only from a server that answered.
fn collect(f: &mut Families, s: &ServerStats<'_>) {
    f.push(
        "memcached_up",
        Kind::Gauge,
        "Could the memcached server be reached.",
        label_set(s.labels, &[]),
        if s.up { "1" } else { "0" }.into(),
    );
    if !s.up {
        return;
    }
    collect_commands(f, s);
    collect_general(f, s);
    collect_persist(f, s);
    f.push_raft(s.labels, s.general, s.followers);
    f.push_router(s.labels, s.router);
    let items = collect_items(f, s);
    collect_slabs(f, s, &items);
}

/// `memcached_commands_total{command,status}`, split as the exporter splits it.
fn collect_commands(f: &mut Families, s: &ServerStats<'_>) {
    let (base, g) = (s.labels, s.general);
    let cmd = |f: &mut Families, command: &str, status: &str, v: String| {
        f.push(
            "memcached_commands_total",
            Kind::Counter,
            COMMANDS_HELP,
            label_set(base, &[("command", command), ("status", status)]),
            v,
        );
    };
    for op in OPS {
        if let Some(v) = lookup(g, &format!("{op}_hits")).and_then(number) {
            cmd(f, op, "hit", v);
        }
        if let Some(v) = lookup(g, &format!("{op}_misses")).and_then(number) {
            cmd(f, op, "miss", v);
        }
    }
    if let Some(v) = lookup(g, "cas_badval").and_then(number) {
        cmd(f, "cas", "badval", v);
    }
    if let Some(v) = lookup(g, "cmd_flush").and_then(number) {
        cmd(f, "flush", "hit", v);
    }
    if let (Some(set), Some(a), Some(b), Some(c)) = (
        int(g, "cmd_set"),
        int(g, "cas_hits"),
        int(g, "cas_misses"),
        int(g, "cas_badval"),
    ) {
        cmd(f, "set", "hit", (set - a - b - c).max(0).to_string());
    }
}

/// The one-sample families of `stats` (and `stats settings`' `maxconns`).
fn collect_general(f: &mut Families, s: &ServerStats<'_>) {
    let (base, g) = (s.labels, s.general);
    let plain = label_set(base, &[]);
    if let Some(v) = lookup(g, "version") {
        f.push(
            "memcached_version",
            Kind::Gauge,
            "The version of this memcached server.",
            label_set(base, &[("version", v)]),
            "1".into(),
        );
    }
    for (metric, stat, kind, help) in GENERAL.iter().chain(EXTSTORE) {
        if let Some(v) = lookup(g, stat).and_then(number) {
            f.push(metric, *kind, help, plain.clone(), v);
        }
    }
    let maxconns = lookup(s.settings, "maxconns").or_else(|| lookup(g, "max_connections"));
    if let Some(v) = maxconns.and_then(number) {
        f.push(
            "memcached_max_connections",
            Kind::Gauge,
            "Maximum number of clients allowed.",
            plain.clone(),
            v,
        );
    }
    let malloced = lookup(g, "total_malloced").or_else(|| lookup(s.slabs, "total_malloced"));
    if let Some(v) = malloced.and_then(number) {
        f.push(
            "memcached_malloced_bytes",
            Kind::Gauge,
            "Number of bytes of memory allocated to slab pages.",
            plain,
            v,
        );
    }
}

/// memkitd's `persist_*` (only a server in persistent mode reports them).
fn collect_persist(f: &mut Families, s: &ServerStats<'_>) {
    let (base, g) = (s.labels, s.general);
    if let Some(mode) = lookup(g, "persist_durability") {
        f.push(
            "memkit_persist_durability_info",
            Kind::Gauge,
            "The persistent store's durability mode (sync, periodic:MS or none).",
            label_set(base, &[("durability", mode)]),
            "1".into(),
        );
    }
    for (metric, stat, kind, help) in PERSIST {
        if let Some(v) = lookup(g, stat).and_then(number) {
            f.push(metric, *kind, help, label_set(base, &[]), v);
        }
    }
}

/// The `stats items` families, per class; returns the classes' fields for
/// [`collect_slabs`], which needs to know where `mem_requested` was reported.
fn collect_items<'a>(
    f: &mut Families,
    s: &ServerStats<'a>,
) -> BTreeMap<u32, Vec<(&'a str, &'a str)>> {
    let base = s.labels;
    let items = by_class(s.items, "items:");
    for (class, fields) in &items {
        let slab = class.to_string();
        let labels = label_set(base, &[("slab", &slab)]);
        let field = |name: &str| fields.iter().find(|(k, _)| *k == name).map(|(_, v)| *v);
        for (name, metric, kind, help) in ITEMS {
            if let Some(v) = field(name).and_then(number) {
                f.push(metric, *kind, help, labels.clone(), v);
            }
        }
        for (name, lru) in [
            ("hits_to_hot", "hot"),
            ("hits_to_warm", "warm"),
            ("hits_to_cold", "cold"),
            ("hits_to_temp", "temporary"),
        ] {
            if let Some(v) = field(name).and_then(number) {
                f.push(
                    "memcached_slab_lru_hits_total",
                    Kind::Counter,
                    "Number of get_hits to the LRU.",
                    label_set(base, &[("slab", &slab), ("lru", lru)]),
                    v,
                );
            }
        }
    }
    items
}

/// The `stats slabs` families, per class.
fn collect_slabs(f: &mut Families, s: &ServerStats<'_>, items: &BTreeMap<u32, Vec<(&str, &str)>>) {
    let base = s.labels;
    for (class, fields) in by_class(s.slabs, "") {
        let slab = class.to_string();
        let labels = label_set(base, &[("slab", &slab)]);
        let field = |name: &str| fields.iter().find(|(k, _)| *k == name).map(|(_, v)| *v);
        for (name, metric, kind, help) in SLABS {
            if let Some(v) = field(name).and_then(number) {
                f.push(metric, *kind, help, labels.clone(), v);
            }
        }
        // memcached 1.4/1.5 report mem_requested here rather than in `stats items`.
        let in_items = items
            .get(&class)
            .is_some_and(|fs| fs.iter().any(|(k, _)| *k == "mem_requested"));
        if !in_items && let Some(v) = field("mem_requested").and_then(number) {
            f.push(
                "memcached_slab_mem_requested_bytes",
                Kind::Gauge,
                MEM_REQUESTED_HELP,
                labels.clone(),
                v,
            );
        }
        let slab_cmd = |f: &mut Families, command: &str, status: &str, v: String| {
            f.push(
                "memcached_slab_commands_total",
                Kind::Counter,
                SLAB_COMMANDS_HELP,
                label_set(
                    base,
                    &[("slab", &slab), ("command", command), ("status", status)],
                ),
                v,
            );
        };
        for op in OPS {
            if let Some(v) = field(&format!("{op}_hits")).and_then(number) {
                slab_cmd(f, op, "hit", v);
            }
        }
        if let Some(v) = field("cas_badval").and_then(number) {
            slab_cmd(f, "cas", "badval", v);
        }
        let n = |name: &str| field(name).and_then(|v| v.trim().parse::<i128>().ok());
        if let (Some(set), Some(a), Some(b)) = (n("cmd_set"), n("cas_hits"), n("cas_badval")) {
            slab_cmd(f, "set", "hit", (set - a - b).max(0).to_string());
        }
    }
}

#[cfg(test)]
mod tests;
