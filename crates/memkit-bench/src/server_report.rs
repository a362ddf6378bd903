//! Rendering of [`ServerReport`]: the ratio table with each target's status (markdown), the
//! binary protocol against text (`binary`), CPU per request split into user and system time
//! with the CPU targets (`cpu`), and an SVG chart of throughput and miss ratio
//! (hand-rolled, no plotting dependency).

use std::fmt::Write as _;

use crate::server_bench::{Pair, ServerBenchConfig, ServerReport, TpRow, TpWorkload};

mod binary;
mod cpu;

/// One performance target and whether this run met it.
#[derive(Debug, Clone)]
pub struct Target {
    /// The target as the issue words it.
    pub name: &'static str,
    /// What was measured (worst case over the cells it covers).
    pub measured: String,
    /// Met in every cell it covers (`None`: not measured in this run).
    pub met: Option<bool>,
}

const TP_MIN: f64 = 1.3;
const CPU_MAX: f64 = 0.75;
const P99_MAX: f64 = 1.0;
const ITEMS_MIN: f64 = 1.3;
const MISS_MAX: f64 = 0.85;
const BINARY_CPU_MAX: f64 = 1.0;

fn mib(b: f64) -> f64 {
    b / 1048576.0
}

fn mark(ok: bool) -> &'static str {
    if ok { "met" } else { "**not met**" }
}

impl TpWorkload {
    fn label(self, multiget: usize) -> String {
        match self {
            TpWorkload::Fits => "get/set 90/10, keys fit".into(),
            TpWorkload::Exceeds => "get/set 90/10, keys > memory, get-miss then set".into(),
            TpWorkload::MultiGet => format!("multi-get of {multiget} keys"),
            TpWorkload::Binary => "binary protocol: get/set 90/10, keys fit".into(),
        }
    }

    fn short(self) -> &'static str {
        match self {
            TpWorkload::Fits => "fit",
            TpWorkload::Exceeds => "big",
            TpWorkload::MultiGet => "mget",
            TpWorkload::Binary => "bin",
        }
    }

    /// Rows the throughput targets cover: the text protocol's.
    fn text(self) -> bool {
        self != TpWorkload::Binary
    }
}

impl TpRow {
    /// The load column: the workload, and the connections when not the usual count.
    fn load(&self, c: &ServerBenchConfig) -> String {
        let label = self.workload.label(c.multiget);
        if self.conns == c.conns {
            label
        } else {
            format!("{label}, {} connections", self.conns)
        }
    }

    /// Where a cell is, for the target table and the chart.
    fn at(&self, c: &ServerBenchConfig) -> String {
        let at = format!(
            "-t {} depth {} {}",
            self.threads,
            self.depth,
            self.workload.short()
        );
        if self.conns == c.conns {
            at
        } else {
            format!("{at}, {} conns", self.conns)
        }
    }
}

fn worst<'a>(
    pairs: impl Iterator<Item = (&'a Pair, String)>,
    lower_is_worse: bool,
) -> Option<(f64, String)> {
    pairs
        .map(|(p, at)| (p.ratio(), at))
        .filter(|(r, _)| r.is_finite())
        .reduce(|a, b| if (b.0 < a.0) == lower_is_worse { b } else { a })
}

