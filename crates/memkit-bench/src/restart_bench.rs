//! `memkit-bench restart`: warm restart (`-e FILE`), memkitd and memcached.
//!
//! For each value size, a fresh server (`-m M -t 2 -e FILE`, FILE on tmpfs by default) gets
//! 1.3x as many `set`s of distinct keys as fit, so it is full and has evicted; then:
//! - **stop**: `SIGUSR1` until the process has exited (memkitd writes the file then;
//!   memcached's item memory already is the file, it writes its metadata);
//! - **start**: the same command line again, until it answers `version` (memkitd reads the
//!   file into its segments; memcached maps it and fixes up its item pointers);
//! - items (`curr_items`) before and after, and a sample of the last keys written, read
//!   before the stop and after the start: every hit before must hit after.
//!
//! Stop and start are also given in CPU seconds (all threads), which a shared machine's
//! load does not inflate. Between them the bench waits 1.1 s, outside both timings:
//! memcached does not restart within the second it stopped in.
//!
//! The refill figure is how long the fill itself took over loopback: what a cold restart
//! costs before the cache holds as much again (with a real database behind it, far more).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::procs::{Kind, Server, find_on_path, locate_memkitd};

/// `memkit-bench restart` options.
#[derive(Debug, clap::Args)]
pub struct RestartArgs {
    /// memkitd binary (default: the release build next to this binary).
    #[arg(long)]
    pub memkitd: Option<PathBuf>,
    /// memcached binary (default: `memcached` on PATH; skipped when there is none).
    #[arg(long)]
    pub memcached: Option<PathBuf>,
    /// Leave memcached out.
    #[arg(long)]
    pub no_memcached: bool,
    /// `-m`, MiB.
    #[arg(long, default_value_t = 1024)]
    pub memory_mb: usize,
    /// Value sizes, bytes.
    #[arg(long, value_delimiter = ',', default_values_t = vec![100, 1000])]
    pub sizes: Vec<usize>,
    /// Directory for the `-e` file (default: /dev/shm when it exists, else the temp dir).
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// Keys read before the stop and after the start.
const SAMPLE: usize = 10_000;

struct Run {
    items: u64,
    evictions: u64,
    fill: Duration,
    file_bytes: u64,
    stop: Duration,
    start: Duration,
    /// CPU seconds of the stop and of the start (every thread, user and system).
    cpu: (f64, f64),
    items_after: u64,
    sample_hits: (usize, usize),
}

/// CPU seconds of this process's reaped children (`cutime` + `cstime` of /proc/self/stat).
fn children_cpu_secs() -> io::Result<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| io::Error::other("bad /proc/self/stat"))?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    Ok((ticks(13) + ticks(14)) as f64 / crate::procs::clock_ticks())
}

fn key(i: usize) -> String {
    format!("restart:{i:010}")
}

/// `sets` noreply sets of `size`-byte values on one connection, then `mn` to know they
/// were all applied.
fn fill(server: &Server, size: usize, sets: usize) -> io::Result<()> {
    let mut s = TcpStream::connect(server.addr)?;
    s.set_read_timeout(Some(Duration::from_secs(300)))?;
    let value: Vec<u8> = (0..size).map(|i| b'a' + (i % 26) as u8).collect();
    let mut buf = Vec::with_capacity(1 << 20);
    for i in 0..sets {
        write!(buf, "set {} 0 0 {size} noreply\r\n", key(i))?;
        buf.extend_from_slice(&value);
        buf.extend_from_slice(b"\r\n");
        if buf.len() >= 1 << 20 {
            s.write_all(&buf)?;
            buf.clear();
        }
    }
    buf.extend_from_slice(b"mn\r\n");
    s.write_all(&buf)?;
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line)?;
    match line.trim_end() {
        "MN" => Ok(()),
        other => Err(io::Error::other(format!("expected MN, got {other:?}"))),
    }
}

/// How many of the last [`SAMPLE`] keys written hit (`mg k v`, values checked for length).
fn sample_hits(server: &Server, size: usize, sets: usize) -> io::Result<usize> {
    let s = TcpStream::connect(server.addr)?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut w = &s;
    let mut r = BufReader::new(&s);
    let mut hits = 0;
    let keys: Vec<usize> = (sets.saturating_sub(SAMPLE)..sets).collect();
    let mut line = String::new();
    for batch in keys.chunks(500) {
        let req: String = batch
            .iter()
            .map(|&i| format!("mg {} v\r\n", key(i)))
            .collect();
        w.write_all(req.as_bytes())?;
        for _ in batch {
            line.clear();
            r.read_line(&mut line)?;
            if line.starts_with("EN") {
                continue;
            }
            let len: usize = line
                .split_whitespace()
                .nth(1)
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| io::Error::other(format!("bad mg reply {line:?}")))?;
            let mut value = vec![0; len + 2];
            r.read_exact(&mut value)?;
            if len == size {
                hits += 1;
            }
        }
    }
    Ok(hits)
}

