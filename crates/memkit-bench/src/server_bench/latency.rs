//! The latency part: p50/p99/p999 at a fixed offered load, open loop, on the throughput
//! part's pre-loaded servers, several alternating runs per server and their medians.

use std::io;

use super::{Ctx, LatRow, Pair, ServerReport, TpWorkload};
use crate::loadgen::{self, Open};
use crate::procs::Server;
use crate::workload::Dist;

impl Ctx<'_> {
    pub(super) fn latency(
        &mut self,
        servers: &[Server; 2],
        threads: usize,
        report: &ServerReport,
    ) -> io::Result<LatRow> {
        let cfg = self.cfg;
        let sat = report
            .tp
            .iter()
            .find(|r| {
                r.threads == threads
                    && r.depth == 1
                    && r.conns == cfg.conns
                    && r.workload == TpWorkload::Fits
            })
            .map(|r| r.rate.memcached.min(r.rate.memkitd));
        let offered = sat.map_or(cfg.latency_default_rate, |s| {
            (s * cfg.latency_fraction).max(1000.0)
        });
        let mut row = LatRow {
            threads,
            offered,
            achieved: Pair::default(),
            p50: Pair::default(),
            p99: Pair::default(),
            p999: Pair::default(),
            cpu_per_m: Pair::default(),
        };
        // One run's p99 swings by 2-10x with what else the two cores schedule (the load
        // generator shares them), so each server gets several runs, alternating, and its
        // figures are the medians.
        let mut runs: [Vec<loadgen::Latency>; 2] = [Vec::new(), Vec::new()];
        let mut cpu = [0.0; 2];
        for round in 0..cfg.latency_rounds.max(1) {
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for i in order {
                let s = &servers[i];
                let open = Open {
                    conns: cfg.conns,
                    rate: offered,
                    duration: cfg.latency_secs,
                    max_requests: (offered * cfg.latency_secs.as_secs_f64() * 1.1) as u64 + 1000,
                    get_pct: 90,
                    dist: Dist::Uniform(cfg.keys_fit),
                    seed: cfg.seed ^ 0x1a7 ^ ((round as u64) << 8),
                };
                let cpu0 = s.cpu_secs()?;
                let l = self
                    .rt
                    .block_on(loadgen::open_loop(s.addr, open, self.shape))?;
                cpu[i] += s.cpu_secs()? - cpu0;
                (self.log)(&format!(
                    "-t {threads} latency at {offered:.0} req/s round {round}: {} p50 {:.0} p99 {:.0} p999 {:.0} max {:.0} µs, achieved {:.0}",
                    s.kind.name(),
                    l.p50,
                    l.p99,
                    l.p999,
                    l.max,
                    l.tally.rate()
                ));
                runs[i].push(l);
            }
        }
        for (i, s) in servers.iter().enumerate() {
            let median = |f: fn(&loadgen::Latency) -> f64| {
                let mut v: Vec<f64> = runs[i].iter().map(f).collect();
                v.sort_by(f64::total_cmp);
                v[v.len() / 2]
            };
            let requests: u64 = runs[i].iter().map(|l| l.tally.requests).sum();
            row.achieved.set(s.kind, median(|l| l.tally.rate()));
            row.p50.set(s.kind, median(|l| l.p50));
            row.p99.set(s.kind, median(|l| l.p99));
            row.p999.set(s.kind, median(|l| l.p999));
            row.cpu_per_m
                .set(s.kind, cpu[i] / requests.max(1) as f64 * 1e6);
        }
        Ok(row)
    }
}
