//! `memkit-bench raft-snapshot`: a three-node `memkit-raft` group in this process, on
//! 127.0.0.1, its logs and snapshots under one temporary directory (on disk by default: the
//! log syncs every append, as a deployed node's does).
//!
//! - **Fill**: `--items` distinct keys (16 bytes) with `--value-size`-byte values that are a
//!   function of the key ([`value_for`]), written through the leader's `Node::write` by
//!   `--writers` concurrent tasks, each waiting for its write's answer before the next:
//!   the replicated, pipelined write rate (writes/s over the fill's wall time).
//! - **Snapshot**: the leader takes a snapshot (`Node::snapshot`) and every node purges its
//!   log up to it, so the leader can no longer bring a new follower up to date from its log.
//!   Reported: the time, the snapshot file's size.
//! - **Install**: a follower is stopped, its directory deleted, and it is started again
//!   with bootstrap off; timed from that start until its applied index reaches the
//!   leader's, which is the snapshot's transfer and install plus the few entries after it.
//!   Then every key (or, past 100k items, 100k keys spread over the range) is read on the
//!   follower and its value compared.
//!
//! Peak RSS is the whole process's (three nodes' engines and logs), read from `VmHWM`
//! after resetting it at each phase's start (`/proc/self/clear_refs`, `5`); where that
//! reset is refused the figure is the peak since the process started.
//!
//! Automatic snapshots are off during the run (`snapshot_after` past the item count), so the
//! fill measures replication alone and exactly one snapshot is taken.

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use memkit_raft::{Config, Node, NodeId, Reply, Role, StoreResult, Write};

use crate::workload::mix64;

/// `memkit-bench raft-snapshot` options.
#[derive(Debug, Clone, clap::Args)]
pub struct RaftSnapshotArgs {
    /// Items written, then carried by the snapshot.
    #[arg(long, default_value_t = 1_000_000)]
    pub items: u64,
    /// Value size, bytes.
    #[arg(long, default_value_t = 100)]
    pub value_size: usize,
    /// Concurrent writers through the leader during the fill.
    #[arg(long, default_value_t = 64)]
    pub writers: usize,
    /// Where the nodes' directories go (default: the system's temporary directory).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Bound on each phase, seconds: a phase past it ends the run with an error.
    #[arg(long, default_value_t = 600)]
    pub phase_timeout_secs: u64,
}

impl RaftSnapshotArgs {
    /// A run of `items` items with the other options at their defaults.
    pub fn with_items(items: u64) -> RaftSnapshotArgs {
        RaftSnapshotArgs {
            items,
            value_size: 100,
            writers: 64,
            dir: None,
            phase_timeout_secs: 600,
        }
    }
}

/// What a run measured.
#[derive(Debug, Clone, Default)]
pub struct RaftSnapshotReport {
    /// Items written.
    pub items: u64,
    /// The fill's wall time.
    pub fill: Duration,
    /// Peak RSS during the fill, bytes.
    pub fill_peak_rss: u64,
    /// `Node::snapshot` on the leader (taking the snapshot, saving it).
    pub snapshot_taken: Duration,
    /// `Node::snapshot` on the leader, then the purge.
    pub snapshot: Duration,
    /// The last log index the snapshot covers.
    pub snapshot_index: u64,
    /// The leader's snapshot file, bytes.
    pub snapshot_bytes: u64,
    /// Peak RSS while the snapshot was taken, bytes.
    pub snapshot_peak_rss: u64,
    /// RSS just before the wiped follower started, bytes.
    pub install_start_rss: u64,
    /// From the wiped follower's start to its applied index reaching the leader's.
    pub install: Duration,
    /// From the wiped follower's start to the whole snapshot file received (`snapshot.recv`
    /// seen at its full size; `None` if the poll, every 5 ms, missed it).
    pub received: Option<Duration>,
    /// Peak RSS during the install, bytes.
    pub install_peak_rss: u64,
    /// Whether `VmHWM` could be reset at each phase (else peaks are since the start).
    pub peaks_reset: bool,
    /// Keys read back on the follower.
    pub checked: u64,
    /// Of those, keys missing or with a wrong value.
    pub bad: u64,
}

