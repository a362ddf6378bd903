//! A process's CPU split into user and kernel time by sampling it with `perf record`, for
//! the server bench's CPU-per-request table.
//!
//! Why not `/proc/PID/stat` alone: with tick-based CPU accounting (`CONFIG_TICK_CPU_ACCOUNTING`)
//! utime + stime is exact (the kernel scales it to the scheduler's runtime) but the split
//! between them is one sample per tick, 250 a second at `HZ=250`: a 2.5 s cell at 60% of a
//! core is ~375 ticks, of which ~45 land in user mode, so the user figure moves +-15% from
//! cell to cell on sampling alone. `perf`'s `cpu-clock` event at 4000 Hz samples the same
//! process 16 times as often. The total stays `/proc`'s; the samples only divide it.
//!
//! perf is optional: [`choose`] probes it once per run and the caller falls back to `/proc`'s
//! split for the whole run when it cannot record, so every row of a table has one source.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::ValueEnum;

/// Samples a second: 16x the 250 ticks a second behind `/proc`'s split.
pub const HZ: u32 = 4000;

/// x86-64 and arm64 kernels live in the top half of the address space; user space never
/// maps there.
const KERNEL_START: u64 = 0xffff_8000_0000_0000;

/// `--cpu-split`: where the user/system split of the CPU-per-request table comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum CpuSplit {
    /// perf when it can record, else `/proc`.
    #[default]
    Auto,
    /// perf's samples; the run fails up front when perf cannot record.
    Perf,
    /// `/proc/PID/stat`'s utime and stime.
    Proc,
}

/// The split a run used.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum SplitSource {
    /// `/proc/PID/stat`'s utime and stime (the kernel's tick samples).
    #[default]
    Proc,
    /// `cpu-clock` samples taken by this `perf` at `hz`.
    Perf {
        /// The perf program.
        perf: PathBuf,
        /// Samples a second.
        hz: u32,
    },
}

impl SplitSource {
    /// Where the split came from, for the table's caption and the log.
    pub fn describe(&self) -> String {
        match self {
            SplitSource::Proc => "user/system split from `/proc/PID/stat` utime and stime \
                                  (the kernel's per-tick samples)"
                .into(),
            SplitSource::Perf { hz, .. } => format!(
                "user/system split from {hz} Hz cpu-clock samples (perf), total from \
                 `/proc/PID/stat`"
            ),
        }
    }
}

/// Samples of one process by the mode it was in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Samples {
    /// In user mode.
    pub user: u64,
    /// In the kernel.
    pub kernel: u64,
}

impl Samples {
    /// `total` CPU seconds divided as the samples are: (user, system). `None` without
    /// samples, where there is nothing to divide by.
    pub fn split(self, total: f64) -> Option<(f64, f64)> {
        let n = self.user + self.kernel;
        if n == 0 {
            return None;
        }
        let user = total * self.user as f64 / n as f64;
        Some((user, total - user))
    }
}

/// Counts `perf script -F event,ip` lines (`cpu-clock:      7f12...`) by mode: an IP in the
/// kernel's half of the address space is a kernel sample.
///
/// Any event but plain `cpu-clock` is an error: perf, refused kernel samples by
/// `perf_event_paranoid`, quietly records `cpu-clock:u` instead, which would read as a
/// process that never enters the kernel.
pub fn count(script: &str) -> io::Result<Samples> {
    let mut s = Samples::default();
    for line in script.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let bad = || io::Error::other(format!("perf script: unexpected line {line:?}"));
        let (event, ip) = line.rsplit_once(':').ok_or_else(bad)?;
        if event.trim() != "cpu-clock" {
            return Err(io::Error::other(format!(
                "perf sampled {:?}, not cpu-clock in both modes (kernel.perf_event_paranoid \
                 above 1 limits it to user mode)",
                event.trim()
            )));
        }
        let ip = u64::from_str_radix(ip.trim(), 16).map_err(|_| bad())?;
        if ip >= KERNEL_START {
            s.kernel += 1;
        } else {
            s.user += 1;
        }
    }
    Ok(s)
}

/// The split to use for `choice`, and why perf is not used when `Auto` falls back.
/// `Perf` fails when perf cannot record (not on `PATH`, not permitted, no kernel samples).
pub fn choose(choice: CpuSplit) -> io::Result<(SplitSource, Option<String>)> {
    if choice == CpuSplit::Proc {
        return Ok((SplitSource::Proc, None));
    }
    match probe() {
        Ok(perf) => Ok((SplitSource::Perf { perf, hz: HZ }, None)),
        Err(e) if choice == CpuSplit::Auto => Ok((SplitSource::Proc, Some(e.to_string()))),
        Err(e) => Err(io::Error::other(format!("--cpu-split perf: {e}"))),
    }
}

/// Samples this process while it spins for a moment: perf found, allowed to attach, and
/// recording kernel samples too (checked by [`count`]).
fn probe() -> io::Result<PathBuf> {
    let perf = crate::procs::find_on_path("perf")
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "perf not found on PATH"))?;
    let sampler = Sampler::start(&perf, std::process::id(), HZ)?;
    let until = Instant::now() + Duration::from_millis(50);
    let mut spins = 0u64;
    while Instant::now() < until {
        spins = std::hint::black_box(spins + 1);
    }
    let samples = sampler.finish()?;
    if samples.user + samples.kernel == 0 {
        return Err(io::Error::other("perf recorded no samples"));
    }
    Ok(perf)
}

