//! `memkit-bench flash`: memcached's extstore against memkitd's flash tier, in the same run.
//!
//! Both servers get the same flags, `-m 64 -t 2 -c 4096 -o ext_path=<tmp>/<kind>.flash:1024m`
//! (memcached's other extstore settings left at their defaults: 64 MB flash pages), listen on
//! 127.0.0.1 only and run one at a time: a fresh server and a fresh flash file for each phase,
//! the file removed once the server has stopped.
//!
//! - **Fill**: 60,000 distinct keys with 4 KB values whose bytes are a function of the key
//!   ([`value_for`]), `set` on one connection in pipelined batches of 100, each batch's 100
//!   replies read before the next batch is sent (no `noreply`, so neither server is simply
//!   overrun and both flash writers get the same pace); then every key is read back in
//!   multi-gets of 50 and each value compared with what was set. Reported: hits with intact
//!   bytes (of the keys set), hits with wrong bytes (must be 0), `stats` after the read-back
//!   (`curr_items`, `evictions`, the extstore counters), VmRSS and VmHWM from
//!   `/proc/PID/status`, **RAM per item held** (VmRSS / intact hits) and **write
//!   amplification** (`extstore_bytes_written` / the value bytes the client set).
//! - **Zipf**: a key space 10x the values `-m` holds (64 MiB / 4 KB x 10 = 163,840 keys, 640
//!   MiB of values: fits the flash file), a Zipf(0.99) trace replayed cache-aside (`get`,
//!   then `set` on a miss, its reply read) in pipelined batches of 32 `get`s on each of 4
//!   connections, one thread each. A warm-up pass (another seed, as many requests) runs first
//!   and is not measured; then the measured pass: hit ratio, `get`s per second over the
//!   pass's wall time, each batch's round trip (its 32 gets sent to the last reply read)
//!   p50/p99, values checked as in the fill, and the counters after both passes.
//!
//! Every socket has a 10 s read and write timeout, so a stuck server ends the run with an
//! error rather than a hang. The output is markdown for `docs/BENCHMARKS.md`: per phase a
//! table with memcached and memkitd side by side and memkitd / memcached; a counter a server
//! does not report shows as `—`.

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::rngs::SmallRng;

use crate::procs::{Kind, Server, find_on_path, locate_memkitd};
use crate::workload::{Zipf, mix64};

/// `memkit-bench flash` options.
#[derive(Debug, Clone, clap::Args)]
pub struct FlashArgs {
    /// memcached binary (default: `memcached` on PATH).
    #[arg(long)]
    pub memcached: Option<PathBuf>,
    /// memkitd binary (default: the release build next to this binary).
    #[arg(long)]
    pub memkitd: Option<PathBuf>,
    /// `-m` for both servers, MiB.
    #[arg(long, default_value_t = 64)]
    pub memory_mb: usize,
    /// Size of the flash file (`-o ext_path=FILE:<N>m`), MiB.
    #[arg(long, default_value_t = 1024)]
    pub flash_mb: usize,
    /// Distinct keys of the fill.
    #[arg(long, default_value_t = 60_000)]
    pub items: u64,
    /// Value size, bytes (both phases).
    #[arg(long, default_value_t = 4096)]
    pub value_size: usize,
    /// Requests (gets) of the measured Zipf pass, all connections together; the warm-up pass
    /// has as many.
    #[arg(long, default_value_t = 800_000)]
    pub requests: u64,
    /// Run one phase only.
    #[arg(long, value_enum)]
    pub only: Option<Phase>,
}

/// A phase of the bench.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Phase {
    /// Fill, then read every key back.
    Fill,
    /// The cache-aside Zipf trace.
    Zipf,
}

const SET_BATCH: usize = 100;
const GET_BATCH: usize = 50;
const ZIPF_BATCH: usize = 32;
const CONNECTIONS: usize = 4;
const TIMEOUT: Duration = Duration::from_secs(10);
const FILL_PREFIX: &str = "flash:";
const ZIPF_PREFIX: &str = "fzipf:";