impl ServerReport {
    /// The targets of issues 8 and 19, evaluated on this run.
    pub fn targets(&self) -> Vec<Target> {
        let mut out = Vec::new();
        let getset = || {
            self.tp
                .iter()
                .filter(|r| matches!(r.workload, TpWorkload::Fits | TpWorkload::Exceeds))
        };
        let at = |r: &TpRow| r.at(&self.config);
        let tp = worst(getset().map(|r| (&r.rate, at(r))), true);
        out.push(Target {
            name: "throughput >= 1.3x at equal threads, both pipeline depths (get/set rows)",
            measured: tp
                .as_ref()
                .map_or("not run".into(), |(r, a)| format!("worst {r:.2}x ({a})")),
            met: tp.map(|(r, _)| r >= TP_MIN),
        });
        let cpu = worst(
            self.tp
                .iter()
                .filter(|r| r.workload.text())
                .map(|r| (&r.cpu_per_m, at(r))),
            false,
        );
        out.push(Target {
            name: "CPU per request <= 0.75x",
            measured: cpu
                .as_ref()
                .map_or("not run".into(), |(r, a)| format!("worst {r:.2}x ({a})")),
            met: cpu.map(|(r, _)| r <= CPU_MAX),
        });
        let p99 = worst(
            self.lat
                .iter()
                .map(|l| (&l.p99, format!("-t {}, {:.0} req/s", l.threads, l.offered))),
            false,
        );
        out.push(Target {
            name: "p99 latency <= 1.0x at the same offered load",
            measured: p99
                .as_ref()
                .map_or("not run".into(), |(r, a)| format!("worst {r:.2}x ({a})")),
            met: p99.map(|(r, _)| r <= P99_MAX),
        });
        if let Some(m) = &self.mem {
            out.push(Target {
                name: "items retained at -m 64, 100 B values >= 1.3x",
                measured: format!(
                    "{:.2}x ({:.0} vs {:.0}, -m {})",
                    m.items.ratio(),
                    m.items.memkitd,
                    m.items.memcached,
                    m.memory_mb
                ),
                met: Some(m.items.ratio() >= ITEMS_MIN),
            });
            let bound = 1.1 * m.memory_mb as f64 + 32.0;
            out.push(Target {
                name: "memkitd RSS <= 1.1 x -m + 32 MiB",
                measured: format!(
                    "peak {:.1} MiB, now {:.1} MiB; bound {bound:.1} MiB",
                    mib(m.hwm.memkitd),
                    mib(m.rss.memkitd)
                ),
                met: Some(mib(m.hwm.memkitd) <= bound),
            });
        } else {
            for name in [
                "items retained at -m 64, 100 B values >= 1.3x",
                "memkitd RSS <= 1.1 x -m + 32 MiB",
            ] {
                out.push(Target {
                    name,
                    measured: "not run".into(),
                    met: None,
                });
            }
        }
        out.push(Target {
            name: "miss ratio on the Zipf trace <= 0.85x",
            measured: self.hit.as_ref().map_or("not run".into(), |h| {
                format!(
                    "{:.3}x ({:.4} vs {:.4})",
                    h.miss.ratio(),
                    h.miss.memkitd,
                    h.miss.memcached
                )
            }),
            met: self.hit.as_ref().map(|h| h.miss.ratio() <= MISS_MAX),
        });
        let bin = binary::worst_binary_cpu(self);
        out.push(Target {
            name: "memkitd: binary CPU per request <= text's (same -t, depth, requests)",
            measured: bin
                .as_ref()
                .map_or("not run".into(), |(r, a)| format!("worst {r:.2}x ({a})")),
            met: bin.map(|(r, _)| r <= BINARY_CPU_MAX),
        });
        out.extend(cpu::targets(self));
        out
    }

    /// The throughput, CPU and hit rows of the main table, one per cell each.
    fn tp_rows(&self, o: &mut String) {
        let c = &self.config;
        for r in &self.tp {
            let tp_target = matches!(r.workload, TpWorkload::Fits | TpWorkload::Exceeds);
            let _ = writeln!(
                o,
                "| throughput, kreq/s | {} | {} | {} | {:.1} | {:.1} | **{:.2}x** | {} | {} |",
                r.load(c),
                r.threads,
                r.depth,
                r.rate.memcached / 1e3,
                r.rate.memkitd / 1e3,
                r.rate.ratio(),
                if tp_target { ">= 1.3x" } else { "-" },
                if tp_target {
                    mark(r.rate.ratio() >= TP_MIN)
                } else {
                    ""
                },
            );
        }
        for r in &self.tp {
            let text = r.workload.text();
            let _ = writeln!(
                o,
                "| server CPU s / M req | {} | {} | {} | {:.2} | {:.2} | **{:.2}x** | {} | {} |",
                r.load(c),
                r.threads,
                r.depth,
                r.cpu_per_m.memcached,
                r.cpu_per_m.memkitd,
                r.cpu_per_m.ratio(),
                if text { "<= 0.75x" } else { "-" },
                if text {
                    mark(r.cpu_per_m.ratio() <= CPU_MAX)
                } else {
                    ""
                },
            );
        }
        for r in &self.tp {
            let _ = writeln!(
                o,
                "| hits / keys asked | {} | {} | {} | {:.3} | {:.3} | {:.2}x | - | |",
                r.load(c),
                r.threads,
                r.depth,
                r.hit.memcached,
                r.hit.memkitd,
                r.hit.ratio(),
            );
        }
    }

