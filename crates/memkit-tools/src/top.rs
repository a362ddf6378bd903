//! `memkit top`: a live view of one server or a pool, refreshed every interval. Per server
//! and in total: operations per second by command (deltas of `cmd_get`, `cmd_set`, ...),
//! the get hit ratio (over the last interval and since start), evictions, items, memory
//! used against the limit, connections; and for the selected server (or the total) the
//! memory per item-size class as a bar chart — seed 003's figure 4, "if it doesn't look like
//! what the application should produce, worry". Only `stats`, `stats items` and
//! `stats slabs` are used (binary `STAT`, `STAT items`, `STAT slabs` with `--binary`), so
//! it works against memcached as well as memkitd, `-S` servers included. Nodes of a
//! replicated memkitd group get a row each in a replication section ([`crate::top_group`]).
//!
//! Keys: `q` quits, Tab / Shift-Tab (or arrows) move between the total and each server.
//! Without a terminal (or with `--batch`) frames are printed one after another.

use std::time::{Duration, Instant};

use memkit_client::Cluster;

use crate::stats::{SizeClass, Snapshot, fetch_all};
use crate::term::{self, Key};

/// Options of `memkit top`.
#[derive(Debug, Clone)]
pub struct TopOptions {
    /// Time between refreshes.
    pub interval: Duration,
    /// Stop after this many refreshes.
    pub iterations: Option<u64>,
    /// Print frames as text instead of driving the terminal.
    pub batch: bool,
}

/// What `top` knows of one server.
#[derive(Debug, Clone, Default)]
pub struct ServerView {
    /// `host:port`.
    pub addr: String,
    /// The latest snapshot and when it was taken.
    pub cur: Option<(Instant, Snapshot)>,
    /// The one before, for rates.
    pub prev: Option<(Instant, Snapshot)>,
    /// The latest error, if the last poll failed.
    pub error: Option<String>,
}

/// Derived numbers for one server or the total.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
    /// Per-second rates over the last interval: get, set, delete, incr, decr, cas, touch,
    /// flush (None before the second poll).
    pub rates: Option<[f64; 8]>,
    /// Evictions per second over the last interval.
    pub evict_rate: Option<f64>,
    /// Hits and misses of gets over the last interval.
    pub interval_hits: Option<(u64, u64)>,
    /// Hits and misses since start.
    pub hits: (u64, u64),
    /// Total evictions.
    pub evictions: u64,
    /// Items stored.
    pub items: u64,
    /// Bytes used and the limit.
    pub bytes: (u64, u64),
    /// Open connections and the limit.
    pub conns: (u64, u64),
    /// With a flash tier (memcached's extstore, memkitd's `-o ext_path`): items whose value
    /// is on flash (counted in `items` too), bytes used there, and the flash limit.
    pub flash: Option<(u64, u64, u64)>,
    /// Servers answering / servers.
    pub up: (usize, usize),
}

/// Command names for the rates, in `Figures::rates` order.
pub const COMMANDS: [&str; 8] = [
    "get", "set", "delete", "incr", "decr", "cas", "touch", "flush",
];

fn command_counts(s: &Snapshot) -> [u64; 8] {
    [
        s.u("cmd_get"),
        s.u("cmd_set"),
        s.u("delete_hits") + s.u("delete_misses"),
        s.u("incr_hits") + s.u("incr_misses"),
        s.u("decr_hits") + s.u("decr_misses"),
        s.u("cas_hits") + s.u("cas_misses") + s.u("cas_badval"),
        s.u("cmd_touch"),
        s.u("cmd_flush"),
    ]
}