static NEXT: AtomicU64 = AtomicU64::new(0);

/// `perf record` sampling one process (all its threads), started and stopped through its
/// control pipe so that the samples cover exactly what happens between [`Sampler::start`]
/// returning and [`Sampler::finish`] being called: perf takes a good part of a second to
/// start, which a signal-stopped recording would cut from the front of the load.
#[derive(Debug)]
pub struct Sampler {
    perf: PathBuf,
    child: Child,
    ctl: ChildStdin,
    ack: BufReader<ChildStdout>,
    /// perf's output, and its stderr (read back for errors); both removed on drop.
    data: PathBuf,
    log: PathBuf,
}

impl Sampler {
    /// Starts `perf` sampling `pid` at `hz` and returns once samples are being taken.
    pub fn start(perf: &Path, pid: u32, hz: u32) -> io::Result<Sampler> {
        let base = std::env::temp_dir().join(format!(
            "memkit-bench-perf-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let (data, log) = (base.with_extension("data"), base.with_extension("log"));
        let stderr = File::create(&log)?;
        let spawned = Command::new(perf)
            .args(["record", "-e", "cpu-clock", "-F", &hz.to_string()])
            .args(["-p", &pid.to_string(), "-o"])
            .arg(&data)
            // -D -1: attached disabled, enabled by the control command below. -B and
            // --no-bpf-event: nothing to collect at exit, so stopping takes milliseconds,
            // not half a second.
            .args(["--quiet", "-B", "--no-bpf-event", "-D", "-1"])
            .args(["--control", "fd:0,1"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn();
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                let _ = std::fs::remove_file(&log);
                return Err(io::Error::new(
                    e.kind(),
                    format!("cannot start {}: {e}", perf.display()),
                ));
            }
        };
        let (Some(ctl), Some(out)) = (child.stdin.take(), child.stdout.take()) else {
            unreachable!("stdin and stdout were piped")
        };
        let mut s = Sampler {
            perf: perf.to_path_buf(),
            child,
            ctl,
            ack: BufReader::new(out),
            data,
            log,
        };
        s.command("enable")?;
        Ok(s)
    }

    /// Sends a control command and waits for perf's `ack` (NUL-separated from the last).
    fn command(&mut self, cmd: &str) -> io::Result<()> {
        let sent = writeln!(self.ctl, "{cmd}").and_then(|()| self.ctl.flush());
        let mut line = Vec::new();
        while sent.is_ok() {
            line.clear();
            if self.ack.read_until(b'\n', &mut line)? == 0 {
                break;
            }
            line.retain(|&b| b != 0);
            if line.trim_ascii() == b"ack" {
                return Ok(());
            }
        }
        Err(self.failed(cmd))
    }

    /// perf's exit and stderr as an error, for a command it did not acknowledge.
    fn failed(&mut self, cmd: &str) -> io::Error {
        let _ = self.child.kill();
        let status = self
            .child
            .wait()
            .map_or_else(|e| e.to_string(), |s| s.to_string());
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        io::Error::other(format!(
            "perf record did not acknowledge {cmd:?} ({status}): {}",
            log.trim()
        ))
    }

    /// Stops sampling and counts the samples by mode.
    pub fn finish(mut self) -> io::Result<Samples> {
        self.command("disable")?;
        // "stop" is acknowledged too, but perf's exit is what matters: the file is complete.
        let _ = writeln!(self.ctl, "stop").and_then(|()| self.ctl.flush());
        let status = self.child.wait()?;
        if !status.success() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            return Err(io::Error::other(format!(
                "perf record: {status}: {}",
                log.trim()
            )));
        }
        let out = Command::new(&self.perf)
            .args(["script", "-F", "event,ip", "-i"])
            .arg(&self.data)
            .stdin(Stdio::null())
            .output()?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "perf script: {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        count(&String::from_utf8_lossy(&out.stdout))
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_file(&self.data);
        let _ = std::fs::remove_file(&self.log);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_splits_by_address_half() {
        let script = "\
            cpu-clock:      55a6d0cf9900\n\
            cpu-clock:      7f780e880cde\n\
            cpu-clock: ffffffff81e0123a\n\
            \n\
            cpu-clock:      ffff800000000000\n\
            cpu-clock:      7fffffffffff\n";
        assert_eq!(count(script).unwrap(), Samples { user: 3, kernel: 2 });
        assert_eq!(count("").unwrap(), Samples::default());
    }

    #[test]
    fn count_refuses_user_only_and_garbage() {
        let e = count("cpu-clock:u:      55588199bef5\n").unwrap_err();
        assert!(e.to_string().contains("cpu-clock:u"), "{e}");
        assert!(count("cpu-clock:   not-hex\n").is_err());
        assert!(count("no colon here\n").is_err());
    }

    #[test]
    fn split_divides_the_total_as_the_samples() {
        let (u, s) = Samples { user: 1, kernel: 3 }.split(2.0).unwrap();
        assert!(
            (u - 0.5).abs() < 1e-12 && (s - 1.5).abs() < 1e-12,
            "{u} {s}"
        );
        assert_eq!(Samples::default().split(2.0), None);
    }

    #[test]
    fn proc_choice_never_runs_perf() {
        assert_eq!(choose(CpuSplit::Proc).unwrap(), (SplitSource::Proc, None));
    }
}