/// The extstore counters both tables show (memcached 1.6's names).
const EXT_COUNTERS: &[&str] = &[
    "extstore_objects_written",
    "extstore_bytes_written",
    "extstore_objects_used",
    "extstore_bytes_used",
    "extstore_page_evictions",
    "extstore_pages_free",
    "get_extstore",
    "miss_from_extstore",
    "badcrc_from_extstore",
];

/// The value set for key number `id`: `len` bytes of a hash stream seeded by the id, so a
/// value read back can be checked without keeping what was sent.
pub fn value_for(id: u64, len: usize, out: &mut Vec<u8>) {
    out.clear();
    let seed = mix64(id ^ 0xF1A5_F1A5_0000_0000);
    let mut i = 0u64;
    while out.len() < len {
        let word = mix64(seed.wrapping_add(i)).to_le_bytes();
        let n = (len - out.len()).min(8);
        out.extend_from_slice(&word[..n]);
        i += 1;
    }
}

/// Whether `data`, returned for `key`, is what was set for it.
fn intact(key: &str, prefix: &str, data: &[u8], size: usize, scratch: &mut Vec<u8>) -> bool {
    let Some(id) = key.strip_prefix(prefix).and_then(|d| d.parse::<u64>().ok()) else {
        return false;
    };
    value_for(id, size, scratch);
    data == scratch.as_slice()
}

/// Reads `VALUE key flags len` blocks up to `END`, calling `each(key, data)` for each.
/// Returns the line that ended the reply instead of `END` when the server answered with an
/// error (`SERVER_ERROR ...`), `None` after `END`.
fn read_values<R: BufRead>(
    r: &mut R,
    line: &mut String,
    data: &mut Vec<u8>,
    mut each: impl FnMut(&str, &[u8]),
) -> io::Result<Option<String>> {
    loop {
        line.clear();
        if r.read_line(line)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed",
            ));
        }
        let l = line.trim_end();
        if l == "END" {
            return Ok(None);
        }
        if l.starts_with("SERVER_ERROR") || l == "ERROR" || l.starts_with("CLIENT_ERROR") {
            return Ok(Some(l.to_string()));
        }
        let mut f = l.split(' ');
        let (Some("VALUE"), Some(key), Some(_flags), Some(len)) =
            (f.next(), f.next(), f.next(), f.next())
        else {
            return Err(io::Error::other(format!("unexpected get reply {l:?}")));
        };
        let len: usize = len
            .parse()
            .map_err(|_| io::Error::other(format!("bad length in {l:?}")))?;
        data.resize(len + 2, 0);
        r.read_exact(data)?;
        if &data[len..] != b"\r\n" {
            return Err(io::Error::other(format!(
                "value of {key} not ended by CRLF"
            )));
        }
        each(key, &data[..len]);
    }
}

/// Reads `n` storage replies; returns how many were not `STORED`.
fn read_stored<R: BufRead>(r: &mut R, line: &mut String, n: usize) -> io::Result<u64> {
    let mut not_stored = 0;
    for _ in 0..n {
        line.clear();
        if r.read_line(line)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed",
            ));
        }
        if line.trim_end() != "STORED" {
            not_stored += 1;
        }
    }
    Ok(not_stored)
}

/// Appends `set <prefix><id> 0 0 <size>` and the key's value to `buf`.
fn push_set(buf: &mut Vec<u8>, prefix: &str, id: u64, size: usize, val: &mut Vec<u8>) {
    // Writing to a Vec cannot fail.
    let _ = write!(buf, "set {prefix}{id:010} 0 0 {size}\r\n");
    value_for(id, size, val);
    buf.extend_from_slice(val);
    buf.extend_from_slice(b"\r\n");
}

fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
    let s = TcpStream::connect_timeout(&addr, TIMEOUT)?;
    s.set_read_timeout(Some(TIMEOUT))?;
    s.set_write_timeout(Some(TIMEOUT))?;
    s.set_nodelay(true)?;
    Ok(s)
}

/// Removes a file when dropped.
#[derive(Debug)]
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A server with its flash file; dropping it stops the server, then removes the file.
struct FlashServer {
    server: Server,
    _file: RemoveOnDrop,
}