impl ServerView {
    /// This server's figures.
    pub fn figures(&self) -> Figures {
        let mut f = Figures {
            up: (usize::from(self.error.is_none() && self.cur.is_some()), 1),
            ..Figures::default()
        };
        let Some((t1, s)) = &self.cur else {
            return f;
        };
        f.hits = (s.u("get_hits"), s.u("get_misses"));
        f.evictions = s.u("evictions");
        f.items = s.u("curr_items");
        f.bytes = (s.u("bytes"), s.u("limit_maxbytes"));
        f.conns = (s.u("curr_connections"), s.u("max_connections"));
        if s.num("extstore_limit_maxbytes").is_some() {
            // memkitd counts the items; memcached only the objects on flash (the same but
            // for records compaction has not yet dropped).
            let items = match s.num("memkit_extstore_items") {
                Some(_) => s.u("memkit_extstore_items"),
                None => s.u("extstore_objects_used"),
            };
            let used = (s.u("extstore_bytes_used"), s.u("extstore_limit_maxbytes"));
            f.flash = Some((items, used.0, used.1));
        }
        if let Some((t0, p)) = &self.prev {
            let dt = t1.duration_since(*t0).as_secs_f64();
            // A restarted server's counters go backwards: no rate for that interval.
            if dt > 0.0 && s.u("uptime") >= p.u("uptime") {
                let (a, b) = (command_counts(p), command_counts(s));
                let mut r = [0.0; 8];
                for i in 0..8 {
                    r[i] = b[i].saturating_sub(a[i]) as f64 / dt;
                }
                f.rates = Some(r);
                f.evict_rate = Some(s.u("evictions").saturating_sub(p.u("evictions")) as f64 / dt);
                f.interval_hits = Some((
                    s.u("get_hits").saturating_sub(p.u("get_hits")),
                    s.u("get_misses").saturating_sub(p.u("get_misses")),
                ));
            }
        }
        f
    }
}

/// The sum of several servers' figures.
pub fn total(views: &[ServerView]) -> Figures {
    let mut t = Figures {
        up: (0, views.len()),
        ..Figures::default()
    };
    for v in views {
        let f = v.figures();
        t.up.0 += f.up.0;
        if let Some(r) = f.rates {
            let tr = t.rates.get_or_insert([0.0; 8]);
            for i in 0..8 {
                tr[i] += r[i];
            }
        }
        if let Some(e) = f.evict_rate {
            *t.evict_rate.get_or_insert(0.0) += e;
        }
        if let Some((h, m)) = f.interval_hits {
            let ih = t.interval_hits.get_or_insert((0, 0));
            ih.0 += h;
            ih.1 += m;
        }
        t.hits.0 += f.hits.0;
        t.hits.1 += f.hits.1;
        t.evictions += f.evictions;
        t.items += f.items;
        t.bytes.0 += f.bytes.0;
        t.bytes.1 += f.bytes.1;
        t.conns.0 += f.conns.0;
        t.conns.1 += f.conns.1;
        if let Some((i, b, l)) = f.flash {
            let tf = t.flash.get_or_insert((0, 0, 0));
            *tf = (tf.0 + i, tf.1 + b, tf.2 + l);
        }
    }
    t
}

/// Size classes summed over servers by class id (servers with the default `-f 1.25 -n 48`
/// share class boundaries).
pub fn total_classes(views: &[ServerView]) -> Vec<SizeClass> {
    let mut m: std::collections::BTreeMap<u32, SizeClass> = Default::default();
    for v in views {
        if let Some((_, s)) = &v.cur {
            for c in s.size_classes() {
                let e = m.entry(c.class).or_insert(SizeClass {
                    class: c.class,
                    ..SizeClass::default()
                });
                if e.chunk_size == 0 {
                    e.chunk_size = c.chunk_size;
                }
                e.bytes += c.bytes;
                e.items += c.items;
            }
        }
    }
    m.into_values().collect()
}

/// `1234567` → `1.2M`.
pub fn count(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.1}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.1}k", v / 1e3)
    } else if a >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// Bytes with a binary unit: `12.3M`.
pub fn bytes(v: u64) -> String {
    let v = v as f64;
    const K: f64 = 1024.0;
    if v >= K * K * K {
        format!("{:.1}G", v / (K * K * K))
    } else if v >= K * K {
        format!("{:.1}M", v / (K * K))
    } else if v >= K {
        format!("{:.1}K", v / K)
    } else {
        format!("{v:.0}B")
    }
}

fn ratio(h: u64, m: u64) -> String {
    if h + m == 0 {
        "-".into()
    } else {
        format!("{:.1}%", 100.0 * h as f64 / (h + m) as f64)
    }
}

