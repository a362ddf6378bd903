//! `memkit-bench persist`: memkitd's persistent mode (`--persist DIR`).
//!
//! 1. Durable sets/s: `sync` durability (a reply means fsynced), many connections, each
//!    keeping `depth` pipelined `set`s in flight; only acknowledged (`STORED`) sets count.
//!    Group commit is what makes this fast: one fsync serves every connection's writes. The
//!    same load runs against memcached (which keeps nothing on disk) in the same run, for
//!    what durability costs; with each, the server's CPU per acknowledged set.
//! 2. Gets/s over a data set 4x the memory budget: the set is loaded first, then uniformly
//!    random keys are read (most are RAM misses answered from disk); every get must hit.
//!
//! The server is memkitd itself (`--memkitd`, `$MEMKITD`, or next to this binary), and
//! memcached (`--memcached`, else on `PATH`), on 127.0.0.1 only, killed by PID when done.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::procs::{Kind, Server};

/// `memkit-bench persist` options.
#[derive(Debug, Clone, clap::Args)]
pub struct PersistArgs {
    /// memkitd binary (default: $MEMKITD, else next to this binary).
    #[arg(long)]
    pub memkitd: Option<PathBuf>,
    /// Directory for the store (default: a fresh one under the temp dir, removed after).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Memory budget of memkitd, MiB (`-m`).
    #[arg(long, default_value_t = 64)]
    pub memory_mb: usize,
    /// Connections.
    #[arg(long, default_value_t = 64)]
    pub conns: usize,
    /// Pipelined requests per connection.
    #[arg(long, default_value_t = 32)]
    pub depth: usize,
    /// Value size, bytes.
    #[arg(long, default_value_t = 100)]
    pub value_len: usize,
    /// Seconds per measured phase.
    #[arg(long, default_value_t = 5.0)]
    pub secs: f64,
    /// Worker threads of memkitd (`-t`).
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// memcached binary, for the same sets side by side (default: `memcached` on PATH).
    #[arg(long)]
    pub memcached: Option<PathBuf>,
    /// Only the durable sets (memkitd's and memcached's), not the data set 4x the budget.
    #[arg(long)]
    pub sets_only: bool,
}

fn start_memkitd(
    bin: &std::path::Path,
    dir: &std::path::Path,
    a: &PersistArgs,
) -> std::io::Result<Server> {
    let (m, t) = (a.memory_mb.to_string(), a.threads.to_string());
    let dir = dir.to_string_lossy();
    let args = [
        "-c",
        "4096",
        "-m",
        &m,
        "-t",
        &t,
        "--persist",
        &dir,
        "--durability",
        "sync",
    ];
    Server::start_args(Kind::Memkitd, bin, &args)
}

/// Durable sets through `server` for `a.secs`: (acknowledged per second, the server's CPU
/// microseconds per acknowledged set).
fn sets(rt: &tokio::runtime::Runtime, server: &Server, a: &PersistArgs) -> (f64, f64) {
    let vlen = a.value_len;
    let cpu0 = server.cpu_secs().unwrap_or(0.0);
    let (stored, sent, secs) = rt.block_on(drive(
        server.addr.port(),
        a,
        u64::MAX,
        a.secs,
        move |_, k, b| set_req(k % 1_000_000, vlen, b),
    ));
    let cpu = server.cpu_secs().unwrap_or(0.0) - cpu0;
    eprintln!(
        "# {}: {stored}/{sent} sets stored in {secs:.1} s",
        server.kind.name()
    );
    (stored as f64 / secs, cpu * 1e6 / stored.max(1) as f64)
}

/// Reads one reply to `set` (true if STORED) or `get` (true on a hit).
async fn reply(r: &mut BufReader<tokio::net::tcp::OwnedReadHalf>, line: &mut String) -> bool {
    line.clear();
    r.read_line(line).await.expect("reply");
    if let Some(rest) = line.strip_prefix("VALUE ") {
        let n: usize = rest.split_whitespace().nth(2).unwrap().parse().unwrap();
        let mut skip = vec![0u8; n + 2];
        r.read_exact(&mut skip).await.expect("value");
        line.clear();
        r.read_line(line).await.expect("END");
        return true;
    }
    line == "STORED\r\n"
}

