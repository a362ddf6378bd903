//! Prometheus metrics: memcached's `stats` in the text exposition format (0.0.4), under the
//! metric names of the community exporter (`prometheus/memcached_exporter`, `pkg/exporter`),
//! so that dashboards and alerts written for it work unchanged against memkitd; and the
//! optional HTTP endpoint of `memkitd --metrics-addr HOST:PORT` (`GET /metrics`).
//!
//! [`render`] is shared: the endpoint renders memkitd's own stats with it, and
//! `memkit stats --format prometheus` (memkit-tools) renders any server's (memcached
//! included). Input is what a server answers to `stats`, `stats settings`, `stats items` and
//! `stats slabs`, as name/value pairs; nothing here does I/O. A stat a server does not report
//! is left out (as the exporter does), so the same code renders memcached 1.4–1.6 and
//! memkitd. Families are written once each, with the samples of every server under them.
//!
//! Mapping (exporter names; `stats` field in parentheses):
//! - `memcached_up`, `memcached_version{version}`, `memcached_uptime_seconds` (uptime),
//!   `memcached_time_seconds` (time), `memcached_process_{user,system}_cpu_seconds_total`
//!   (rusage_*)
//! - `memcached_commands_total{command,status}`: get/delete/incr/decr/cas/touch ×
//!   hit/miss (`*_hits`, `*_misses`), cas/badval, flush/hit (cmd_flush), set/hit
//!   (cmd_set − cas_hits − cas_misses − cas_badval: memcached counts CAS in cmd_set)
//! - `memcached_current_items` (curr_items), `memcached_items_total` (total_items),
//!   `memcached_items_evicted_total` (evictions), `memcached_items_reclaimed_total`,
//!   `memcached_item_too_large_total`, `memcached_item_no_memory_total`
//! - `memcached_current_bytes` (bytes), `memcached_limit_bytes` (limit_maxbytes),
//!   `memcached_malloced_bytes` (total_malloced)
//! - `memcached_read_bytes_total`, `memcached_written_bytes_total`,
//!   `memcached_current_connections`, `memcached_max_connections` (settings maxconns),
//!   `memcached_connections_total`, `memcached_connections_rejected_total`,
//!   `memcached_connections_yielded_total`, `memcached_connections_listener_disabled_total`,
//!   `memcached_accepting_connections`
//! - LRU crawler counters (`memcached_lru_crawler_*`) when reported
//! - per size class, label `slab`: from `stats items` `memcached_slab_current_items`,
//!   `memcached_slab_items_age_seconds`, `memcached_slab_items_evicted_total`, ...,
//!   `memcached_slab_mem_requested_bytes`, `memcached_slab_lru_hits_total{lru}`; from
//!   `stats slabs` `memcached_slab_chunk_size_bytes`, `memcached_slab_chunks_per_page`,
//!   `memcached_slab_current_pages`, `memcached_slab_current_chunks`,
//!   `memcached_slab_chunks_used`, `memcached_slab_chunks_free`,
//!   `memcached_slab_chunks_free_end`, `memcached_slab_commands_total{command,status}`.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::server::Shared;

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
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
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
struct Families {
    order: Vec<&'static str>,
    map: BTreeMap<&'static str, Family>,
}