fn bar(frac: f64, width: usize) -> String {
    let frac = frac.clamp(0.0, 1.0);
    let eighths = (frac * width as f64 * 8.0).round() as usize;
    let mut s = "█".repeat(eighths / 8);
    const PART: [&str; 8] = ["", "▏", "▎", "▍", "▌", "▋", "▊", "▉"];
    s.push_str(PART[eighths % 8]);
    let used = s.chars().count();
    s.push_str(&" ".repeat(width.saturating_sub(used)));
    s
}

fn fit(s: &str, width: usize) -> String {
    s.chars().take(width).collect()
}

/// One frame of the dashboard, `width` × `height` at most. `selected` 0 is the total,
/// `i + 1` server `i`: the title and column heads, a row per server and the total, then
/// the selected view in detail and its memory by item-size class.
pub fn frame(
    views: &[ServerView],
    selected: usize,
    interval: Duration,
    width: usize,
    height: usize,
) -> Vec<String> {
    let mut l = heading(views.len(), interval);
    for (i, v) in views.iter().enumerate() {
        l.push(row(
            &v.addr,
            &v.figures(),
            selected == i + 1,
            v.error.as_deref(),
        ));
    }
    let t = total(views);
    l.push(row("TOTAL", &t, selected == 0, None));
    l.push(String::new());
    l.extend(crate::top_group::section(views));
    l.extend(crate::top_group::router_section(views));
    let (title, f, classes) = selected_view(views, selected, t);
    detail(&mut l, &title, &f, width);
    histogram(&mut l, classes, width, height);
    l.truncate(height.max(1));
    l.into_iter().map(|s| fit(&s, width)).collect()
}

/// The wall clock as `HH:MM:SS UTC`.
fn clock() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!(
        "{:02}:{:02}:{:02} UTC",
        secs / 3600 % 24,
        secs / 60 % 60,
        secs % 60
    )
}

/// The title line, a blank line, and the column heads of the server table.
fn heading(n: usize, interval: Duration) -> Vec<String> {
    vec![
        format!(
            "memkit top — {n} server{} — every {:.1}s — {}   [tab] next view  [q] quit",
            if n == 1 { "" } else { "s" },
            interval.as_secs_f64(),
            clock()
        ),
        String::new(),
        format!(
            "  {:<21} {:>4} {:>7} {:>7} {:>7} {:>6} {:>6} {:>7} {:>8} {:>8} {:>18} {:>5}",
            "SERVER",
            "UP",
            "GET/s",
            "SET/s",
            "OTHER/s",
            "HIT%",
            "HIT%Σ",
            "EVICT/s",
            "EVICTED",
            "ITEMS",
            "MEMORY USED/LIMIT",
            "CONNS"
        ),
    ]
}

/// One row of the server table: a server (`f.up.1 == 1`) or the total; `mark` flags the
/// selected one, `err` says why a server is down.
fn row(name: &str, f: &Figures, mark: bool, err: Option<&str>) -> String {
    let up = if f.up.1 == 1 {
        if f.up.0 == 1 { "up" } else { "DOWN" }.to_string()
    } else {
        format!("{}/{}", f.up.0, f.up.1)
    };
    let m = if mark { ">" } else { " " };
    if f.up.1 == 1 && f.up.0 == 0 {
        return format!(
            "{m} {:<21} {:>4}  {}",
            fit(name, 21),
            up,
            err.unwrap_or("no answer yet")
        );
    }
    let (get, set, other) = match f.rates {
        Some(r) => (count(r[0]), count(r[1]), count(r[2..].iter().sum::<f64>())),
        None => ("-".into(), "-".into(), "-".into()),
    };
    let pct = if f.bytes.1 > 0 {
        format!(" {:>3.0}%", 100.0 * f.bytes.0 as f64 / f.bytes.1 as f64)
    } else {
        String::new()
    };
    format!(
        "{m} {:<21} {:>4} {:>7} {:>7} {:>7} {:>6} {:>6} {:>7} {:>8} {:>8} {:>18} {:>5}",
        fit(name, 21),
        up,
        get,
        set,
        other,
        f.interval_hits.map_or("-".into(), |(h, m)| ratio(h, m)),
        ratio(f.hits.0, f.hits.1),
        f.evict_rate.map_or("-".into(), count),
        count(f.evictions as f64),
        count(f.items as f64),
        format!("{}/{}{pct}", bytes(f.bytes.0), bytes(f.bytes.1)),
        f.conns.0
    )
}

