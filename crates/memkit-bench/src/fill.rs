//! `memkit-bench fill`: warm-up fills and mixed value sizes, memkitd against memcached.
//!
//! - **Fill**: for each value size from 10 B to 1 MB, a fresh server of each kind (`-m 64
//!   -t 2`) gets 3x as many `set`s of distinct keys as memcached's slab arithmetic holds
//!   (`noreply`, pipelined on one connection, never read back), then `stats` and
//!   `/proc/PID/status`: items, `bytes`, evictions, VmRSS and VmHWM.
//! - **Mixed sizes**: one Zipf(0.99) key trace whose values have log-normal sizes between
//!   100 B and 100 KB (a key's size is a function of the key), replayed as get, then set on a
//!   miss, in pipelined batches of 32 gets on one connection; miss ratio over every request.
//!
//! Both servers get the same requests in the same order; only one runs at a time.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::rngs::SmallRng;

use crate::procs::{Kind, Server, Spec};
use crate::slab;
use crate::workload::{Zipf, mix64};

/// `memkit-bench fill` options.
#[derive(Debug, clap::Args)]
pub struct FillArgs {
    /// memcached binary (default: `memcached` on PATH).
    #[arg(long)]
    pub memcached: Option<PathBuf>,
    /// memkitd binary (default: the release build next to this binary, built first).
    #[arg(long)]
    pub memkitd: Option<PathBuf>,
    /// `-m` for both servers, MiB.
    #[arg(long, default_value_t = 64)]
    pub memory_mb: usize,
    /// Value sizes for the fill table (default: 10 B to 1 MB).
    #[arg(long, value_delimiter = ',')]
    pub sizes: Vec<usize>,
    /// Skip the mixed-size Zipf run.
    #[arg(long)]
    pub no_zipf: bool,
    /// Requests of the Zipf trace (default: 3x its distinct keys).
    #[arg(long)]
    pub requests: Option<u64>,
}

const SIZES: &[usize] = &[
    10, 100, 1_000, 8_000, 12_000, 20_000, 33_000, 100_000, 500_000, 1_000_000,
];
const KEY_LEN: usize = 15; // "fill:" + 10 digits

/// One server's state after a fill.
#[derive(Debug, Clone, Copy)]
struct FillResult {
    items: u64,
    bytes: u64,
    evictions: u64,
    rss: u64,
    hwm: u64,
}

/// Items of this size memcached's slab arithmetic holds in `mb` MiB; values past half a page
/// are chunked (about one page an item), which `slab` does not model.
fn memcached_estimate(mb: usize, size: usize) -> usize {
    if slab::item_size(KEY_LEN, size) <= slab::PAGE / 2 {
        slab::items_that_fit(mb << 20, KEY_LEN, size)
    } else {
        mb * slab::PAGE / size
    }
}

fn fill_one(kind: Kind, bin: &Path, mb: usize, size: usize, sets: usize) -> io::Result<FillResult> {
    let server = Server::start(
        kind,
        bin,
        Spec {
            threads: 2,
            memory_mb: mb,
        },
    )?;
    let mut s = TcpStream::connect(server.addr)?;
    s.set_read_timeout(Some(Duration::from_secs(120)))?;
    let value = vec![b'v'; size];
    let mut buf = Vec::with_capacity(1 << 20);
    for i in 0..sets {
        write!(buf, "set fill:{i:010} 0 0 {size} noreply\r\n")?;
        buf.extend_from_slice(&value);
        buf.extend_from_slice(b"\r\n");
        if buf.len() >= 1 << 20 {
            s.write_all(&buf)?;
            buf.clear();
        }
    }
    // A reply to this one means every set before it was applied.
    buf.extend_from_slice(b"mn\r\n");
    s.write_all(&buf)?;
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line)?;
    if line.trim_end() != "MN" {
        return Err(io::Error::other(format!(
            "{}: expected MN, got {line:?}",
            kind.name()
        )));
    }
    let stats = server.stats()?;
    let n = |k: &str| stats.get(k).and_then(|v| v.parse().ok()).unwrap_or(0);
    let (rss, hwm) = server.rss()?;
    Ok(FillResult {
        items: n("curr_items"),
        bytes: n("bytes"),
        evictions: n("evictions"),
        rss,
        hwm,
    })
}