impl RaftSnapshotReport {
    /// Replicated writes per second during the fill.
    pub fn writes_per_sec(&self) -> f64 {
        self.items as f64 / self.fill.as_secs_f64()
    }

    /// The report as a markdown table.
    pub fn to_markdown(&self, a: &RaftSnapshotArgs) -> String {
        let mib = |b: u64| format!("{:.1} MiB", b as f64 / f64::from(1 << 20));
        let peak = if self.peaks_reset {
            "peak RSS (phase)"
        } else {
            "peak RSS (since start)"
        };
        let rows = [
            ("items", format!("{}", self.items)),
            ("value size", format!("{} B", a.value_size)),
            ("writers", format!("{}", a.writers)),
            ("fill", format!("{:.2} s", self.fill.as_secs_f64())),
            ("fill writes/s", format!("{:.0}", self.writes_per_sec())),
            (&format!("fill {peak}"), mib(self.fill_peak_rss)),
            (
                "snapshot taken",
                format!("{:.2} s", self.snapshot_taken.as_secs_f64()),
            ),
            (
                "snapshot + purge",
                format!("{:.2} s", self.snapshot.as_secs_f64()),
            ),
            ("snapshot index", format!("{}", self.snapshot_index)),
            ("snapshot file", mib(self.snapshot_bytes)),
            (&format!("snapshot {peak}"), mib(self.snapshot_peak_rss)),
            ("RSS before install", mib(self.install_start_rss)),
            (
                "wiped follower: snapshot received",
                self.received
                    .map_or("—".into(), |d| format!("{:.2} s", d.as_secs_f64())),
            ),
            (
                "wiped follower caught up",
                format!("{:.2} s", self.install.as_secs_f64()),
            ),
            (&format!("install {peak}"), mib(self.install_peak_rss)),
            ("keys checked on follower", format!("{}", self.checked)),
            ("missing or wrong", format!("{}", self.bad)),
        ];
        let mut s = String::from("| raft-snapshot | |\n| --- | ---: |\n");
        for (k, v) in rows {
            s.push_str(&format!("| {k} | {v} |\n"));
        }
        s
    }
}

/// Key `i`: 16 bytes.
pub fn key_for(i: u64) -> Vec<u8> {
    format!("rk:{i:013}").into_bytes()
}

/// The value of key `i`: `len` bytes of a hash stream seeded by `i` (binary, every byte
/// value occurring, as a serialized value's would).
pub fn value_for(i: u64, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len + 8);
    let mut z = i;
    while v.len() < len {
        z = mix64(z);
        v.extend_from_slice(&z.to_le_bytes());
    }
    v.truncate(len);
    v
}

/// `VmRSS` and `VmHWM` of this process, bytes.
fn rss() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .map_or(0, |k| k * 1024)
    };
    (kb("VmRSS:"), kb("VmHWM:"))
}

/// Resets `VmHWM` to the current RSS; whether the kernel allowed it.
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn free_port() -> io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn node_config(a: &RaftSnapshotArgs, bootstrap: bool) -> Config {
    // The engine never evicts: room for every item with its overhead, twice over.
    let per_item = 16 + a.value_size as u64 + 96;
    Config {
        memory_limit: (64 << 20) + (2 * per_item * a.items) as usize,
        heartbeat_ms: 100,
        election_timeout_ms: (1000, 2000),
        snapshot_after: a.items.saturating_mul(4).max(1 << 20),
        keep_behind_snapshot: 0,
        request_timeout: Duration::from_secs(30),
        bootstrap,
        ..Config::default()
    }
}

struct Group {
    root: PathBuf,
    peers: BTreeMap<NodeId, String>,
    nodes: BTreeMap<NodeId, Arc<Node>>,
}

impl Group {
    fn dir(&self, id: NodeId) -> PathBuf {
        self.root.join(format!("n{id}"))
    }