fn remove_files(file: &Path) {
    for ext in ["", ".meta", ".tmp"] {
        let mut p = file.as_os_str().to_owned();
        p.push(ext);
        let _ = std::fs::remove_file(PathBuf::from(p));
    }
}

fn file_bytes(kind: Kind, file: &Path) -> u64 {
    let len = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    match kind {
        Kind::Memcached => {
            let mut meta = file.as_os_str().to_owned();
            meta.push(".meta");
            len(file) + len(Path::new(&meta))
        }
        Kind::Memkitd => len(file),
    }
}

fn run_one(kind: Kind, bin: &Path, a: &RestartArgs, file: &Path, size: usize) -> io::Result<Run> {
    remove_files(file);
    let m = a.memory_mb.to_string();
    let e = file
        .to_str()
        .ok_or_else(|| io::Error::other("non-UTF-8 path"))?;
    let args = ["-m", &m, "-t", "2", "-c", "4096", "-e", e];
    let mut server = Server::start_args(kind, bin, &args)?;
    // Key, value and about 50 bytes of overhead an item: 1.3x that many sets overfill it.
    let sets = (a.memory_mb << 20) / (size + 18 + 50) * 13 / 10;
    let t = Instant::now();
    fill(&server, size, sets)?;
    let fill_time = t.elapsed();
    let items = server.stat_u64("curr_items")?;
    let evictions = server.stat_u64("evictions")?;
    let before = sample_hits(&server, size, sets)?;
    let (cpu_before, children_before) = (server.cpu_secs()?, children_cpu_secs()?);
    let t = Instant::now();
    server.stop_with("USR1", Duration::from_secs(120))?;
    let stop = t.elapsed();
    // The reaped child's whole CPU time, less what it had used before the signal.
    let stop_cpu = children_cpu_secs()? - children_before - cpu_before;
    let bytes = file_bytes(kind, file);
    // memcached refuses to restart within the second it stopped in ("clock has done
    // something crazy"): both servers get the same pause, outside the timings.
    std::thread::sleep(Duration::from_millis(1100));
    let t = Instant::now();
    let server = Server::start_args(kind, bin, &args)?;
    let start = t.elapsed();
    let start_cpu = server.cpu_secs()?;
    let items_after = server.stat_u64("curr_items")?;
    let after = sample_hits(&server, size, sets)?;
    drop(server);
    remove_files(file);
    Ok(Run {
        items,
        evictions,
        fill: fill_time,
        file_bytes: bytes,
        stop,
        start,
        cpu: (stop_cpu, start_cpu),
        items_after,
        sample_hits: (before, after),
    })
}

fn table(a: &RestartArgs, servers: &[(Kind, PathBuf)], file: &Path) -> io::Result<()> {
    println!(
        "Warm restart: `-m {} -t 2 -e {}`, filled with 1.3x the sets that fit (full, \
         evicting), then SIGUSR1 and the same command line again.\n",
        a.memory_mb,
        file.display()
    );
    println!(
        "| server | value size | items | refill over loopback | file | stop: SIGUSR1 to exit \
         (CPU) | start: to first reply (CPU) | stop + start | items after | last {SAMPLE} \
         keys: hits before / after |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &size in &a.sizes {
        for (kind, bin) in servers {
            let r = run_one(*kind, bin, a, file, size)?;
            eprintln!(
                "# {} {size} B: {} items, {} evictions",
                kind.name(),
                r.items,
                r.evictions
            );
            println!(
                "| {} | {size} B | {} | {:.1} s | {:.0} MiB | {:.2} s ({:.2} s) | {:.2} s \
                 ({:.2} s) | **{:.2} s** | {} | {} / {} |",
                kind.name(),
                r.items,
                r.fill.as_secs_f64(),
                r.file_bytes as f64 / f64::from(1 << 20),
                r.stop.as_secs_f64(),
                r.cpu.0,
                r.start.as_secs_f64(),
                r.cpu.1,
                (r.stop + r.start).as_secs_f64(),
                r.items_after,
                r.sample_hits.0,
                r.sample_hits.1
            );
        }
    }
    Ok(())
}

pub fn main(a: RestartArgs) -> i32 {
    let run = || -> io::Result<()> {
        let mk = match &a.memkitd {
            Some(p) => p.clone(),
            None => locate_memkitd("release", false)?,
        };
        let mut servers = vec![(Kind::Memkitd, mk)];
        let mc = a.memcached.clone().or_else(|| find_on_path("memcached"));
        match mc {
            Some(mc) if !a.no_memcached => servers.push((Kind::Memcached, mc)),
            _ => {}
        }
        let dir = a.dir.clone().unwrap_or_else(|| {
            let shm = PathBuf::from("/dev/shm");
            if shm.is_dir() {
                shm
            } else {
                std::env::temp_dir()
            }
        });
        let file = dir.join(format!("memkit-bench-restart-{}", std::process::id()));
        let r = table(&a, &servers, &file);
        remove_files(&file);
        if let Some(l) = crate::procs::loadavg() {
            println!("\nLoad average at the end: {l}.");
        }
        r
    };
    match run() {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("memkit-bench restart: {e}");
            1
        }
    }
}