impl FlashServer {
    fn start(kind: Kind, bin: &Path, a: &FlashArgs, dir: &Path) -> io::Result<FlashServer> {
        let file = dir.join(format!("{}.flash", kind.name()));
        let _ = std::fs::remove_file(&file);
        let guard = RemoveOnDrop(file.clone());
        let (m, ext) = server_flags(a, &file);
        let server =
            Server::start_args(kind, bin, &["-m", &m, "-t", "2", "-c", "4096", "-o", &ext])?;
        Ok(FlashServer {
            server,
            _file: guard,
        })
    }
}

/// `-m`'s value and `-o`'s `ext_path=FILE:SIZEm`.
fn server_flags(a: &FlashArgs, file: &Path) -> (String, String) {
    (
        a.memory_mb.to_string(),
        format!("ext_path={}:{}m", file.display(), a.flash_mb),
    )
}

/// `stats` and `/proc/PID/status` at one moment.
#[derive(Debug, Default)]
struct Snap {
    stats: HashMap<String, String>,
    rss: u64,
    hwm: u64,
}

impl Snap {
    fn take(server: &Server) -> io::Result<Snap> {
        let stats = server.stats()?;
        let (rss, hwm) = server.rss()?;
        Ok(Snap { stats, rss, hwm })
    }

    /// A counter, `None` when the server does not report it.
    fn get(&self, name: &str) -> Option<f64> {
        self.stats.get(name).and_then(|v| v.parse().ok())
    }
}

/// One server's fill.
#[derive(Debug, Default)]
struct FillOut {
    not_stored: u64,
    hits: u64,
    bad: u64,
    errors: u64,
    set_secs: f64,
    read_secs: f64,
    snap: Snap,
}

/// The fill and the read-back on one connection.
fn fill_one(kind: Kind, bin: &Path, a: &FlashArgs, dir: &Path) -> io::Result<FillOut> {
    let fs = FlashServer::start(kind, bin, a, dir)?;
    let s = connect(fs.server.addr)?;
    let mut w = &s;
    let mut r = BufReader::with_capacity(1 << 16, &s);
    let (mut buf, mut val, mut data, mut line) =
        (Vec::new(), Vec::new(), Vec::new(), String::new());
    let mut out = FillOut::default();
    let ids: Vec<u64> = (0..a.items).collect();
    let t = Instant::now();
    for batch in ids.chunks(SET_BATCH) {
        buf.clear();
        for &id in batch {
            push_set(&mut buf, FILL_PREFIX, id, a.value_size, &mut val);
        }
        w.write_all(&buf)?;
        out.not_stored += read_stored(&mut r, &mut line, batch.len())?;
    }
    out.set_secs = t.elapsed().as_secs_f64();
    let t = Instant::now();
    for batch in ids.chunks(GET_BATCH) {
        buf.clear();
        buf.extend_from_slice(b"get");
        for &id in batch {
            write!(buf, " {FILL_PREFIX}{id:010}")?;
        }
        buf.extend_from_slice(b"\r\n");
        w.write_all(&buf)?;
        let (hits, bad) = (&mut out.hits, &mut out.bad);
        let err = read_values(&mut r, &mut line, &mut data, |key, v| {
            if intact(key, FILL_PREFIX, v, a.value_size, &mut val) {
                *hits += 1;
            } else {
                *bad += 1;
            }
        })?;
        out.errors += u64::from(err.is_some());
    }
    out.read_secs = t.elapsed().as_secs_f64();
    out.snap = Snap::take(&fs.server)?;
    Ok(out)
}

/// What one or more connections saw replaying a trace.
#[derive(Debug, Default)]
struct Replay {
    gets: u64,
    hits: u64,
    bad: u64,
    errors: u64,
    sets: u64,
    not_stored: u64,
    /// Batch round trips, microseconds.
    lat_us: Vec<u32>,
}

impl Replay {
    fn merge(&mut self, o: Replay) {
        self.gets += o.gets;
        self.hits += o.hits;
        self.bad += o.bad;
        self.errors += o.errors;
        self.sets += o.sets;
        self.not_stored += o.not_stored;
        self.lat_us.extend(o.lat_us);
    }
}