    /// memcaslap's rows of the main table, and why it did not run.
    fn memaslap_rows(&self, o: &mut String) {
        let c = &self.config;
        for m in &self.memaslap {
            let load = format!(
                "memcaslap -T 2 -c {}{}, 90/10, {} s",
                c.conns,
                if m.binary { " --binary" } else { "" },
                c.memaslap_secs
            );
            let _ = writeln!(
                o,
                "| memcaslap TPS, k | {load} | {} | (window) | {:.1} | {:.1} | **{:.2}x** | (cross-check of >= 1.3x) | {} |",
                m.threads,
                m.tps.memcached / 1e3,
                m.tps.memkitd / 1e3,
                m.tps.ratio(),
                mark(m.tps.ratio() >= TP_MIN),
            );
            let _ = writeln!(
                o,
                "| memcaslap: server CPU s / M ops | {load} | {} | | {:.2} | {:.2} | **{:.2}x** | (cross-check of <= 0.75x) | {} |",
                m.threads,
                m.cpu_per_m.memcached,
                m.cpu_per_m.memkitd,
                m.cpu_per_m.ratio(),
                mark(m.cpu_per_m.ratio() <= CPU_MAX),
            );
        }
        if let Some(n) = &self.memaslap_note {
            let _ = writeln!(o, "\n_memcaslap: {n}._");
        }
    }

    /// The latency rows: percentiles and CPU at the offered load.
    fn lat_rows(&self, o: &mut String) {
        for l in &self.lat {
            let load = format!("open loop, {:.0} req/s offered, 90/10, keys fit", l.offered);
            for (name, p, target) in [
                ("p50 latency, µs", &l.p50, None),
                ("p99 latency, µs", &l.p99, Some(P99_MAX)),
                ("p99.9 latency, µs", &l.p999, None),
            ] {
                let _ = writeln!(
                    o,
                    "| {name} | {load} | {} | 1 | {:.0} | {:.0} | **{:.2}x** | {} | {} |",
                    l.threads,
                    p.memcached,
                    p.memkitd,
                    p.ratio(),
                    target.map_or("-".into(), |t| format!("<= {t:.1}x")),
                    target.map_or("", |t| mark(p.ratio() <= t)),
                );
            }
            let _ = writeln!(
                o,
                "| server CPU s / M req | {load} | {} | 1 | {:.2} | {:.2} | {:.2}x | - | |",
                l.threads,
                l.cpu_per_m.memcached,
                l.cpu_per_m.memkitd,
                l.cpu_per_m.ratio(),
            );
        }
    }

    /// The memory rows: items retained, RSS after the fill, peak RSS against its bound.
    fn mem_rows(&self, o: &mut String) {
        let c = &self.config;
        if let Some(m) = &self.mem {
            let load = format!("{} sets into -m {}", m.sets, m.memory_mb);
            let bound = 1.1 * m.memory_mb as f64 + 32.0;
            let _ = writeln!(
                o,
                "| items retained (`curr_items`) | {load} | {} | 16 | {:.0} | {:.0} | **{:.2}x** | >= 1.3x | {} |",
                c.threads.iter().max().unwrap_or(&1),
                m.items.memcached,
                m.items.memkitd,
                m.items.ratio(),
                mark(m.items.ratio() >= ITEMS_MIN),
            );
            let _ = writeln!(
                o,
                "| RSS after fill, MiB | {load} | | | {:.1} | {:.1} | {:.2}x | - | |",
                mib(m.rss.memcached),
                mib(m.rss.memkitd),
                m.rss.ratio(),
            );
            let _ = writeln!(
                o,
                "| peak RSS (VmHWM), MiB | {load} | | | {:.1} | {:.1} | {:.2}x | memkitd <= {bound:.1} | {} |",
                mib(m.hwm.memcached),
                mib(m.hwm.memkitd),
                m.hwm.ratio(),
                mark(mib(m.hwm.memkitd) <= bound),
            );
        }
    }