/// The selected view's title, figures and size classes: the total (`selected` 0, or out of
/// range) or one server.
fn selected_view(
    views: &[ServerView],
    selected: usize,
    total: Figures,
) -> (String, Figures, Vec<SizeClass>) {
    let n = views.len();
    if selected == 0 || selected > n {
        return (
            format!("TOTAL of {n} server{}", if n == 1 { "" } else { "s" }),
            total,
            total_classes(views),
        );
    }
    let v = &views[selected - 1];
    let title = match &v.cur {
        Some((_, s)) => format!(
            "{} — version {}, up {}",
            v.addr,
            crate::stats::get(&s.general, "version").unwrap_or_default(),
            crate::dump::secs(s.u("uptime") as i64)
        ),
        None => format!("{} — down", v.addr),
    };
    let classes = v
        .cur
        .as_ref()
        .map(|(_, s)| s.size_classes())
        .unwrap_or_default();
    (title, v.figures(), classes)
}

/// The selected view in detail: a rule with its title, then operations per second, hit
/// ratio, evictions, items, connections and a memory bar.
fn detail(l: &mut Vec<String>, title: &str, f: &Figures, width: usize) {
    let rule = width.saturating_sub(title.chars().count() + 5);
    l.push(format!("── {title} {}", "─".repeat(rule.min(200))));
    let ops = match f.rates {
        Some(r) => COMMANDS
            .iter()
            .zip(r)
            .map(|(c, v)| format!("{c} {}", count(v)))
            .collect::<Vec<_>>()
            .join("  "),
        None => "(rates after the second sample)".into(),
    };
    l.push(format!(" ops/s      {ops}"));
    l.push(format!(
        " hit ratio  {} over the last interval, {} since start ({} hits, {} misses)",
        f.interval_hits.map_or("-".into(), |(h, m)| ratio(h, m)),
        ratio(f.hits.0, f.hits.1),
        count(f.hits.0 as f64),
        count(f.hits.1 as f64)
    ));
    l.push(format!(
        " evictions  {} total, {}/s      items {}      connections {} of {}",
        count(f.evictions as f64),
        f.evict_rate.map_or("-".into(), count),
        count(f.items as f64),
        f.conns.0,
        f.conns.1
    ));
    let frac = if f.bytes.1 > 0 {
        f.bytes.0 as f64 / f.bytes.1 as f64
    } else {
        0.0
    };
    l.push(format!(
        " memory     [{}] {} of {} ({:.1}%)",
        bar(frac, 40),
        bytes(f.bytes.0),
        bytes(f.bytes.1),
        100.0 * frac
    ));
    if let Some((items, used, limit)) = f.flash {
        l.push(format!(
            " flash      {} of {}      items {} in RAM, {} on flash",
            bytes(used),
            bytes(limit),
            count(f.items.saturating_sub(items) as f64),
            count(items as f64)
        ));
    }
    l.push(String::new());
}

