//! The live page for operators on the metrics address (`GET /`): request rates by command,
//! hit ratio, evictions and expirations over the last 15 minutes; memory by size class
//! against what memcached's slab classes would spend on the same items; connections,
//! traffic and settings; and, with `--dashboard-keys`, the hottest keys and a read-only key
//! browser.
//!
//! The page is plain HTML, CSS and JavaScript with uPlot (vendored with its licence in
//! `page/assets/`), embedded in the binary. It polls JSON once a second:
//! - `/api/now?since=SEQ`: `stats` as the protocol reports it, and the points of the
//!   15-minute series ([`series`], a ring buffer a sampler fills once a second) after
//!   `SEQ`;
//! - `/api/classes` (every 5 s): the size classes ([`classes`]);
//! - `/api/hot` (every 5 s) and `/api/keys?prefix=P` (on demand), only with
//!   `--dashboard-keys` ([`keys`]), and unless `-W` turns `watch` off (hot keys) or `-X`
//!   the dumps (the key browser); otherwise they are 404 and the page hides their panels.
//!
//! Nothing on the page writes: every route is a `GET` that reads.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::Response;
use crate::state::Shared;

pub mod classes;
pub mod json;
pub mod keys;
pub mod series;

use json::Json;

/// What the page's routes keep between requests: the series, the last size classes, the
/// hot keys of the last interval, the key browser's cursors and its login backoff.
#[derive(Debug)]
pub struct Dashboard {
    series: Mutex<series::Series>,
    classes: Mutex<Option<(Instant, Arc<Vec<u8>>)>>,
    hot: Mutex<keys::HotState>,
    /// The key browser's cursors and failed logins.
    pub keys: keys::Browser,
    started: Instant,
}

impl Default for Dashboard {
    fn default() -> Self {
        Dashboard::new()
    }
}

impl Dashboard {
    /// An empty dashboard.
    pub fn new() -> Dashboard {
        Dashboard {
            series: Mutex::new(series::Series::default()),
            classes: Mutex::new(None),
            hot: Mutex::new(keys::HotState::default()),
            keys: keys::Browser::default(),
            started: Instant::now(),
        }
    }

    /// Takes one sample of the series and moves the hot keys on: what the sampler does
    /// each second (`tick` counts them).
    pub fn tick(&self, sh: &Shared, tick: u64) {
        let stats = Stats::general(sh);
        let secs = self.started.elapsed().as_secs_f64();
        self.series.lock().push(secs, &stats);
        if tick.is_multiple_of(keys::HOT_INTERVAL_SECS) {
            self.hot.lock().rotate(sh);
        }
    }
}

/// Samples the series once a second, forever (on the metrics listener's runtime).
pub async fn sample_every_second(dash: Arc<Dashboard>, sh: Arc<Shared>) {
    let mut every = tokio::time::interval(Duration::from_secs(1));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut tick = 0u64;
    loop {
        every.tick().await;
        dash.tick(&sh, tick);
        tick += 1;
    }
}

/// `stats` or one of its subcommands, as name and value.
#[derive(Debug, Clone, Default)]
pub struct Stats(Vec<(String, String)>);

impl Stats {
    /// `stats`.
    pub fn general(sh: &Shared) -> Stats {
        Stats(super::stat_rows(sh, &[]))
    }

    /// `stats settings`.
    pub fn settings(sh: &Shared) -> Stats {
        Stats(super::stat_rows(sh, &[b"settings"]))
    }

    /// The value of `name`, if reported.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The integer `name`, 0 when not reported.
    pub fn u(&self, name: &str) -> u64 {
        self.get(name).and_then(|v| v.parse().ok()).unwrap_or(0)
    }
}

/// The page's files, embedded: path, content type, bytes.
const ASSETS: &[(&str, &str, &[u8])] = &[
    (
        "/",
        "text/html; charset=utf-8",
        include_bytes!("page/assets/index.html"),
    ),
    (
        "/assets/page.js",
        "text/javascript; charset=utf-8",
        include_bytes!("page/assets/page.js"),
    ),
    (
        "/assets/page.css",
        "text/css; charset=utf-8",
        include_bytes!("page/assets/page.css"),
    ),
    (
        "/assets/uPlot.iife.min.js",
        "text/javascript; charset=utf-8",
        include_bytes!("page/assets/uPlot.iife.min.js"),
    ),
    (
        "/assets/uPlot.min.css",
        "text/css; charset=utf-8",
        include_bytes!("page/assets/uPlot.min.css"),
    ),
    (
        "/assets/LICENSE-uPlot.txt",
        "text/plain; charset=utf-8",
        include_bytes!("page/assets/LICENSE-uPlot.txt"),
    ),
];

/// JSON that changes every second: never cached.
const NO_STORE: &str = "Cache-Control: no-store\r\n";
/// The page's files change only with the binary.
const ASSET_CACHE: &str = "Cache-Control: max-age=300\r\n";

/// A JSON reply.
fn json(body: impl Into<Vec<u8>>) -> Response {
    Response {
        headers: NO_STORE,
        ..Response::new("200 OK", "application/json", body.into())
    }
}