    /// The hit-ratio rows: miss ratio and items held at the end of the trace.
    fn hit_rows(&self, o: &mut String) {
        let c = &self.config;
        if let Some(h) = &self.hit {
            let load = format!(
                "Zipf({}) trace, {} gets over {} keys, get then set on miss, -m {}",
                c.zipf_s, h.requests, h.keys, h.memory_mb
            );
            let _ = writeln!(
                o,
                "| miss ratio | {load} | {} | 8 | {:.4} | {:.4} | **{:.3}x** | <= 0.85x | {} |",
                c.threads.iter().max().unwrap_or(&1),
                h.miss.memcached,
                h.miss.memkitd,
                h.miss.ratio(),
                mark(h.miss.ratio() <= MISS_MAX),
            );
            let _ = writeln!(
                o,
                "| items at end of trace | {load} | | | {:.0} | {:.0} | {:.2}x | - | |",
                h.items.memcached,
                h.items.memkitd,
                h.items.ratio(),
            );
        }
    }

    /// The run as markdown: the ratio table, the targets, notes.
    pub fn to_markdown(&self) -> String {
        let c = &self.config;
        let mut o = String::new();
        let _ = writeln!(
            o,
            "memcached {} vs memkitd {}; {} client connections (tokio, {} threads, in the bench \
             process; {} where the load says so); keys {}-{} B, values {} B; -m {} for throughput, latency and memcaslap; \
             {:.1} s per cell per server, bounded at {} requests, {} alternating round(s), best \
             round reported (CPU and hits from that round).\n",
            self.versions.memcached,
            self.versions.memkitd,
            c.conns,
            c.client_threads,
            c.wide_conns,
            c.keys.min_len,
            c.keys.max_len,
            c.value_len,
            c.memory_mb,
            c.cell.as_secs_f64(),
            c.cell_max_requests,
            c.rounds,
        );
        o.push_str(
            "| measure | load | -t | depth | memcached | memkitd | memkitd / memcached | target | status |\n\
             |---|---|---:|---:|---:|---:|---:|---|---|\n",
        );
        self.tp_rows(&mut o);
        self.lat_rows(&mut o);
        self.mem_rows(&mut o);
        self.hit_rows(&mut o);
        self.memaslap_rows(&mut o);
        o.push_str(&binary::table(self));
        o.push_str(&cpu::table(self));
        o.push_str("\n| target | this run | status |\n|---|---|---|\n");
        for t in self.targets() {
            let _ = writeln!(
                o,
                "| {} | {} | {} |",
                t.name,
                t.measured,
                t.met.map_or("not run", mark)
            );
        }
        let _ = writeln!(
            o,
            "\n_Run took {:.0} s; load average (1, 5, 15 min) at start: {}, at end: {}._",
            self.elapsed.as_secs_f64(),
            self.loadavg.0.as_deref().unwrap_or("unknown"),
            self.loadavg.1.as_deref().unwrap_or("unknown"),
        );
        o
    }

    /// A throughput bar's label: threads, depth, load, and the connections when not the
    /// run's usual count.
    fn bar_label(&self, r: &TpRow) -> String {
        let label = format!("t{} d{} {}", r.threads, r.depth, r.workload.short());
        if r.conns == self.config.conns {
            label
        } else {
            format!("{label} c{}", r.conns)
        }
    }

