//! The router bench's markdown: the throughput cells (medians, the rounds' ratio range),
//! the latency part, and the targets, met or not, with their figures.

use std::fmt::Write;

use super::{CellLoad, CellResult, PATHS, PROXIES, RouterReport, Run, median};

/// Medians of one proxy's runs of a cell.
struct Medians {
    rate: f64,
    proxy_us: f64,
    backend_us: f64,
    client_us: f64,
    total_us: f64,
    /// Cores busy over the run: rate x every process's CPU a request.
    cores: f64,
    hit: f64,
    errors: u64,
}

fn medians(runs: &[Run]) -> Medians {
    let m = |f: fn(&Run) -> f64| median(runs.iter().map(f).collect());
    Medians {
        rate: m(|r| r.rate),
        proxy_us: m(Run::proxy_us),
        backend_us: m(Run::backend_us),
        client_us: m(Run::client_us),
        total_us: m(Run::total_us),
        cores: m(|r| r.rate * r.total_us() / 1e6),
        hit: m(|r| r.hit),
        errors: runs.iter().map(|r| r.errors).sum(),
    }
}

/// The lowest and highest of the rounds' memkitd / nutcracker ratios of `f`.
fn ratio_range(c: &CellResult, f: fn(&Run) -> f64) -> (f64, f64) {
    c.runs[0]
        .iter()
        .zip(&c.runs[1])
        .map(|(a, b)| f(a) / f(b))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), r| {
            (lo.min(r), hi.max(r))
        })
}

fn met(ok: bool) -> &'static str {
    if ok { "**met**" } else { "**NOT met**" }
}

impl CellLoad {
    fn label(self) -> String {
        match self {
            CellLoad::Mix { depth } => format!("get/set 90/10, depth {depth}"),
            CellLoad::MultiGet { keys } => format!("multi-get of {keys} keys"),
        }
    }
}