/// The memory per item-size class as a bar chart in the rows left of `height`,
/// neighbouring classes merged until it fits (seed 003's figure 4).
fn histogram(l: &mut Vec<String>, classes: Vec<SizeClass>, width: usize, height: usize) {
    l.push(" memory by item size class (stats items mem_requested; seed 003, figure 4)".into());
    let used: Vec<SizeClass> = classes.into_iter().filter(|c| c.bytes > 0).collect();
    let room = height.saturating_sub(l.len()).max(1);
    if used.is_empty() {
        l.push("   (no items)".into());
        return;
    }
    let mut rows: Vec<(String, u64, u64)> = used
        .iter()
        .map(|c| {
            let label = if c.chunk_size > 0 {
                format!("≤{}", bytes(c.chunk_size))
            } else {
                format!("class {}", c.class)
            };
            (label, c.bytes, c.items)
        })
        .collect();
    while rows.len() > room {
        let mut merged = Vec::with_capacity(rows.len().div_ceil(2));
        for pair in rows.chunks(2) {
            let last = pair.last().expect("chunks are non-empty");
            merged.push((
                last.0.clone(),
                pair.iter().map(|r| r.1).sum(),
                pair.iter().map(|r| r.2).sum(),
            ));
        }
        rows = merged;
    }
    let max = rows.iter().map(|r| r.1).max().unwrap_or(1).max(1);
    let bar_w = width.saturating_sub(40).clamp(10, 70);
    for (label, b, items) in rows {
        l.push(format!(
            "   {label:>7} {} {:>7} {:>9} items",
            bar(b as f64 / max as f64, bar_w),
            bytes(b),
            count(items as f64)
        ));
    }
}

/// Applies keys to the selection; true on quit.
fn apply(keys: &[Key], selected: &mut usize, n: usize) -> bool {
    for k in keys {
        match k {
            Key::Quit => return true,
            Key::Next => *selected = (*selected + 1) % n,
            Key::Prev => *selected = (*selected + n - 1) % n,
            Key::Redraw => {}
        }
    }
    false
}