    /// A bar chart (SVG): throughput of every cell, and the Zipf miss ratio, both servers.
    pub fn to_svg(&self) -> String {
        const MC: &str = "#9e9e9e";
        const MK: &str = "#1f6fb2";
        let bars: Vec<(String, Pair)> = self
            .tp
            .iter()
            .map(|r| {
                (
                    self.bar_label(r),
                    Pair {
                        memcached: r.rate.memcached / 1e3,
                        memkitd: r.rate.memkitd / 1e3,
                    },
                )
            })
            .collect();
        let (h, top, bottom, left) = (360.0, 40.0, 300.0, 60.0);
        let group = 56.0;
        let tp_w = group * bars.len().max(1) as f64;
        let miss_x = left + tp_w + 90.0;
        let width = miss_x + 160.0;
        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{h:.0}" font-family="sans-serif" font-size="11">"#
        );
        let _ = writeln!(
            s,
            r#"<rect width="100%" height="100%" fill="white"/><text x="{left}" y="18" font-size="13" font-weight="bold">memkitd vs memcached: throughput (kreq/s, left) and Zipf miss ratio (right)</text>"#
        );
        let legend_y = 32.0;
        for (i, (name, color)) in [("memcached", MC), ("memkitd", MK)].iter().enumerate() {
            let x = width - 180.0 + i as f64 * 90.0;
            let _ = writeln!(
                s,
                r#"<rect x="{x}" y="{}" width="10" height="10" fill="{color}"/><text x="{}" y="{legend_y}">{name}</text>"#,
                legend_y - 9.0,
                x + 14.0
            );
        }
        let axis = |s: &mut String, x0: f64, w: f64, max: f64, fmt: &dyn Fn(f64) -> String| {
            for k in 0..=4 {
                let v = max * f64::from(k) / 4.0;
                let y = bottom - (bottom - top - 10.0) * f64::from(k) / 4.0;
                let _ = writeln!(
                    s,
                    r##"<line x1="{x0}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#e0e0e0"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
                    x0 + w,
                    x0 - 4.0,
                    y + 4.0,
                    fmt(v)
                );
            }
        };
        let max_tp = bars
            .iter()
            .map(|(_, p)| p.memcached.max(p.memkitd))
            .fold(1.0, f64::max)
            * 1.1;
        axis(&mut s, left, tp_w, max_tp, &|v| format!("{v:.0}"));
        let scale = |v: f64, max: f64| (bottom - top - 10.0) * (v / max).clamp(0.0, 1.0);
        for (i, (label, p)) in bars.iter().enumerate() {
            let x = left + i as f64 * group + 6.0;
            for (j, (v, color)) in [(p.memcached, MC), (p.memkitd, MK)].iter().enumerate() {
                let bh = scale(*v, max_tp);
                let _ = writeln!(
                    s,
                    r#"<rect x="{:.1}" y="{:.1}" width="20" height="{bh:.1}" fill="{color}"/>"#,
                    x + j as f64 * 22.0,
                    bottom - bh
                );
            }
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{:.2}x</text><text transform="translate({:.1},{:.1}) rotate(35)">{label}</text>"#,
                x + 21.0,
                bottom - scale(p.memcached.max(p.memkitd), max_tp) - 4.0,
                p.ratio(),
                x + 8.0,
                bottom + 12.0
            );
        }
        if let Some(hr) = &self.hit {
            let max = hr.miss.memcached.max(hr.miss.memkitd).max(0.01) * 1.2;
            axis(&mut s, miss_x, 100.0, max, &|v| format!("{v:.2}"));
            for (j, (v, color)) in [(hr.miss.memcached, MC), (hr.miss.memkitd, MK)]
                .iter()
                .enumerate()
            {
                let bh = scale(*v, max);
                let x = miss_x + 20.0 + j as f64 * 34.0;
                let _ = writeln!(
                    s,
                    r#"<rect x="{x:.1}" y="{:.1}" width="30" height="{bh:.1}" fill="{color}"/><text x="{:.1}" y="{:.1}" text-anchor="middle">{v:.3}</text>"#,
                    bottom - bh,
                    x + 15.0,
                    bottom - bh - 4.0
                );
            }
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">miss ratio, Zipf({}), -m {}: {:.2}x</text>"#,
                miss_x + 50.0,
                bottom + 16.0,
                self.config.zipf_s,
                hr.memory_mb,
                hr.miss.ratio()
            );
        }
        s.push_str("</svg>\n");
        s
    }
}