impl Families {
    fn push(
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

// (metric, stat, kind, help) for the general stats.
const GENERAL: &[(&str, &str, Kind, &str)] = &[
    (
        "memcached_auth_commands_total",
        "auth_cmds",
        Kind::Counter,
        "Authentication attempts (-Y and SASL), successful or not.",
    ),
    (
        "memcached_auth_errors_total",
        "auth_errors",
        Kind::Counter,
        "Failed authentication attempts (-Y and SASL).",
    ),
    (
        "memcached_uptime_seconds",
        "uptime",
        Kind::Counter,
        "Number of seconds since the server started.",
    ),
    (
        "memcached_time_seconds",
        "time",
        Kind::Gauge,
        "current UNIX time according to the server.",
    ),
    (
        "memcached_process_user_cpu_seconds_total",
        "rusage_user",
        Kind::Counter,
        "Accumulated user time for this process.",
    ),
    (
        "memcached_process_system_cpu_seconds_total",
        "rusage_system",
        Kind::Counter,
        "Accumulated system time for this process.",
    ),
    (
        "memcached_current_bytes",
        "bytes",
        Kind::Gauge,
        "Current number of bytes used to store items.",
    ),
    (
        "memcached_limit_bytes",
        "limit_maxbytes",
        Kind::Gauge,
        "Number of bytes this server is allowed to use for storage.",
    ),
    (
        "memcached_current_items",
        "curr_items",
        Kind::Gauge,
        "Current number of items stored by this instance.",
    ),
    (
        "memcached_items_total",
        "total_items",
        Kind::Counter,
        "Total number of items stored during the life of this instance.",
    ),
    (
        "memcached_read_bytes_total",
        "bytes_read",
        Kind::Counter,
        "Total number of bytes read by this server from network.",
    ),
    (
        "memcached_written_bytes_total",
        "bytes_written",
        Kind::Counter,
        "Total number of bytes sent by this server to network.",
    ),
    (
        "memcached_current_connections",
        "curr_connections",
        Kind::Gauge,
        "Current number of open connections.",
    ),
    (
        "memcached_connections_total",
        "total_connections",
        Kind::Counter,
        "Total number of connections opened since the server started running.",
    ),
    (
        "memcached_connections_rejected_total",
        "rejected_connections",
        Kind::Counter,
        "Total number of connections rejected due to hitting the memcached's -c limit in maxconns_fast mode.",
    ),
    (
        "memcached_connections_yielded_total",
        "conn_yields",
        Kind::Counter,
        "Total number of connections yielded running due to hitting the memcached's -R limit.",
    ),
    (
        "memcached_connections_listener_disabled_total",
        "listen_disabled_num",
        Kind::Counter,
        "Number of times that memcached has hit its connections limit and disabled its listener.",
    ),
    (
        "memcached_items_evicted_total",
        "evictions",
        Kind::Counter,
        "Total number of valid items removed from cache to free memory for new items.",
    ),
    (
        "memcached_items_reclaimed_total",
        "reclaimed",
        Kind::Counter,
        "Total number of times an entry was stored using memory from an expired entry.",
    ),
    (
        "memcached_item_too_large_total",
        "store_too_large",
        Kind::Counter,
        "The number of times an item exceeded the max-item-size when being stored.",
    ),
    (
        "memcached_item_no_memory_total",
        "store_no_memory",
        Kind::Counter,
        "The number of times an item could not be stored due to no more memory.",
    ),
    (
        "memcached_lru_crawler_starts_total",
        "lru_crawler_starts",
        Kind::Counter,
        "Times an LRU crawler was started.",
    ),
    (
        "memcached_direct_reclaims_total",
        "direct_reclaims",
        Kind::Counter,
        "Times worker threads had to directly reclaim or evict items.",
    ),
    (
        "memcached_lru_crawler_items_checked_total",
        "crawler_items_checked",
        Kind::Counter,
        "Total items examined by LRU Crawler.",
    ),
    (
        "memcached_lru_crawler_reclaimed_total",
        "crawler_reclaimed",
        Kind::Counter,
        "Total items freed by LRU Crawler.",
    ),
    (
        "memcached_lru_crawler_moves_to_cold_total",
        "moves_to_cold",
        Kind::Counter,
        "Total number of items moved from HOT/WARM to COLD LRU's.",
    ),
    (
        "memcached_lru_crawler_moves_to_warm_total",
        "moves_to_warm",
        Kind::Counter,
        "Total number of items moved from COLD to WARM LRU.",
    ),
    (
        "memcached_lru_crawler_moves_within_lru_total",
        "moves_within_lru",
        Kind::Counter,
        "Total number of items reshuffled within HOT or WARM LRU's.",
    ),
    (
        "memcached_accepting_connections",
        "accepting_conns",
        Kind::Gauge,
        "The Memcached server is currently accepting new connections.",
    ),
];

// `stats items` per-class fields: (field, metric, kind, help).
const ITEMS: &[(&str, &str, Kind, &str)] = &[
    (
        "number",
        "memcached_slab_current_items",
        Kind::Gauge,
        "Number of items currently stored in this slab class.",
    ),
    (
        "age",
        "memcached_slab_items_age_seconds",
        Kind::Gauge,
        "Number of seconds the oldest item has been in the slab class.",
    ),
    (
        "crawler_reclaimed",
        "memcached_slab_items_crawler_reclaimed_total",
        Kind::Counter,
        "Number of items freed by the LRU Crawler.",
    ),
    (
        "evicted",
        "memcached_slab_items_evicted_total",
        Kind::Counter,
        "Total number of times an item had to be evicted from the LRU before it expired.",
    ),
    (
        "evicted_nonzero",
        "memcached_slab_items_evicted_nonzero_total",
        Kind::Counter,
        "Total number of times an item which had an explicit expire time set had to be evicted from the LRU before it expired.",
    ),
    (
        "evicted_time",
        "memcached_slab_items_evicted_time_seconds",
        Kind::Counter,
        "Seconds since the last access for the most recent item evicted from this class.",
    ),
    (
        "evicted_unfetched",
        "memcached_slab_items_evicted_unfetched_total",
        Kind::Counter,
        "Total nmber of items evicted and never fetched.",
    ),
    (
        "expired_unfetched",
        "memcached_slab_items_expired_unfetched_total",
        Kind::Counter,
        "Total number of valid items evicted from the LRU which were never touched after being set.",
    ),
    (
        "outofmemory",
        "memcached_slab_items_outofmemory_total",
        Kind::Counter,
        "Total number of items for this slab class that have triggered an out of memory error.",
    ),
    (
        "reclaimed",
        "memcached_slab_items_reclaimed_total",
        Kind::Counter,
        "Total number of items reclaimed.",
    ),
    (
        "tailrepairs",
        "memcached_slab_items_tailrepairs_total",
        Kind::Counter,
        "Total number of times the entries for a particular ID need repairing.",
    ),
    (
        "mem_requested",
        "memcached_slab_mem_requested_bytes",
        Kind::Gauge,
        "Number of bytes of memory actual items take up within a slab.",
    ),
    (
        "moves_to_cold",
        "memcached_slab_items_moves_to_cold",
        Kind::Counter,
        "Number of items moved from HOT or WARM into COLD.",
    ),
    (
        "moves_to_warm",
        "memcached_slab_items_moves_to_warm",
        Kind::Counter,
        "Number of items moves from COLD into WARM.",
    ),
    (
        "moves_within_lru",
        "memcached_slab_items_moves_within_lru",
        Kind::Counter,
        "Number of times active items were bumped within HOT or WARM.",
    ),
    (
        "number_hot",
        "memcached_slab_hot_items",
        Kind::Gauge,
        "Number of items presently stored in the HOT LRU.",
    ),
    (
        "number_warm",
        "memcached_slab_warm_items",
        Kind::Gauge,
        "Number of items presently stored in the WARM LRU.",
    ),
    (
        "number_cold",
        "memcached_slab_cold_items",
        Kind::Gauge,
        "Number of items presently stored in the COLD LRU.",
    ),
    (
        "number_temp",
        "memcached_slab_temporary_items",
        Kind::Gauge,
        "Number of items presently stored in the TEMPORARY LRU.",
    ),
    (
        "age_hot",
        "memcached_slab_hot_age_seconds",
        Kind::Gauge,
        "Age of the oldest item in HOT LRU.",
    ),
    (
        "age_warm",
        "memcached_slab_warm_age_seconds",
        Kind::Gauge,
        "Age of the oldest item in WARM LRU.",
    ),
];

// `stats slabs` per-class fields.
const SLABS: &[(&str, &str, Kind, &str)] = &[
    (
        "chunk_size",
        "memcached_slab_chunk_size_bytes",
        Kind::Gauge,
        "Number of bytes allocated to each chunk within this slab class.",
    ),
    (
        "chunks_per_page",
        "memcached_slab_chunks_per_page",
        Kind::Gauge,
        "Number of chunks within a single page for this slab class.",
    ),
    (
        "total_pages",
        "memcached_slab_current_pages",
        Kind::Gauge,
        "Number of pages allocated to this slab class.",
    ),
    (
        "total_chunks",
        "memcached_slab_current_chunks",
        Kind::Gauge,
        "Number of chunks allocated to this slab class.",
    ),
    (
        "used_chunks",
        "memcached_slab_chunks_used",
        Kind::Gauge,
        "Number of chunks allocated to an item.",
    ),
    (
        "free_chunks",
        "memcached_slab_chunks_free",
        Kind::Gauge,
        "Number of chunks not yet allocated items.",
    ),
    (
        "free_chunks_end",
        "memcached_slab_chunks_free_end",
        Kind::Gauge,
        "Number of free chunks at the end of the last allocated page.",
    ),
];

const COMMANDS_HELP: &str =
    "Total number of all requests broken down by command (get, set, etc.) and status.";
const SLAB_COMMANDS_HELP: &str =
    "Total number of all requests broken down by command (get, set, etc.) and status per slab.";
const OPS: [&str; 6] = ["get", "delete", "incr", "decr", "cas", "touch"];

/// Renders every server's stats as one exposition.
pub fn render(servers: &[ServerStats<'_>]) -> String {
    let mut f = Families::default();
    for s in servers {
        collect(&mut f, s);
    }
    let mut out = String::new();
    for name in &f.order {
        let fam = &f.map[name];
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

fn collect(f: &mut Families, s: &ServerStats<'_>) {
    let base = s.labels;
    let plain = label_set(base, &[]);
    f.push(
        "memcached_up",
        Kind::Gauge,
        "Could the memcached server be reached.",
        plain.clone(),
        if s.up { "1" } else { "0" }.into(),
    );
    if !s.up {
        return;
    }
    let g = s.general;
    if let Some(v) = lookup(g, "version") {
        f.push(
            "memcached_version",
            Kind::Gauge,
            "The version of this memcached server.",
            label_set(base, &[("version", v)]),
            "1".into(),
        );
    }
    // Commands, as the exporter splits them.
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
    for (metric, stat, kind, help) in GENERAL {
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
            plain.clone(),
            v,
        );
    }

    // Per size class.
    let items = by_class(s.items, "items:");
    for (class, fields) in &items {
        let slab = class.to_string();
        let labels = label_set(base, &[("slab", &slab)]);
        for (field, metric, kind, help) in ITEMS {
            if let Some(v) = fields
                .iter()
                .find(|(k, _)| k == field)
                .and_then(|(_, v)| number(v))
            {
                f.push(metric, *kind, help, labels.clone(), v);
            }
        }
        for (field, lru) in [
            ("hits_to_hot", "hot"),
            ("hits_to_warm", "warm"),
            ("hits_to_cold", "cold"),
            ("hits_to_temp", "temporary"),
        ] {
            if let Some(v) = fields
                .iter()
                .find(|(k, _)| *k == field)
                .and_then(|(_, v)| number(v))
            {
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
                "Number of bytes of memory actual items take up within a slab.",
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

/// memkitd's `--metrics-addr` flag (off by default).
#[derive(Debug, Clone, clap::Args)]
pub struct MetricsArgs {
    /// Serve Prometheus metrics (memcached_exporter's names) at http://HOST:PORT/metrics.
    #[arg(long = "metrics-addr", value_name = "HOST:PORT")]
    pub metrics_addr: Option<String>,
}

/// memkitd's own stats as an exposition (no extra labels: Prometheus adds `instance`).
pub fn exposition(sh: &Shared) -> String {
    let fetch = |args: &[&[u8]]| -> Vec<(String, String)> {
        let mut buf = Vec::new();
        crate::stats::write_stats(sh, args, &mut buf);
        String::from_utf8_lossy(&buf)
            .lines()
            .filter_map(|l| l.strip_prefix("STAT "))
            .filter_map(|l| l.split_once(' '))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    };
    let general = fetch(&[]);
    let settings = fetch(&[b"settings"]);
    let items = fetch(&[b"items"]);
    let slabs = fetch(&[b"slabs"]);
    render(&[ServerStats {
        labels: &[],
        up: true,
        general: &general,
        settings: &settings,
        items: &items,
        slabs: &slabs,
    }])
}

/// Binds the metrics listener (`--metrics-addr`).
pub async fn bind(addr: &str) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Serves `GET /metrics` on `listener` forever: a minimal HTTP/1.1 responder, one request
/// per connection (`Connection: close`), which is how Prometheus scrapes.
pub async fn serve(listener: TcpListener, sh: Arc<Shared>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let sh = sh.clone();
        tokio::spawn(async move {
            let _ = tokio::time::timeout(Duration::from_secs(10), respond(stream, &sh)).await;
        });
    }
}

async fn respond(mut s: TcpStream, sh: &Shared) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    // The request head; a body (none is expected) is ignored.
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && !buf.windows(2).any(|w| w == b"\n\n") {
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > 16 * 1024 {
            return reply(
                &mut s,
                "431 Request Header Fields Too Large",
                "text/plain",
                "",
                false,
            )
            .await;
        }
    }
    let head = String::from_utf8_lossy(&buf);
    let mut parts = head.lines().next().unwrap_or("").split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let head_only = method == "HEAD";
    match (method, path) {
        ("GET" | "HEAD", "/metrics") => {
            let body = exposition(sh);
            reply(&mut s, "200 OK", CONTENT_TYPE, &body, head_only).await
        }
        ("GET" | "HEAD", "/") => {
            let body = "memkitd: metrics at /metrics\n";
            reply(
                &mut s,
                "200 OK",
                "text/plain; charset=utf-8",
                body,
                head_only,
            )
            .await
        }
        ("GET" | "HEAD", _) => {
            reply(
                &mut s,
                "404 Not Found",
                "text/plain",
                "not found\n",
                head_only,
            )
            .await
        }
        _ => {
            reply(
                &mut s,
                "405 Method Not Allowed",
                "text/plain",
                "GET only\n",
                false,
            )
            .await
        }
    }
}

/// The Prometheus text format's content type.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

async fn reply(
    s: &mut TcpStream,
    status: &str,
    ctype: &str,
    body: &str,
    head_only: bool,
) -> std::io::Result<()> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(body.as_bytes());
    }
    s.write_all(&out).await?;
    s.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn families_once_with_every_server() {
        let g = pairs(&[
            ("version", "1.6.18"),
            ("uptime", "5"),
            ("cmd_set", "10"),
            ("cas_hits", "1"),
            ("cas_misses", "1"),
            ("cas_badval", "1"),
            ("get_hits", "3"),
            ("get_misses", "4"),
            ("rusage_user", "0.012000"),
            ("auth_cmds", "3"),
            ("auth_errors", "1"),
            ("libevent", "tokio"),
        ]);
        let items = pairs(&[("items:1:number", "2"), ("items:1:mem_requested", "100")]);
        let slabs = pairs(&[("1:chunk_size", "96"), ("active_slabs", "1")]);
        let a = [("server", "a:1")];
        let b = [("server", "b\"2")];
        let text = render(&[
            ServerStats {
                labels: &a,
                up: true,
                general: &g,
                items: &items,
                slabs: &slabs,
                ..Default::default()
            },
            ServerStats {
                labels: &b,
                up: false,
                ..Default::default()
            },
        ]);
        assert_eq!(text.matches("# TYPE memcached_up gauge").count(), 1);
        assert!(text.contains("memcached_up{server=\"a:1\"} 1\n"));
        assert!(text.contains("memcached_up{server=\"b\\\"2\"} 0\n"));
        assert!(text.contains(
            "memcached_commands_total{server=\"a:1\",command=\"set\",status=\"hit\"} 7\n"
        ));
        assert!(text.contains(
            "memcached_commands_total{server=\"a:1\",command=\"get\",status=\"miss\"} 4\n"
        ));
        assert!(
            text.contains("memcached_slab_mem_requested_bytes{server=\"a:1\",slab=\"1\"} 100\n")
        );
        assert!(text.contains("memcached_slab_chunk_size_bytes{server=\"a:1\",slab=\"1\"} 96\n"));
        assert!(
            text.contains("memcached_process_user_cpu_seconds_total{server=\"a:1\"} 0.012000\n")
        );
        assert!(text.contains("memcached_auth_commands_total{server=\"a:1\"} 3\n"));
        assert!(text.contains("memcached_auth_errors_total{server=\"a:1\"} 1\n"));
        assert!(!text.contains("libevent"));
    }
}