/// Runs `conns` connections, each sending batches of `depth` requests made by `req`, for
/// `secs` or until `limit` requests; returns (acknowledged, total, seconds).
async fn drive(
    port: u16,
    a: &PersistArgs,
    limit: u64,
    secs: f64,
    req: impl Fn(&mut rand::rngs::SmallRng, u64, &mut Vec<u8>) + Send + Sync + Copy + 'static,
) -> (u64, u64, f64) {
    let started = Instant::now();
    let end = started + Duration::from_secs_f64(secs);
    let per_conn = limit.div_ceil(a.conns as u64);
    let (depth, conns) = (a.depth as u64, a.conns as u64);
    let tasks: Vec<_> = (0..conns)
        .map(|c| {
            tokio::spawn(async move {
                let s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
                s.set_nodelay(true).unwrap();
                let (rd, mut wr) = s.into_split();
                let mut rd = BufReader::with_capacity(256 << 10, rd);
                let mut rng = rand::rngs::SmallRng::seed_from_u64(c);
                let (mut ok, mut n, mut buf, mut line) = (0u64, 0u64, Vec::new(), String::new());
                while n < per_conn && Instant::now() < end {
                    buf.clear();
                    let batch = depth.min(per_conn - n);
                    for i in 0..batch {
                        req(&mut rng, c + (n + i) * conns, &mut buf);
                    }
                    wr.write_all(&buf).await.unwrap();
                    for _ in 0..batch {
                        ok += u64::from(reply(&mut rd, &mut line).await);
                    }
                    n += batch;
                }
                (ok, n)
            })
        })
        .collect();
    let (mut ok, mut n) = (0, 0);
    for t in tasks {
        let (o, m) = t.await.unwrap();
        ok += o;
        n += m;
    }
    (ok, n, started.elapsed().as_secs_f64())
}

fn set_req(key: u64, value_len: usize, buf: &mut Vec<u8>) {
    use std::io::Write;
    let _ = write!(buf, "set key:{key:010} 0 0 {value_len}\r\n");
    buf.extend(std::iter::repeat_n(b'v', value_len));
    buf.extend_from_slice(b"\r\n");
}

/// Runs the benchmark; prints markdown to stdout. Returns the exit code.
pub fn main(a: PersistArgs) -> i32 {
    let bin = a
        .memkitd
        .clone()
        .or_else(|| std::env::var_os("MEMKITD").map(PathBuf::from))
        .or_else(|| Some(std::env::current_exe().ok()?.with_file_name("memkitd")))
        .expect("memkitd path");
    let fresh = a.dir.is_none();
    let dir = a.dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("memkit-persist-bench-{}", std::process::id()))
    });
    let _ = std::fs::remove_dir_all(&dir);
    let server = match start_memkitd(&bin, &dir, &a) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("memkit-bench persist: {e} ({})", bin.display());
            return 1;
        }
    };
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    // 1. Durable sets, then the same sets against memcached.
    let (sets_per_s, set_cpu) = sets(&rt, &server, &a);
    let spec = crate::procs::Spec {
        threads: a.threads,
        memory_mb: a.memory_mb,
    };
    let mc = a
        .memcached
        .clone()
        .or_else(|| crate::procs::find_on_path("memcached"))
        .and_then(|bin| match Server::start(Kind::Memcached, &bin, spec) {
            Ok(s) => Some(sets(&rt, &s, &a)),
            Err(e) => {
                eprintln!("memkit-bench persist: memcached: {e}");
                None
            }
        });
    let port = server.addr.port();
    // 2. A data set 4x the budget, then random gets over all of it.
    let big_len = 1000;
    let keys = ((a.memory_mb as u64) << 22) / big_len as u64; // 4x the budget
    if a.sets_only {
        drop(server);
        print_sets(&a, sets_per_s, set_cpu, mc);
        return 0;
    }
    let (loaded, _, load_secs) = rt.block_on(drive(port, &a, keys, 3600.0, move |_, k, b| {
        set_req(k, big_len, b)
    }));
    eprintln!("# loaded {loaded} x {big_len} B in {load_secs:.1} s");
    let (hits, gets, get_secs) = rt.block_on(drive(port, &a, u64::MAX, a.secs, move |r, _, b| {
        use std::io::Write;
        let _ = write!(b, "get key:{:010}\r\n", r.random_range(0..keys));
    }));
    let gets_per_s = gets as f64 / get_secs;
    drop(server);
    if fresh {
        let _ = std::fs::remove_dir_all(&dir);
    }
    print_sets(&a, sets_per_s, set_cpu, mc);
    println!();
    println!("| persistent mode, data set 4x the budget | result |");
    println!("|---|---|");
    println!(
        "| gets/s, data set 4x the budget ({} keys x {} B), uniform keys | {:.0} (hit ratio {:.4}) |",
        keys,
        big_len,
        gets_per_s,
        hits as f64 / gets.max(1) as f64
    );
    println!(
        "| load of that data set, acknowledged sets/s | {:.0} |",
        loaded as f64 / load_secs
    );
    0
}

/// The durable sets' table: memkitd, memcached, and their ratio.
fn print_sets(a: &PersistArgs, sets_per_s: f64, cpu: f64, mc: Option<(f64, f64)>) {
    println!(
        "| `-m {}`, `-t {}`, {} conns x {} pipelined, {} B values | sets/s | server CPU µs a set |",
        a.memory_mb, a.threads, a.conns, a.depth, a.value_len
    );
    println!("|---|---|---|");
    println!("| memkitd `--persist --durability sync` | {sets_per_s:.0} | {cpu:.1} |");
    if let Some((mc_sets, mc_cpu)) = mc {
        println!("| memcached (nothing on disk) | {mc_sets:.0} | {mc_cpu:.1} |");
        println!(
            "| memkitd / memcached | {:.2}x | {:.2}x |",
            sets_per_s / mc_sets,
            cpu / mc_cpu
        );
    }
}