impl RouterReport {
    /// The report as markdown.
    pub fn to_markdown(&self) -> String {
        let cfg = &self.config;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "## Router: memkitd --route against nutcracker\n\n\
             memkitd {} `--route` (`-t {}`), nutcracker {}, three memcached {} backends \
             (`-m {} -t {}`) on loopback; {} connections; keys of {}-{} B over {} keys (loaded \
             through each proxy), {} B values; runs of {:.1} s, {} alternating rounds, medians. \
             Load average {} -> {}, {:.0} s.\n",
            self.versions[1],
            cfg.threads,
            self.versions[2],
            self.versions[0],
            cfg.backend_memory_mb,
            cfg.backend_threads,
            cfg.conns,
            cfg.keys.min_len,
            cfg.keys.max_len,
            cfg.keys_fit,
            cfg.value_len,
            cfg.cell.as_secs_f64(),
            cfg.rounds,
            self.loadavg.0.as_deref().unwrap_or("?"),
            self.loadavg.1.as_deref().unwrap_or("?"),
            self.elapsed.as_secs_f64()
        );
        let mut targets = Vec::new();
        if !self.cells.is_empty() {
            s.push_str(
                "| load | memkitd kreq/s | nutcracker kreq/s | throughput memkitd / nutcracker \
                 (rounds) | memkitd CPU µs/req | nutcracker CPU µs/req | CPU memkitd / \
                 nutcracker (rounds) | hits | errors |\n|---|---:|---:|---:|---:|---:|---:|---|---:|\n",
            );
            for c in &self.cells {
                let (a, b) = (medians(&c.runs[0]), medians(&c.runs[1]));
                let (tlo, thi) = ratio_range(c, |r| r.rate);
                let (clo, chi) = ratio_range(c, Run::proxy_us);
                let tp = a.rate / b.rate;
                let cpu = a.proxy_us / b.proxy_us;
                let _ = writeln!(
                    s,
                    "| {} | {:.1} | {:.1} | **{tp:.2}x** ({tlo:.2}-{thi:.2}) | {:.2} | {:.2} | \
                     **{cpu:.2}x** ({clo:.2}-{chi:.2}) | {:.3} / {:.3} | {} / {} |",
                    c.load.label(),
                    a.rate / 1e3,
                    b.rate / 1e3,
                    a.proxy_us,
                    b.proxy_us,
                    a.hit,
                    b.hit,
                    a.errors,
                    b.errors
                );
                let want = match c.load {
                    CellLoad::Mix { .. } => 2.0,
                    CellLoad::MultiGet { .. } => 1.5,
                };
                targets.push(format!(
                    "{}: throughput >= {want}x nutcracker's: {} ({tp:.2}x); CPU per request <= \
                     nutcracker's: {} ({cpu:.2}x)",
                    c.load.label(),
                    met(tp >= want),
                    met(cpu <= 1.0)
                ));
            }
            s.push('\n');
            s.push_str(
                "Where the machine's CPU went, µs a request (medians; every process shares the \
                 two cores): the proxy, the three backends, the load generator (this process). \
                 \"Free proxy\": the rate nutcracker's run would reach were its proxy's CPU \
                 zero and the rest unchanged, with the cores as busy as measured, and with both \
                 cores busy.\n\n\
                 | load | via | proxy | backends | load generator | all | cores busy | free \
                 proxy, kreq/s (x nutcracker): measured cores / 2 cores |\n\
                 |---|---|---:|---:|---:|---:|---:|---:|\n",
            );
            for c in &self.cells {
                for (i, runs) in c.runs.iter().enumerate() {
                    let m = medians(runs);
                    let free = match i {
                        1 => {
                            let rest = (m.total_us - m.proxy_us).max(1e-9);
                            let (r, r2) = (m.rate * m.total_us / rest, 2e6 / rest);
                            format!(
                                "{:.1} ({:.2}x) / {:.1} ({:.2}x)",
                                r / 1e3,
                                r / m.rate,
                                r2 / 1e3,
                                r2 / m.rate
                            )
                        }
                        _ => String::new(),
                    };
                    let _ = writeln!(
                        s,
                        "| {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {free} |",
                        c.load.label(),
                        PROXIES[i],
                        m.proxy_us,
                        m.backend_us,
                        m.client_us,
                        m.total_us,
                        m.cores
                    );
                }
            }
            s.push('\n');
        }
        if let Some(l) = &self.lat {
            let _ = writeln!(
                s,
                "Latency: open loop at {:.0} req/s over {} connections, one request in flight \
                 each, get/set 90/10; {} rounds of {:.1} s per path, rotating; medians. Direct: \
                 one of the backends, every key loaded into it.\n\n\
                 | path | p50 µs | p99 µs | p50 above direct, µs | achieved req/s | errors |\n\
                 |---|---:|---:|---:|---:|---:|",
                l.offered,
                l.conns,
                cfg.latency_rounds,
                cfg.latency_secs.as_secs_f64()
            );
            let p50: Vec<f64> = l
                .runs
                .iter()
                .map(|r| median(r.iter().map(|x| x.p50).collect()))
                .collect();
            for (i, runs) in l.runs.iter().enumerate() {
                let p99 = median(runs.iter().map(|x| x.p99).collect());
                let rate = median(runs.iter().map(|x| x.tally.rate()).collect());
                let errors: u64 = runs.iter().map(|x| x.tally.errors).sum();
                let added = if i == 0 {
                    "".to_string()
                } else {
                    format!("{:+.1}", p50[i] - p50[0])
                };
                let _ = writeln!(
                    s,
                    "| {} | {:.1} | {:.1} | {added} | {rate:.0} | {errors} |",
                    PATHS[i], p50[i], p99
                );
            }
            s.push('\n');
            let (a, b) = (p50[1] - p50[0], p50[2] - p50[0]);
            targets.push(format!(
                "added p50 over direct <= nutcracker's: {} (memkitd {a:+.1} µs, nutcracker \
                 {b:+.1} µs)",
                met(a <= b)
            ));
        }
        if !targets.is_empty() {
            s.push_str("Targets:\n");
            for t in targets {
                let _ = writeln!(s, "- {t}");
            }
        }
        s
    }
}