/// Replays `trace` cache-aside on one connection: batches of gets, then sets for the misses.
fn replay(addr: SocketAddr, trace: &[u64], size: usize) -> io::Result<Replay> {
    let s = connect(addr)?;
    let mut w = &s;
    let mut r = BufReader::with_capacity(1 << 16, &s);
    let (mut buf, mut val, mut data, mut line) =
        (Vec::new(), Vec::new(), Vec::new(), String::new());
    let mut out = Replay {
        lat_us: Vec::with_capacity(trace.len() / ZIPF_BATCH + 1),
        ..Replay::default()
    };
    let mut misses = Vec::with_capacity(ZIPF_BATCH);
    for batch in trace.chunks(ZIPF_BATCH) {
        buf.clear();
        for k in batch {
            write!(buf, "get {ZIPF_PREFIX}{k:010}\r\n")?;
        }
        let t = Instant::now();
        w.write_all(&buf)?;
        misses.clear();
        for &k in batch {
            let (mut hit, bad) = (false, &mut out.bad);
            let err = read_values(&mut r, &mut line, &mut data, |key, v| {
                hit = true;
                if !intact(key, ZIPF_PREFIX, v, size, &mut val) {
                    *bad += 1;
                }
            })?;
            out.errors += u64::from(err.is_some());
            if hit {
                out.hits += 1;
            } else {
                misses.push(k);
            }
        }
        out.lat_us
            .push(t.elapsed().as_micros().min(u32::MAX as u128) as u32);
        out.gets += batch.len() as u64;
        if !misses.is_empty() {
            buf.clear();
            for &k in &misses {
                push_set(&mut buf, ZIPF_PREFIX, k, size, &mut val);
            }
            w.write_all(&buf)?;
            out.not_stored += read_stored(&mut r, &mut line, misses.len())?;
            out.sets += misses.len() as u64;
        }
    }
    Ok(out)
}

/// Replays one trace per connection, each on its own thread; returns the merged result and
/// the wall time.
fn replay_all(addr: SocketAddr, traces: &[Vec<u64>], size: usize) -> io::Result<(Replay, f64)> {
    let t = Instant::now();
    let results: Vec<io::Result<Replay>> = std::thread::scope(|sc| {
        let handles: Vec<_> = traces
            .iter()
            .map(|tr| sc.spawn(move || replay(addr, tr, size)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(io::Error::other("replay thread panicked")))
            })
            .collect()
    });
    let secs = t.elapsed().as_secs_f64();
    let mut all = Replay::default();
    for r in results {
        all.merge(r?);
    }
    Ok((all, secs))
}

/// The Zipf key space: 10x the values `-m` holds.
fn zipf_keys(a: &FlashArgs) -> u64 {
    (10 * (a.memory_mb << 20) / a.value_size.max(1)) as u64
}

/// One trace per connection, `total` requests in all; key number = Zipf rank - 1.
fn traces(keys: u64, total: u64, seed: u64) -> Vec<Vec<u64>> {
    let zipf = Zipf::new(keys, 0.99);
    let per = total / CONNECTIONS as u64;
    (0..CONNECTIONS as u64)
        .map(|c| {
            let mut rng = SmallRng::seed_from_u64(seed + c);
            (0..per).map(|_| zipf.sample(&mut rng) - 1).collect()
        })
        .collect()
}

/// One server's Zipf run.
#[derive(Debug, Default)]
struct ZipfOut {
    warm_hits: u64,
    warm_gets: u64,
    run: Replay,
    secs: f64,
    snap: Snap,
}

