//! The failover phase of `memkit-bench raft`: SIGKILL the leader under writers, time the
//! first acknowledged write after it, bring the node back, repeat.
//!
//! A writer runs on each follower, one `set` at a time over one connection (a blocking
//! socket on a thread of its own, so its timing does not wait behind a runtime). The
//! failover time is from the moment the signal is sent to the first `STORED` for a set
//! *sent after* it, through either survivor: a reply to a set sent before could be an
//! entry the old leader committed. A refused set (`SERVER_ERROR`: the forward to the dead
//! leader was lost, or no leader within the server's timeout) is sent again 5 ms later,
//! as a client would.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use crate::raft_bench::SETTLE;
use crate::raft_group::Group;

/// How long a writer keeps trying after the kill before the run fails.
const GIVE_UP: Duration = Duration::from_secs(20);

/// How long the writers run before the kill, so that it lands under load.
const WARM: Duration = Duration::from_millis(300);

/// Pause before a refused set is sent again.
const RETRY: Duration = Duration::from_millis(5);

/// The failover phase's figures.
#[derive(Debug, Clone, Default)]
pub struct Failovers {
    /// Per kill: signal to the first acknowledged set sent after it.
    pub times: Vec<Duration>,
    /// Per kill: the killed node's start again until every node had caught up.
    pub rejoin: Vec<Duration>,
    /// Refused sets (`SERVER_ERROR`) the writers saw after the kills, all together.
    pub refused: u64,
    /// Sets acknowledged by the writers, all kills together.
    pub acked: u64,
}

/// What one writer saw.
struct Seen {
    first_ack: Option<Instant>,
    refused: u64,
    acked: u64,
}

/// Nearest-rank percentile of `v` (sorted).
fn pct(v: &[Duration], q: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

impl Failovers {
    /// The failover table (markdown).
    pub fn print(&self) {
        let mut t = self.times.clone();
        t.sort();
        let mut r = self.rejoin.clone();
        r.sort();
        let ms = |d: Duration| format!("{:.0} ms", d.as_secs_f64() * 1e3);
        println!(
            "| failover: SIGKILL of the leader, {} kills | result |",
            t.len()
        );
        println!("|---|---:|");
        println!(
            "| kill -> next acknowledged write, p50 | {} |",
            ms(pct(&t, 0.5))
        );
        println!("| p90 | {} |", ms(pct(&t, 0.9)));
        println!("| worst | {} |", ms(pct(&t, 1.0)));
        println!("| best | {} |", ms(pct(&t, 0.0)));
        println!(
            "| killed node restarted -> every node caught up, p50 / worst | {} / {} |",
            ms(pct(&r, 0.5)),
            ms(pct(&r, 1.0))
        );
        println!(
            "| writers' sets acknowledged / refused (SERVER_ERROR) | {} / {} |",
            self.acked, self.refused
        );
        let all: Vec<String> = self
            .times
            .iter()
            .map(|d| d.as_millis().to_string())
            .collect();
        println!("| every kill, ms, in order | {} |", all.join(", "));
    }
}

/// `kills` rounds of: wait for a leader and every node caught up, writers on the
/// followers, SIGKILL the leader, time the first acknowledged set sent after it, start
/// the killed node again.
pub fn run(g: &mut Group, kills: usize, value_len: usize) -> io::Result<Failovers> {
    let mut f = Failovers::default();
    for round in 0..kills {
        let leader = g.leader(SETTLE)?;
        g.wait_caught_up(SETTLE)?;
        let kill_at: Arc<OnceLock<Instant>> = Arc::default();
        let writers: Vec<_> = g
            .ids()
            .into_iter()
            .filter(|&id| id != leader)
            .map(|id| {
                let addr = g.addr(id)?;
                let k = kill_at.clone();
                let tag = format!("fo{round}n{id}");
                Ok(thread::spawn(move || writer(addr, &tag, value_len, &k)))
            })
            .collect::<io::Result<_>>()?;
        thread::sleep(WARM);
        let t0 = g.kill(leader)?;
        // On the wall clock too, to read the nodes' logs against.
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .saturating_sub(t0.elapsed());
        let _ = kill_at.set(t0);
        let mut first = None::<Instant>;
        for w in writers {
            let seen = w
                .join()
                .map_err(|_| io::Error::other("a writer panicked"))??;
            f.refused += seen.refused;
            f.acked += seen.acked;
            first = match (first, seen.first_ack) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        let first = first.ok_or_else(|| {
            io::Error::other(format!(
                "no write acknowledged within {GIVE_UP:?} of kill {round}"
            ))
        })?;
        let took = first - t0;
        let rejoin_from = Instant::now();
        g.start_node(leader)?;
        g.wait_caught_up(SETTLE)?;
        let rejoin = rejoin_from.elapsed();
        eprintln!(
            "# kill {} at unix {:.3}: leader {leader}, next write acknowledged after {:.0} ms; back and caught up in {:.0} ms",
            round + 1,
            wall.as_secs_f64(),
            took.as_secs_f64() * 1e3,
            rejoin.as_secs_f64() * 1e3
        );
        f.times.push(took);
        f.rejoin.push(rejoin);
    }
    Ok(f)
}

fn connect(addr: SocketAddr) -> io::Result<(TcpStream, BufReader<TcpStream>)> {
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
    s.set_nodelay(true)?;
    // Above the server's own 5 s for a write: its answer comes first.
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let r = BufReader::new(s.try_clone()?);
    Ok((s, r))
}

/// Sets `tag:N` one at a time through `addr` until a set sent after `kill_at` is
/// acknowledged, or [`GIVE_UP`] after it.
fn writer(
    addr: SocketAddr,
    tag: &str,
    value_len: usize,
    kill_at: &OnceLock<Instant>,
) -> io::Result<Seen> {
    let (mut s, mut r) = connect(addr)?;
    let value = "v".repeat(value_len);
    let mut seen = Seen {
        first_ack: None,
        refused: 0,
        acked: 0,
    };
    let mut line = String::new();
    for n in 0u64.. {
        if kill_at.get().is_some_and(|k| k.elapsed() > GIVE_UP) {
            return Ok(seen);
        }
        let req = format!("set {tag}:{n} 0 0 {value_len}\r\n{value}\r\n");
        let sent = Instant::now();
        line.clear();
        let answered = s
            .write_all(req.as_bytes())
            .and_then(|_| r.read_line(&mut line));
        if !matches!(answered, Ok(n) if n > 0) {
            // A survivor should not drop us; if it does, dial again.
            thread::sleep(RETRY);
            (s, r) = connect(addr)?;
            continue;
        }
        if line == "STORED\r\n" {
            seen.acked += 1;
            if let Some(&k) = kill_at.get()
                && sent >= k
            {
                seen.first_ack = Some(Instant::now());
                return Ok(seen);
            }
        } else {
            if kill_at.get().is_some() {
                seen.refused += 1;
            }
            thread::sleep(RETRY);
        }
    }
    Ok(seen)
}