/// The reply to `GET path?query` (a `HEAD` is answered the same, without its body).
pub async fn route(
    dash: &Arc<Dashboard>,
    sh: &Arc<Shared>,
    path: &str,
    query: &str,
    head: &str,
) -> Response {
    if let Some((_, ctype, body)) = ASSETS.iter().find(|(p, _, _)| *p == path) {
        return Response {
            headers: ASSET_CACHE,
            ..Response::new("200 OK", ctype, *body)
        };
    }
    match path {
        "/api/now" => {
            let since = param(query, "since").and_then(|s| String::from_utf8(s).ok()?.parse().ok());
            json(now(dash, sh, since))
        }
        "/api/classes" => json(dash.classes(sh).await.to_vec()),
        "/api/hot" if !hot_shown(sh) => Response::not_found(),
        "/api/keys" if !keys_shown(sh) => Response::not_found(),
        "/api/hot" | "/api/keys" => {
            if let Err(refused) = dash.keys.admit(sh, head) {
                return refused;
            }
            if path == "/api/hot" {
                json(dash.hot.lock().look(sh))
            } else {
                json(dash.keys.search(sh, query).await)
            }
        }
        _ => Response::not_found(),
    }
}

/// Whether the key browser is served: `--dashboard-keys`, and dumps not turned off (`-X`).
fn keys_shown(sh: &Shared) -> bool {
    sh.settings.dashboard_keys && sh.settings.dumping
}

/// Whether hot keys are served: `--dashboard-keys`, and `watch` not turned off (`-W`).
fn hot_shown(sh: &Shared) -> bool {
    sh.settings.dashboard_keys && sh.settings.watch
}

impl Dashboard {
    /// The size classes, computed again at most every 2 s whoever asks (a crawl of a
    /// sample of the items, off the runtime's thread).
    async fn classes(&self, sh: &Arc<Shared>) -> Arc<Vec<u8>> {
        if let Some((at, body)) = &*self.classes.lock()
            && at.elapsed() < Duration::from_secs(2)
        {
            return body.clone();
        }
        let shared = sh.clone();
        let body = tokio::task::spawn_blocking(move || classes::json(&shared))
            .await
            .unwrap_or_default();
        let body = Arc::new(body.into_bytes());
        *self.classes.lock() = Some((Instant::now(), body.clone()));
        body
    }
}

/// `/api/now`: the figures of `stats` the page shows, the settings that matter, and the
/// series' points after `since` (all of them without it).
fn now(dash: &Dashboard, sh: &Shared, since: Option<u64>) -> String {
    let st = Stats::general(sh);
    let settings = Stats::settings(sh);
    let mut j = Json::new();
    j.open();
    j.key("stats").open();
    for name in NOW_STATS {
        if let Some(v) = st.get(name) {
            match v.parse::<u64>() {
                Ok(n) => j.field_u(name, n),
                Err(_) => j.field_s(name, v),
            };
        }
    }
    j.close();
    let (hits, misses) = (st.u("get_hits"), st.u("get_misses"));
    let ratio = (hits + misses > 0).then(|| hits as f64 / (hits + misses) as f64);
    j.key("hit_ratio").f(ratio);
    j.key("settings").open();
    for name in NOW_SETTINGS {
        if let Some(v) = settings.get(name) {
            j.field_s(name, v);
        }
    }
    j.close();
    j.key("keys").b(keys_shown(sh));
    j.key("hot").b(hot_shown(sh));
    j.key("login").b(keys::login_required(sh));
    j.key("series");
    dash.series.lock().write(since, &mut j);
    j.close();
    j.finish()
}

/// The figures of `stats` `/api/now` passes on.
const NOW_STATS: &[&str] = &[
    "pid",
    "uptime",
    "time",
    "version",
    "threads",
    "max_connections",
    "curr_connections",
    "total_connections",
    "rejected_connections",
    "bytes_read",
    "bytes_written",
    "curr_items",
    "total_items",
    "bytes",
    "limit_maxbytes",
    "memkit_mapped_bytes",
    "get_hits",
    "get_misses",
    "evictions",
    "reclaimed",
    "expired_unfetched",
    "evicted_unfetched",
    "persist_durability",
    "persist_bytes_on_disk",
];

/// The settings (`stats settings`) the page shows.
const NOW_SETTINGS: &[&str] = &[
    "maxbytes",
    "maxconns",
    "tcpport",
    "inter",
    "evictions",
    "item_size_max",
    "num_threads",
    "memkit_eviction_policy",
    "memkit_io",
    "binding_protocol",
    "auth_enabled_ascii",
    "auth_enabled_sasl",
    "ssl_enabled",
    "idle_timeout",
    "memory_file",
];

/// The value of `name` in a query string (`a=1&b=2`), percent-decoded; `+` stays itself.
pub fn param(query: &str, name: &str) -> Option<Vec<u8>> {
    query
        .split('&')
        .map(|p| p.split_once('=').unwrap_or((p, "")))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| percent_decode(v))
}

/// `%XX` sequences into their bytes; a malformed one stays as it is.
pub fn percent_decode(v: &str) -> Vec<u8> {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && let (Some(h), Some(l)) = (
                b.get(i + 1).copied().and_then(hex),
                b.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_parameters_are_percent_decoded() {
        assert_eq!(param("a=1&prefix=us%3Aer+x", "prefix").unwrap(), b"us:er+x");
        assert_eq!(param("prefix", "prefix").unwrap(), b"");
        assert_eq!(param("a=1", "prefix"), None);
        assert_eq!(percent_decode("%zz%4"), b"%zz%4");
        assert_eq!(percent_decode("%00%ff"), [0, 255]);
    }
}