fn zipf_one(
    kind: Kind,
    bin: &Path,
    a: &FlashArgs,
    dir: &Path,
    warm: &[Vec<u64>],
    measured: &[Vec<u64>],
) -> io::Result<ZipfOut> {
    let fs = FlashServer::start(kind, bin, a, dir)?;
    let addr = fs.server.addr;
    let (w, wsecs) = replay_all(addr, warm, a.value_size)?;
    eprintln!(
        "# zipf {}: warm-up {} gets in {wsecs:.1} s, hit ratio {:.3}",
        kind.name(),
        w.gets,
        w.hits as f64 / w.gets.max(1) as f64
    );
    let (run, secs) = replay_all(addr, measured, a.value_size)?;
    let snap = Snap::take(&fs.server)?;
    Ok(ZipfOut {
        warm_hits: w.hits,
        warm_gets: w.gets,
        run,
        secs,
        snap,
    })
}

/// How a table cell is written.
#[derive(Debug, Clone, Copy)]
enum Fmt {
    Int,
    Dec(usize),
    Pct,
    Mib,
}

fn cell(v: Option<f64>, f: Fmt) -> String {
    match v {
        None => "—".to_string(),
        Some(v) => match f {
            Fmt::Int => format!("{v:.0}"),
            Fmt::Dec(d) => format!("{v:.d$}"),
            Fmt::Pct => format!("{:.1}%", 100.0 * v),
            Fmt::Mib => format!("{:.1} MiB", v / (1u64 << 20) as f64),
        },
    }
}

/// One table row: memcached, memkitd, memkitd / memcached.
fn row(name: &str, a: Option<f64>, b: Option<f64>, f: Fmt) {
    let ratio = match (a, b) {
        (Some(a), Some(b)) if a != 0.0 => format!("{:.2}x", b / a),
        _ => "—".to_string(),
    };
    println!("| {name} | {} | {} | {ratio} |", cell(a, f), cell(b, f));
}

fn table_head() {
    println!("| | memcached | memkitd | memkitd / memcached |");
    println!("|---|---:|---:|---:|");
}

fn counter_rows(a: &Snap, b: &Snap) {
    for name in ["curr_items", "evictions"].iter().chain(EXT_COUNTERS) {
        row(&format!("`{name}`"), a.get(name), b.get(name), Fmt::Int);
    }
    row("VmRSS", Some(a.rss as f64), Some(b.rss as f64), Fmt::Mib);
    row("VmHWM", Some(a.hwm as f64), Some(b.hwm as f64), Fmt::Mib);
}

fn fill_table(a: &FlashArgs, mc: &FillOut, mk: &FillOut) {
    let set_bytes = (a.items * a.value_size as u64) as f64;
    println!(
        "\nFill: {} distinct keys, {} B values (bytes a function of the key), `set` in \
         pipelined batches of {SET_BATCH} with replies, then every key read back in multi-gets \
         of {GET_BATCH} and checked; `stats` and /proc after the read-back.\n",
        a.items, a.value_size
    );
    table_head();
    let items = a.items as f64;
    let both = |f: &dyn Fn(&FillOut) -> f64| (Some(f(mc)), Some(f(mk)));
    let (x, y) = both(&|o| o.hits as f64);
    row(&format!("hits intact (of {})", a.items), x, y, Fmt::Int);
    let (x, y) = both(&|o| o.hits as f64 / items);
    row("hits intact, % of keys set", x, y, Fmt::Pct);
    let (x, y) = both(&|o| o.bad as f64);
    row("hits with wrong bytes", x, y, Fmt::Int);
    let (x, y) = both(&|o| (o.not_stored + o.errors) as f64);
    row("sets not stored + get errors", x, y, Fmt::Int);
    counter_rows(&mc.snap, &mk.snap);
    let per_item = |o: &FillOut| (o.hits > 0).then(|| o.snap.rss as f64 / o.hits as f64);
    row(
        "RAM per item held (VmRSS / hits), B",
        per_item(mc),
        per_item(mk),
        Fmt::Int,
    );
    let amp = |o: &FillOut| o.snap.get("extstore_bytes_written").map(|w| w / set_bytes);
    row(
        "write amplification (`extstore_bytes_written` / bytes set)",
        amp(mc),
        amp(mk),
        Fmt::Dec(3),
    );
    let (x, y) = both(&|o| o.set_secs);
    row("fill time, s", x, y, Fmt::Dec(2));
    let (x, y) = both(&|o| o.read_secs);
    row("read-back time, s", x, y, Fmt::Dec(2));
}

