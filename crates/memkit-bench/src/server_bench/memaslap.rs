//! The memcaslap cross-check: libmemcached's load generator, 90/10, against both servers,
//! in the text protocol and (with [`ServerBenchConfig::binary`]) with `--binary`.

use std::io;
use std::path::Path;

use super::{Ctx, MemaslapRow, Pair, ServerBenchConfig, ServerReport, Spec, start_pair};

impl Ctx<'_> {
    pub(super) fn memaslap(&mut self, report: &mut ServerReport) -> io::Result<()> {
        let cfg = self.cfg;
        let Some(bin) = self.bins.memaslap.clone() else {
            report.memaslap_note = Some("memcaslap not found (Debian: libmemcached-tools)".into());
            return Ok(());
        };
        let conf =
            std::env::temp_dir().join(format!("memkit-bench-memaslap-{}.cfg", std::process::id()));
        std::fs::write(
            &conf,
            format!(
                "key\n{} {} 1\nvalue\n{} {} 1\ncmd\n0 0.1\n1 0.9\n",
                cfg.keys.min_len, cfg.keys.max_len, cfg.value_len, cfg.value_len
            ),
        )?;
        let protocols: &[bool] = if cfg.binary { &[false, true] } else { &[false] };
        for &threads in &cfg.threads {
            for &binary in protocols {
                let row = self.memaslap_row(&bin, &conf, threads, binary, report);
                report.memaslap.push(row?);
            }
        }
        let _ = std::fs::remove_file(&conf);
        Ok(())
    }

    /// One memcaslap run against each of a fresh pair of servers.
    fn memaslap_row(
        &mut self,
        bin: &Path,
        conf: &Path,
        threads: usize,
        binary: bool,
        report: &mut ServerReport,
    ) -> io::Result<MemaslapRow> {
        let cfg: &ServerBenchConfig = self.cfg;
        let servers = start_pair(
            self.bins,
            Spec {
                threads,
                memory_mb: cfg.memory_mb,
            },
        )?;
        let mut row = MemaslapRow {
            threads,
            binary,
            tps: Pair::default(),
            cpu_per_m: Pair::default(),
        };
        for s in &servers {
            let cpu0 = s.cpu_secs()?;
            let mut cmd = std::process::Command::new(bin);
            cmd.arg(format!("--servers={}", s.addr))
                .args(["-T", "2", "-c", &cfg.conns.to_string()])
                .arg(format!("--time={}s", cfg.memaslap_secs))
                .arg(format!("--cfg_cmd={}", conf.display()));
            if binary {
                cmd.arg("--binary");
            }
            let out = cmd.output()?;
            let cpu = s.cpu_secs()? - cpu0;
            let text = String::from_utf8_lossy(&out.stdout);
            let field = |name: &str| {
                text.lines()
                    .rev()
                    .find(|l| l.contains(name))
                    .and_then(|l| l.split(name).nth(1))
                    .and_then(|r| r.split_whitespace().next())
                    .and_then(|v| v.parse::<f64>().ok())
            };
            let (Some(tps), Some(ops)) = (field("TPS:"), field("Ops:")) else {
                report.memaslap_note = Some(format!(
                    "memcaslap{} gave no TPS against {}: {}",
                    if binary { " --binary" } else { "" },
                    s.kind.name(),
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
                continue;
            };
            (self.log)(&format!(
                "memcaslap{} -t {threads}: {} {tps:.0} TPS, {ops} ops",
                if binary { " --binary" } else { "" },
                s.kind.name()
            ));
            row.tps.set(s.kind, tps);
            row.cpu_per_m.set(s.kind, cpu / ops.max(1.0) * 1e6);
        }
        Ok(row)
    }
}