/// Runs the dashboard until `q` (or the iteration count). Returns the servers that could
/// not be read in the last frame when the count ended it (none when `q` did).
pub async fn run(c: &Cluster, opts: &TopOptions) -> Result<Vec<String>, String> {
    let mut views: Vec<ServerView> = c
        .servers()
        .iter()
        .map(|s| ServerView {
            addr: s.addr(),
            ..ServerView::default()
        })
        .collect();
    let batch = opts.batch || !term::interactive();
    let screen = if batch {
        None
    } else {
        Some(term::Screen::enter().map_err(|e| format!("terminal: {e}"))?)
    };
    let (tx, mut keys) = tokio::sync::mpsc::unbounded_channel::<Vec<Key>>();
    if screen.is_some() {
        std::thread::spawn(move || {
            use std::io::Read;
            let mut buf = [0u8; 64];
            let mut stdin = std::io::stdin();
            while let Ok(n) = stdin.read(&mut buf) {
                if n == 0 || tx.send(term::keys(&buf[..n])).is_err() {
                    break;
                }
            }
        });
    } else {
        drop(tx);
    }
    let mut selected = if views.len() == 1 { 1 } else { 0 };
    let views_n = views.len() + 1;
    // Returns false once stdout is gone (`memkit top -b | head`): then the loop ends as
    // `top` does, quietly.
    let draw = |views: &[ServerView], selected: usize| -> bool {
        let (w, h) = term::size().unwrap_or((120, 40));
        let lines = frame(views, selected, opts.interval, w as usize, h as usize);
        match &screen {
            Some(s) => {
                let _ = s.draw(&lines);
                true
            }
            None => {
                use std::io::Write;
                let mut out = std::io::stdout().lock();
                writeln!(out, "{}\n", lines.join("\n"))
                    .and_then(|()| out.flush())
                    .is_ok()
            }
        }
    };
    let mut done = 0u64;
    let mut keys_open = screen.is_some();
    loop {
        let next = tokio::time::Instant::now() + opts.interval;
        let fetch = fetch_all(c, false);
        tokio::pin!(fetch);
        let res = loop {
            tokio::select! {
                r = &mut fetch => break r,
                k = keys.recv(), if keys_open => match k {
                    None => keys_open = false,
                    Some(ks) => {
                        if apply(&ks, &mut selected, views_n) {
                            return Ok(Vec::new());
                        }
                        let _ = draw(&views, selected);
                    }
                },
            }
        };
        let now = Instant::now();
        for (v, (_, r)) in views.iter_mut().zip(res) {
            match r {
                Ok(s) => {
                    v.prev = v.cur.take();
                    v.cur = Some((now, s));
                    v.error = None;
                }
                Err(e) => {
                    v.prev = None;
                    v.cur = None;
                    v.error = Some(e);
                }
            }
        }
        if !draw(&views, selected) {
            return Ok(Vec::new());
        }
        done += 1;
        if opts.iterations.is_some_and(|n| done >= n) {
            return Ok(views
                .iter()
                .filter_map(|v| v.error.as_ref().map(|e| format!("{}: {e}", v.addr)))
                .collect());
        }
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(next) => break,
                k = keys.recv(), if keys_open => match k {
                    None => keys_open = false,
                    Some(ks) => {
                        if apply(&ks, &mut selected, views_n) {
                            return Ok(Vec::new());
                        }
                        let _ = draw(&views, selected);
                    }
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(pairs: &[(&str, &str)], items: &[(&str, &str)]) -> Snapshot {
        let p = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect()
        };
        Snapshot {
            general: p(pairs),
            items: p(items),
            ..Snapshot::default()
        }
    }

    #[test]
    fn rates_ratios_and_chart() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(2);
        let v = ServerView {
            addr: "127.0.0.1:11211".into(),
            prev: Some((
                t0,
                snap(
                    &[
                        ("uptime", "10"),
                        ("cmd_get", "100"),
                        ("get_hits", "50"),
                        ("get_misses", "50"),
                    ],
                    &[],
                ),
            )),
            cur: Some((
                t1,
                snap(
                    &[
                        ("uptime", "12"),
                        ("cmd_get", "300"),
                        ("get_hits", "230"),
                        ("get_misses", "70"),
                        ("cmd_set", "40"),
                        ("bytes", "1048576"),
                        ("limit_maxbytes", "67108864"),
                        ("curr_items", "20"),
                    ],
                    &[
                        ("items:1:number", "15"),
                        ("items:1:mem_requested", "1000"),
                        ("items:9:number", "5"),
                        ("items:9:mem_requested", "4000"),
                    ],
                ),
            )),
            error: None,
        };
        let f = v.figures();
        assert_eq!(f.rates.unwrap()[0], 100.0);
        assert_eq!(f.rates.unwrap()[1], 20.0);
        assert_eq!(f.interval_hits, Some((180, 20)));
        let down = ServerView {
            addr: "10.0.0.9:11211".into(),
            error: Some("connection refused".into()),
            ..ServerView::default()
        };
        let views = [v, down];
        let lines = frame(&views, 1, Duration::from_secs(1), 120, 40);
        let text = lines.join("\n");
        assert!(text.contains("90.0%"), "{text}"); // 180 / 200 over the interval
        assert!(text.contains("DOWN  connection refused"), "{text}");
        let total_row = lines.iter().find(|l| l.contains("TOTAL")).unwrap();
        assert!(total_row.contains(" 1/2 "), "{text}");
        assert!(text.contains("memory by item size class"), "{text}");
        assert!(lines.iter().all(|l| l.chars().count() <= 120));
        // The biggest class has the full bar.
        let full = lines.iter().find(|l| l.contains("3.9K")).unwrap();
        assert!(full.contains(&"█".repeat(70)), "{full}");
        // A short screen merges classes instead of dropping them.
        let short = frame(&views, 1, Duration::from_secs(1), 120, 15);
        assert_eq!(short.len(), 15);
        assert!(short.last().unwrap().contains("20 items"), "{short:?}");
        assert!(!text.contains("flash"), "{text}");
    }

    #[test]
    fn flash_tier_splits_items_between_ram_and_flash() {
        let v = ServerView {
            addr: "127.0.0.1:11211".into(),
            cur: Some((
                Instant::now(),
                snap(
                    &[
                        ("curr_items", "100"),
                        ("memkit_extstore_items", "30"),
                        ("extstore_objects_used", "31"),
                        ("extstore_bytes_used", "1048576"),
                        ("extstore_limit_maxbytes", "67108864"),
                    ],
                    &[],
                ),
            )),
            ..ServerView::default()
        };
        assert_eq!(v.figures().flash, Some((30, 1 << 20, 64 << 20)));
        let text = frame(&[v], 0, Duration::from_secs(1), 120, 40).join("\n");
        assert!(text.contains("items 70 in RAM, 30 on flash"), "{text}");
    }
}