fn percentile(sorted: &[u32], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    Some(f64::from(sorted[i]))
}

fn zipf_table(a: &FlashArgs, keys: u64, mc: &mut ZipfOut, mk: &mut ZipfOut) {
    println!(
        "\nZipf: Zipf(0.99) over {keys} keys of {} B ({:.0} MiB, 10x the values `-m {}` \
         holds), cache-aside (`get`, `set` on a miss with its reply read), batches of \
         {ZIPF_BATCH} gets on each of {CONNECTIONS} connections; {} measured gets after a \
         warm-up pass of as many (another seed); counters after both passes.\n",
        a.value_size,
        (keys * a.value_size as u64) as f64 / (1u64 << 20) as f64,
        a.memory_mb,
        mc.run.gets
    );
    table_head();
    mc.run.lat_us.sort_unstable();
    mk.run.lat_us.sort_unstable();
    let (mc, mk) = (&*mc, &*mk);
    let both = |f: &dyn Fn(&ZipfOut) -> Option<f64>| (f(mc), f(mk));
    let (x, y) = both(&|o| Some(o.run.hits as f64 / o.run.gets.max(1) as f64));
    row("hit ratio", x, y, Fmt::Pct);
    let (x, y) = both(&|o| Some(o.warm_hits as f64 / o.warm_gets.max(1) as f64));
    row("hit ratio of the warm-up pass", x, y, Fmt::Pct);
    let (x, y) = both(&|o| Some(o.run.gets as f64 / o.secs));
    row("gets/s", x, y, Fmt::Int);
    let (x, y) = both(&|o| percentile(&o.run.lat_us, 0.5));
    row("batch round trip p50, µs", x, y, Fmt::Int);
    let (x, y) = both(&|o| percentile(&o.run.lat_us, 0.99));
    row("batch round trip p99, µs", x, y, Fmt::Int);
    let (x, y) = both(&|o| Some(o.run.sets as f64));
    row("sets (misses)", x, y, Fmt::Int);
    let (x, y) = both(&|o| Some(o.run.bad as f64));
    row("hits with wrong bytes", x, y, Fmt::Int);
    let (x, y) = both(&|o| Some((o.run.not_stored + o.run.errors) as f64));
    row("sets not stored + get errors", x, y, Fmt::Int);
    counter_rows(&mc.snap, &mk.snap);
}