    async fn boot(&mut self, id: NodeId, cfg: Config) -> io::Result<()> {
        let node = Node::start_with(id, &self.dir(id), &self.peers[&id], self.peers.clone(), cfg)
            .await
            .map_err(io::Error::other)?;
        self.nodes.insert(id, Arc::new(node));
        Ok(())
    }

    async fn stop(&mut self, id: NodeId) {
        if let Some(n) = self.nodes.remove(&id) {
            // A writer still running (the run failed) holds it: dropped, not shut down.
            if let Ok(n) = Arc::try_unwrap(n) {
                n.shutdown().await;
            }
        }
    }

    async fn leader(&self, limit: Duration) -> io::Result<NodeId> {
        let until = Instant::now() + limit;
        loop {
            for n in self.nodes.values() {
                let m = n.metrics().await;
                if m.role == Role::Leader
                    && self
                        .nodes
                        .values()
                        .all(|o| o.raft().metrics().borrow().current_leader == Some(m.id))
                {
                    return Ok(m.id);
                }
            }
            if Instant::now() >= until {
                return Err(io::Error::other("no leader elected"));
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

fn set(i: u64, value_size: usize) -> Write {
    Write::set(key_for(i), value_for(i, value_size))
}

/// Writes every item through `leader` with `a.writers` tasks; returns the largest entry
/// index written (a stored item's CAS names its entry: `memkit_raft::entry_of_cas`).
async fn fill(leader: &Arc<Node>, a: &RaftSnapshotArgs) -> io::Result<u64> {
    let next = Arc::new(AtomicU64::new(0));
    let last = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..a.writers.max(1) {
        let (node, next, last) = (leader.clone(), next.clone(), last.clone());
        let (items, size) = (a.items, a.value_size);
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= items {
                    return Ok(());
                }
                match node.write(set(i, size)).await {
                    Ok(Reply::Stored {
                        outcome: StoreResult::Stored,
                        cas,
                    }) => {
                        last.fetch_max(memkit_raft::entry_of_cas(cas), Ordering::Relaxed);
                    }
                    other => return Err(io::Error::other(format!("write {i}: {other:?}"))),
                }
            }
        }));
    }
    for t in tasks {
        t.await.map_err(io::Error::other)??;
    }
    Ok(last.load(Ordering::Relaxed))
}

/// Reads keys back on `node`: all of them up to 100k, else 100k spread over the range.
/// Returns (checked, missing or wrong).
fn check(node: &Node, a: &RaftSnapshotArgs) -> (u64, u64) {
    let step = (a.items / 100_000).max(1);
    let (mut checked, mut bad) = (0, 0);
    let mut i = 0;
    while i < a.items {
        checked += 1;
        let ok = node
            .read_local(&key_for(i))
            .ok()
            .flatten()
            .is_some_and(|(item, _)| item.value[..] == value_for(i, a.value_size)[..]);
        bad += u64::from(!ok);
        i += step;
    }
    (checked, bad)
}