/// A key's value size: log-normal (median 3.2 KB, sigma 1.15) clamped to 100 B..100 KB.
fn lognormal_size(key: u64) -> usize {
    // Box-Muller from two hashes of the key.
    let u1 = ((mix64(key ^ 0xA5A5) >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
    let u2 = (mix64(key ^ 0x5A5A) >> 11) as f64 / (1u64 << 53) as f64;
    let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
    let size = (3162f64.ln() + 1.15 * z).exp();
    size.clamp(100.0, 100_000.0) as usize
}

/// Reads one `get` reply: `Some(len)` for a hit, `None` for a miss.
fn read_get(r: &mut BufReader<&TcpStream>, line: &mut String) -> io::Result<Option<usize>> {
    line.clear();
    r.read_line(line)?;
    if line.starts_with("END") {
        return Ok(None);
    }
    let len: usize = line
        .split_whitespace()
        .nth(3)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| io::Error::other(format!("bad get reply {line:?}")))?;
    let mut skip = vec![0; len + 2];
    r.read_exact(&mut skip)?;
    line.clear();
    r.read_line(line)?;
    if !line.starts_with("END") {
        return Err(io::Error::other(format!("expected END, got {line:?}")));
    }
    Ok(Some(len))
}

/// Replays the trace; returns (misses, items at the end, RSS at the end).
fn zipf_one(kind: Kind, bin: &Path, mb: usize, trace: &[u64]) -> io::Result<(u64, u64, u64)> {
    let server = Server::start(
        kind,
        bin,
        Spec {
            threads: 2,
            memory_mb: mb,
        },
    )?;
    let s = TcpStream::connect(server.addr)?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut w = &s;
    let mut r = BufReader::with_capacity(1 << 16, &s);
    let value = vec![b'z'; 100_000];
    let (mut misses, mut line, mut buf) = (0u64, String::new(), Vec::new());
    for batch in trace.chunks(32) {
        buf.clear();
        for k in batch {
            write!(buf, "get zipf:{k:010}\r\n")?;
        }
        w.write_all(&buf)?;
        buf.clear();
        for k in batch {
            if read_get(&mut r, &mut line)?.is_none() {
                misses += 1;
                let size = lognormal_size(*k);
                write!(buf, "set zipf:{k:010} 0 0 {size} noreply\r\n")?;
                buf.extend_from_slice(&value[..size]);
                buf.extend_from_slice(b"\r\n");
            }
        }
        w.write_all(&buf)?;
    }
    let items = server.stat_u64("curr_items")?;
    Ok((misses, items, server.rss()?.0))
}

fn mib(b: u64) -> f64 {
    b as f64 / (1 << 20) as f64
}

fn fill_table(args: &FillArgs, mc: &Path, mk: &Path) -> io::Result<()> {
    let mb = args.memory_mb;
    let sizes = if args.sizes.is_empty() {
        SIZES.to_vec()
    } else {
        args.sizes.clone()
    };
    println!(
        "Fill: `-m {mb} -t 2`, 3x as many sets of distinct {KEY_LEN}-byte keys as memcached's \
         slab arithmetic holds (noreply, one connection, never read), then `stats` and \
         /proc/PID/status.\n"
    );
    println!(
        "| value size | memcached items | memkitd items | memkitd / memcached | memcached `bytes` \
         | memkitd `bytes` (% of -m) | memkitd evictions | memcached RSS / HWM MiB | memkitd RSS \
         / HWM MiB |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for size in sizes {
        let sets = 3 * memcached_estimate(mb, size).max(4);
        let t = Instant::now();
        let a = fill_one(Kind::Memcached, mc, mb, size, sets)?;
        let b = fill_one(Kind::Memkitd, mk, mb, size, sets)?;
        eprintln!(
            "# fill {size} B: {sets} sets, {:.1} s",
            t.elapsed().as_secs_f64()
        );
        println!(
            "| {size} B | {} | {} | **{:.2}x** | {:.1} MiB | {:.1} MiB ({:.1}%) | {} | {:.1} / \
             {:.1} | {:.1} / {:.1} |",
            a.items,
            b.items,
            b.items as f64 / a.items.max(1) as f64,
            mib(a.bytes),
            mib(b.bytes),
            100.0 * b.bytes as f64 / (mb << 20) as f64,
            b.evictions,
            mib(a.rss),
            mib(a.hwm),
            mib(b.rss),
            mib(b.hwm),
        );
    }
    Ok(())
}

fn zipf_table(args: &FillArgs, mc: &Path, mk: &Path) -> io::Result<()> {
    let mb = args.memory_mb;
    // About 10x the items the budget holds at the mean size (~6 KB).
    let keys = (mb << 20) as u64 / 6_000 * 10;
    let requests = args.requests.unwrap_or(3 * keys);
    let zipf = Zipf::new(keys, 0.99);
    let mut rng = SmallRng::seed_from_u64(22);
    let trace: Vec<u64> = (0..requests).map(|_| zipf.sample(&mut rng)).collect();
    let t = Instant::now();
    let (ma, ia, ra) = zipf_one(Kind::Memcached, mc, mb, &trace)?;
    let (mb_, ib, rb) = zipf_one(Kind::Memkitd, mk, mb, &trace)?;
    eprintln!(
        "# zipf: {requests} requests, {:.1} s",
        t.elapsed().as_secs_f64()
    );
    println!(
        "\nMixed sizes: Zipf(0.99) over {keys} keys, {requests} requests, values log-normal \
         (median 3.2 KB, sigma 1.15) clamped to 100 B..100 KB, get then set on a miss, \
         batches of 32 gets, `-m {mb} -t 2`.\n"
    );
    println!("| server | miss ratio | items at end | RSS MiB |");
    println!("|---|---:|---:|---:|");
    let ratio = |m: u64| m as f64 / requests as f64;
    println!("| memcached | {:.4} | {ia} | {:.1} |", ratio(ma), mib(ra));
    println!("| memkitd | {:.4} | {ib} | {:.1} |", ratio(mb_), mib(rb));
    println!(
        "\nmemkitd / memcached miss ratio: **{:.3}x**",
        mb_ as f64 / ma.max(1) as f64
    );
    Ok(())
}

/// Runs the fill table and the mixed-size Zipf run; prints markdown to stdout.
pub fn main(args: FillArgs) -> i32 {
    let run = || -> io::Result<()> {
        let mc = match &args.memcached {
            Some(p) => p.clone(),
            None => crate::procs::find_on_path("memcached")
                .ok_or_else(|| io::Error::other("memcached not on PATH"))?,
        };
        let mk = match &args.memkitd {
            Some(p) => p.clone(),
            None => crate::procs::locate_memkitd("release", false)?,
        };
        fill_table(&args, &mc, &mk)?;
        if !args.no_zipf {
            zipf_table(&args, &mc, &mk)?;
        }
        Ok(())
    };
    match run() {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("memkit-bench fill: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lognormal_sizes_stay_in_range_and_spread() {
        let sizes: Vec<usize> = (0..10_000).map(lognormal_size).collect();
        assert!(sizes.iter().all(|&s| (100..=100_000).contains(&s)));
        let small = sizes.iter().filter(|&&s| s < 1_000).count();
        let big = sizes.iter().filter(|&&s| s > 20_000).count();
        assert!(small > 500 && big > 500, "{small} small, {big} big");
    }

    #[test]
    fn memcached_estimate_follows_the_slab_classes() {
        assert_eq!(
            memcached_estimate(64, 100),
            slab::items_that_fit(64 << 20, 15, 100)
        );
        assert_eq!(memcached_estimate(64, 1_000_000), 67);
    }
}
