//! `memkit-bench persist`: memkitd's persistent mode (`--persist DIR`).
//!
//! 1. Durable sets/s: `sync` durability (a reply means fsynced), many connections, each
//!    keeping `depth` pipelined `set`s in flight; only acknowledged (`STORED`) sets count.
//!    Group commit is what makes this fast: one fsync serves every connection's writes.
//! 2. Gets/s over a data set 4x the memory budget: the set is loaded first, then uniformly
//!    random keys are read (most are RAM misses answered from disk); every get must hit.
//!
//! The server is memkitd itself (`--memkitd`, `$MEMKITD`, or next to this binary), on
//! 127.0.0.1 only, killed by PID when done.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

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
}

struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(bin: &Path, dir: &Path, a: &PersistArgs) -> std::io::Result<Server> {
    for _ in 0..5 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let child = Command::new(bin)
            .args(["-p", &port.to_string(), "-l", "127.0.0.1", "-c", "4096"])
            .args(["-m", &a.memory_mb.to_string(), "-t", &a.threads.to_string()])
            .arg("--persist")
            .arg(dir)
            .args(["--durability", "sync"])
            // Ignored unless run as root, where memkitd (as memcached) requires it.
            .args(["-u", "root"])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?;
        let mut s = Server { child, port };
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = s.child.try_wait() {
                break;
            }
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(s);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = s.child.kill();
    }
    Err(std::io::Error::other("memkitd did not start"))
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
    let server = match start(&bin, &dir, &a) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("memkit-bench persist: {e} ({})", bin.display());
            return 1;
        }
    };
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let vlen = a.value_len;
    // 1. Durable sets.
    let (stored, sent, secs) =
        rt.block_on(drive(server.port, &a, u64::MAX, a.secs, move |_, k, b| {
            set_req(k % 1_000_000, vlen, b)
        }));
    let sets_per_s = stored as f64 / secs;
    eprintln!("# durable sets: {stored}/{sent} stored in {secs:.1} s");
    // 2. A data set 4x the budget, then random gets over all of it.
    let big_len = 1000;
    let keys = ((a.memory_mb as u64) << 22) / big_len as u64; // 4x the budget
    let (loaded, _, load_secs) =
        rt.block_on(drive(server.port, &a, keys, 3600.0, move |_, k, b| {
            set_req(k, big_len, b)
        }));
    eprintln!("# loaded {loaded} x {big_len} B in {load_secs:.1} s");
    let (hits, gets, get_secs) =
        rt.block_on(drive(server.port, &a, u64::MAX, a.secs, move |r, _, b| {
            use std::io::Write;
            let _ = write!(b, "get key:{:010}\r\n", r.random_range(0..keys));
        }));
    let gets_per_s = gets as f64 / get_secs;
    drop(server);
    if fresh {
        let _ = std::fs::remove_dir_all(&dir);
    }
    println!(
        "| persistent mode (`--persist`, `-m {}`, `-t {}`) | result |",
        a.memory_mb, a.threads
    );
    println!("|---|---|");
    println!(
        "| durable sets/s (`sync`, {} conns x {} pipelined, {} B values) | {:.0} |",
        a.conns, a.depth, a.value_len, sets_per_s
    );
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