/// Waits until `path` holds `bytes` bytes; the time since `since`.
async fn received(path: PathBuf, bytes: u64, since: Instant) -> Duration {
    loop {
        if std::fs::metadata(&path).is_ok_and(|m| m.len() >= bytes) {
            return since.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn within<T>(
    secs: u64,
    what: &str,
    f: impl std::future::Future<Output = io::Result<T>>,
) -> io::Result<T> {
    tokio::time::timeout(Duration::from_secs(secs), f)
        .await
        .map_err(|_| io::Error::other(format!("{what} took more than {secs} s")))?
}

/// Runs the three phases; `progress` gets a line as each phase ends.
pub async fn run(
    a: &RaftSnapshotArgs,
    progress: &mut dyn FnMut(&str),
) -> io::Result<RaftSnapshotReport> {
    let base = a.dir.clone().unwrap_or_else(std::env::temp_dir);
    let root = base.join(format!("memkit-bench-raft-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let mut peers = BTreeMap::new();
    for id in 1..=3 {
        peers.insert(id, format!("127.0.0.1:{}", free_port()?));
    }
    let mut g = Group {
        root,
        peers,
        nodes: BTreeMap::new(),
    };
    let r = phases(&mut g, a, progress).await;
    for id in 1..=3 {
        g.stop(id).await;
    }
    let _ = std::fs::remove_dir_all(&g.root);
    r
}

async fn phases(
    g: &mut Group,
    a: &RaftSnapshotArgs,
    progress: &mut dyn FnMut(&str),
) -> io::Result<RaftSnapshotReport> {
    let limit = a.phase_timeout_secs;
    let mut r = RaftSnapshotReport {
        items: a.items,
        ..Default::default()
    };
    for id in 1..=3 {
        g.boot(id, node_config(a, true)).await?;
    }
    let leader_id = g.leader(Duration::from_secs(30)).await?;
    let leader = g.nodes[&leader_id].clone();

    r.peaks_reset = reset_peak();
    let t = Instant::now();
    let last = within(limit, "the fill", fill(&leader, a)).await?;
    r.fill = t.elapsed();
    r.fill_peak_rss = rss().1;
    progress(&format!(
        "fill: {} items in {:.2} s ({:.0} writes/s)",
        a.items,
        r.fill.as_secs_f64(),
        r.writes_per_sec()
    ));

    r.peaks_reset &= reset_peak();
    let t = Instant::now();
    r.snapshot_index = within(limit, "the snapshot", async {
        let index = leader
            .snapshot(Duration::from_secs(limit))
            .await
            .map_err(io::Error::other)?;
        r.snapshot_taken = t.elapsed();
        for n in g.nodes.values() {
            n.raft()
                .trigger()
                .purge_log(index)
                .await
                .map_err(io::Error::other)?;
        }
        leader
            .raft()
            .wait(Some(Duration::from_secs(limit)))
            .metrics(|m| m.purged.is_some_and(|p| p.index >= index), "purged")
            .await
            .map_err(io::Error::other)?;
        Ok(index)
    })
    .await?;
    r.snapshot = t.elapsed();
    r.snapshot_peak_rss = rss().1;
    r.snapshot_bytes = std::fs::metadata(g.dir(leader_id).join("snapshot"))?.len();
    progress(&format!(
        "snapshot: index {} (last write {last}), {} bytes, {:.2} s",
        r.snapshot_index,
        r.snapshot_bytes,
        r.snapshot.as_secs_f64()
    ));

    let follower = (1..=3).find(|id| *id != leader_id).expect("three nodes");
    drop(leader);
    g.stop(follower).await;
    std::fs::remove_dir_all(g.dir(follower))?;
    let target = g.nodes[&leader_id]
        .metrics()
        .await
        .applied_index
        .unwrap_or(0);
    r.peaks_reset &= reset_peak();
    r.install_start_rss = rss().0;
    let t = Instant::now();
    let received = tokio::spawn(received(
        g.dir(follower).join("snapshot.recv"),
        r.snapshot_bytes,
        t,
    ));
    g.boot(follower, node_config(a, false)).await?;
    g.nodes[&follower]
        .raft()
        .wait(Some(Duration::from_secs(limit)))
        .applied_index_at_least(Some(target), "wiped follower catches up")
        .await
        .map_err(io::Error::other)?;
    r.install = t.elapsed();
    r.install_peak_rss = rss().1;
    received.abort();
    r.received = received.await.ok();
    progress(&format!(
        "install: follower {follower} applied {target} after {:.2} s",
        r.install.as_secs_f64()
    ));
    (r.checked, r.bad) = check(&g.nodes[&follower], a);
    Ok(r)
}

/// The subcommand: runs on a two-worker runtime (the machines the targets are set for have
/// two cores), prints the table; the exit code is 0 unless the run failed or a key came
/// back wrong.
pub fn main(a: RaftSnapshotArgs) -> i32 {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("raft-snapshot: runtime: {e}");
            return 1;
        }
    };
    match rt.block_on(run(&a, &mut |l| eprintln!("# {l}"))) {
        Ok(r) => {
            print!("{}", r.to_markdown(&a));
            i32::from(r.bad > 0)
        }
        Err(e) => {
            eprintln!("raft-snapshot: {e}");
            1
        }
    }
}