/// A fresh directory under the temp dir, removed (with what is left in it) when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> io::Result<TempDir> {
        let dir = std::env::temp_dir().join(format!("memkit-flash-bench-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        Ok(TempDir(dir))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The run's header: command line, versions, flags.
fn header(a: &FlashArgs, mc: &Path, mk: &Path) -> io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let version = |kind: Kind, bin: &Path| -> io::Result<String> {
        Ok(Server::start_args(kind, bin, &["-m", "8", "-t", "1"])?.version())
    };
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("## Flash tier: memcached extstore and memkitd\n");
    println!("Command: `memkit-bench {}`\n", args.join(" "));
    println!(
        "memcached {}, memkitd {}; {cpus} CPUs; both servers `-m {} -t 2 -c 4096 -o \
         ext_path=FILE:{}m` on 127.0.0.1, one at a time, a fresh server and flash file per \
         phase.",
        version(Kind::Memcached, mc)?,
        version(Kind::Memkitd, mk)?,
        a.memory_mb,
        a.flash_mb
    );
    Ok(())
}

fn run(a: &FlashArgs) -> io::Result<()> {
    let mc = match &a.memcached {
        Some(p) => p.clone(),
        None => {
            find_on_path("memcached").ok_or_else(|| io::Error::other("memcached not on PATH"))?
        }
    };
    let mk = match &a.memkitd {
        Some(p) => p.clone(),
        None => locate_memkitd("release", false)?,
    };
    if a.value_size == 0 || a.items == 0 {
        return Err(io::Error::other(
            "--items and --value-size must be positive",
        ));
    }
    let dir = TempDir::new()?;
    header(a, &mc, &mk)?;
    if a.only != Some(Phase::Zipf) {
        let t = Instant::now();
        let x = fill_one(Kind::Memcached, &mc, a, &dir.0)?;
        eprintln!("# fill memcached: {:.1} s", t.elapsed().as_secs_f64());
        let t = Instant::now();
        let y = fill_one(Kind::Memkitd, &mk, a, &dir.0)?;
        eprintln!("# fill memkitd: {:.1} s", t.elapsed().as_secs_f64());
        fill_table(a, &x, &y);
    }
    if a.only != Some(Phase::Fill) {
        let keys = zipf_keys(a);
        if keys * a.value_size as u64 > (a.flash_mb as u64) << 20 {
            eprintln!("# note: the Zipf key space's values do not fit the flash file");
        }
        let warm = traces(keys, a.requests, 0xF1A5_0000);
        let measured = traces(keys, a.requests, 0xF1A5_1000);
        let mut x = zipf_one(Kind::Memcached, &mc, a, &dir.0, &warm, &measured)?;
        eprintln!("# zipf memcached: measured pass {:.1} s", x.secs);
        let mut y = zipf_one(Kind::Memkitd, &mk, a, &dir.0, &warm, &measured)?;
        eprintln!("# zipf memkitd: measured pass {:.1} s", y.secs);
        zipf_table(a, keys, &mut x, &mut y);
    }
    Ok(())
}

/// Runs the phases; prints markdown to stdout, progress to stderr.
pub fn main(args: FlashArgs) -> i32 {
    match run(&args) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("memkit-bench flash: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_a_function_of_the_key() {
        let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
        value_for(7, 4096, &mut a);
        value_for(7, 4096, &mut b);
        value_for(8, 4096, &mut c);
        assert_eq!(a.len(), 4096);
        assert_eq!(a, b);
        assert_ne!(a, c);
        value_for(7, 13, &mut b);
        assert_eq!(b, a[..13]);
    }

    #[test]
    fn multi_get_replies_are_parsed_and_checked() {
        let (mut v1, mut v2, mut scratch) = (Vec::new(), Vec::new(), Vec::new());
        value_for(1, 100, &mut v1);
        value_for(2, 100, &mut v2);
        v2[50] ^= 1;
        let mut wire = Vec::new();
        for (id, v) in [(1u64, &v1), (2, &v2)] {
            write!(wire, "VALUE flash:{id:010} 0 {}\r\n", v.len()).unwrap();
            wire.extend_from_slice(v);
            wire.extend_from_slice(b"\r\n");
        }
        wire.extend_from_slice(b"END\r\nSERVER_ERROR out of memory\r\n");
        let mut r = BufReader::new(wire.as_slice());
        let (mut line, mut data, mut seen) = (String::new(), Vec::new(), Vec::new());
        let end = read_values(&mut r, &mut line, &mut data, |k, v| {
            seen.push((k.to_string(), intact(k, FILL_PREFIX, v, 100, &mut scratch)));
        })
        .unwrap();
        assert_eq!(end, None);
        assert_eq!(
            seen,
            [
                ("flash:0000000001".to_string(), true),
                ("flash:0000000002".to_string(), false)
            ]
        );
        let err = read_values(&mut r, &mut line, &mut data, |_, _| panic!()).unwrap();
        assert_eq!(err.as_deref(), Some("SERVER_ERROR out of memory"));
    }

    #[test]
    fn zipf_key_space_is_ten_times_the_memory() {
        let a = FlashArgs {
            memcached: None,
            memkitd: None,
            memory_mb: 64,
            flash_mb: 1024,
            items: 60_000,
            value_size: 4096,
            requests: 800,
            only: None,
        };
        assert_eq!(zipf_keys(&a), 163_840);
        let t = traces(zipf_keys(&a), 800, 1);
        assert_eq!(t.len(), CONNECTIONS);
        assert!(t.iter().flatten().all(|&k| k < 163_840));
        let (m, ext) = server_flags(&a, Path::new("f.flash"));
        assert_eq!((m.as_str(), ext.as_str()), ("64", "ext_path=f.flash:1024m"));
    }
}
