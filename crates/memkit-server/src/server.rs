//! The listener: the accept loop, the connection limit, the worker threads, shutdown.
//!
//! [`run`] takes a bound listener and a shutdown future (mini-redis's shape), so tests bind
//! port 0 and stop the server by resolving the future: no fixed ports, no sleeps.

use std::future::Future;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};

use crate::config::Settings;
use crate::state::{ConnLive, ConnState, Moved, Registered, Security, Shared};
use crate::task;

/// Serves connections accepted from `listener` until `shutdown` resolves or a client sends
/// `shutdown` (with `-A`). Then it stops accepting, gives open connections up to two
/// seconds to finish the requests they have read, and returns.
pub async fn run(listener: TcpListener, shared: Arc<Shared>, shutdown: impl Future<Output = ()>) {
    run_on(listener, shared, shutdown, None).await
}

/// [`run`], with connections served on `workers` (memkitd) instead of the caller's runtime.
pub async fn run_on(
    listener: TcpListener,
    shared: Arc<Shared>,
    shutdown: impl Future<Output = ()>,
    workers: Option<&Workers>,
) {
    run_listeners(vec![listener.into()], shared, shutdown, workers).await
}

/// A bound listener: TCP (`-l`; `tls` is false for a `notls:` one) or a UNIX socket (`-s`).
#[derive(Debug)]
pub enum Listener {
    Tcp { listener: TcpListener, tls: bool },
    Unix(UnixListener),
}

impl From<TcpListener> for Listener {
    fn from(listener: TcpListener) -> Listener {
        Listener::Tcp {
            listener,
            tls: true,
        }
    }
}

/// An accepted connection, before it is handed to a worker.
enum Accepted {
    Tcp(TcpStream, SocketAddr, bool),
    Unix(UnixStream),
}

impl Listener {
    fn poll_accept(
        &self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<Accepted>> {
        match self {
            Listener::Tcp { listener, tls } => listener
                .poll_accept(cx)
                .map_ok(|(s, peer)| Accepted::Tcp(s, peer, *tls)),
            Listener::Unix(l) => l.poll_accept(cx).map_ok(|(s, _)| Accepted::Unix(s)),
        }
    }
}

/// The next connection on any of `listeners`, taking them in turn from `start` so a busy
/// one does not starve the others.
async fn accept_any(listeners: &[Listener], start: &mut usize) -> std::io::Result<Accepted> {
    std::future::poll_fn(|cx| {
        let n = listeners.len();
        for i in 0..n {
            let k = (*start + i) % n;
            if let std::task::Poll::Ready(r) = listeners[k].poll_accept(cx) {
                *start = k + 1;
                return std::task::Poll::Ready(r);
            }
        }
        std::task::Poll::Pending
    })
    .await
}

/// [`run_on`] over several listeners: TCP ones and a UNIX socket, all served alike. Its end
/// stops every connection of `shared` (one server's state serves one run at a time; a later
/// run over the same state starts afresh).
pub async fn run_listeners(
    listeners: Vec<Listener>,
    shared: Arc<Shared>,
    shutdown: impl Future<Output = ()>,
    workers: Option<&Workers>,
) {
    shared.start_serving();
    let reclaimer = tokio::spawn(housekeeping(shared.clone()));
    tokio::pin!(shutdown);
    let mut next = 0;
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            _ = shared.shutdown.notified() => break,
            accepted = accept_any(&listeners, &mut next) => {
                let accepted = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of file descriptors and the like: memcached backs off and
                        // keeps going rather than dying.
                        tracing::warn!("accept failed: {e}");
                        let c = &shared.counters;
                        c.listen_disabled_num.fetch_add(1, Ordering::Relaxed);
                        c.listen_paused.store(true, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        c.listen_paused.store(false, Ordering::Relaxed);
                        c.time_in_listen_disabled_us.fetch_add(10_000, Ordering::Relaxed);
                        continue;
                    }
                };
                let curr = shared.counters.curr_connections.load(Ordering::Relaxed);
                if curr as usize >= shared.settings.conn_limit {
                    shared.counters.rejected_connections.fetch_add(1, Ordering::Relaxed);
                    // memcached's maxconns_fast: tell the client, then close.
                    tokio::spawn(async move {
                        let msg = b"ERROR Too many open connections\r\n";
                        let _ = match accepted {
                            Accepted::Tcp(mut s, ..) => s.write_all(msg).await,
                            Accepted::Unix(mut s) => s.write_all(msg).await,
                        };
                    });
                    continue;
                }
                let id = shared.next_id();
                shared.counters.curr_connections.fetch_add(1, Ordering::Relaxed);
                shared.counters.total_connections.fetch_add(1, Ordering::Relaxed);
                let (fd, unix) = match &accepted {
                    Accepted::Tcp(s, ..) => {
                        let _ = s.set_nodelay(true);
                        (s.as_raw_fd(), false)
                    }
                    Accepted::Unix(s) => (s.as_raw_fd(), true),
                };
                let live = Arc::new(ConnLive::new(shared.started.elapsed().as_secs(), Some(fd), unix));
                shared.conns.lock().insert(id, live.clone());
                // The socket moves to the worker's own poller: registered with the
                // acceptor's, every readiness event would cross threads.
                let moved = match accepted {
                    Accepted::Tcp(s, peer, tls) => s.into_std().map(|s| Moved::Tcp(s, peer, tls)),
                    Accepted::Unix(s) => s.into_std().map(Moved::Unix),
                };
                hand_over(moved, &shared, id, live, workers);
            }
        }
    }
    drop(listeners);
    shared.stop_connections();
    reclaimer.abort();
    let deadline = Instant::now() + Duration::from_secs(2);
    while shared.counters.curr_connections.load(Ordering::Relaxed) > 0 && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Gives an accepted connection to a worker: its loop unless it is TLS (rustls' streams are
/// tokio's) or a router's, else a task on the worker's runtime (or the caller's, without
/// workers). A router's connections run where its backend connections do, on the worker's
/// runtime (`crate::router`): a routed request then crosses no thread.
fn hand_over(
    moved: std::io::Result<Moved>,
    sh: &Arc<Shared>,
    id: u64,
    live: Arc<ConnLive>,
    workers: Option<&Workers>,
) {
    let registered = Registered { sh: sh.clone(), id };
    let Some(workers) = workers else {
        drop(tokio::spawn(connection_task(moved, registered, live)));
        return;
    };
    let (runtime, lp) = workers.pick();
    match moved {
        Ok(socket) if !is_tls(sh, &socket) && sh.router().is_none() => {
            lp.send(crate::evloop::Handoff {
                socket,
                registered,
                live,
            })
        }
        moved => drop(runtime.spawn(connection_task(moved, registered, live))),
    }
}

/// Whether a connection will speak TLS: accepted on a listener that allows it (`notls:`
/// does not, an embedder's listener does) of a server that loaded a context (`-Z`). UNIX
/// sockets are plain, as in memcached.
fn is_tls(sh: &Shared, socket: &Moved) -> bool {
    matches!(socket, Moved::Tcp(_, _, true)) && sh.tls.is_some()
}

/// Whether connections of a server with `settings` and `security` use tokio's timer: with
/// TLS (the handshake's and `close_notify`'s bounds), or in router mode (the backends'
/// timeouts and probes). Nothing else a connection does sleeps: `-o idle_timeout` is the
/// housekeeping tick's.
pub fn needs_timers(settings: &Settings, security: &Security) -> bool {
    security.tls.is_some() || settings.route.is_some()
}

/// Registers an accepted socket with the current (worker's) reactor.
fn register(moved: Moved) -> std::io::Result<Accepted> {
    Ok(match moved {
        Moved::Tcp(s, peer, tls) => Accepted::Tcp(TcpStream::from_std(s)?, peer, tls),
        Moved::Unix(s) => Accepted::Unix(UnixStream::from_std(s)?),
    })
}

/// A connection's whole life as one task: registration with the worker's reactor, then
/// [`crate::task::serve_tls`] (a TLS listener under `-Z`) or [`crate::task::serve`]; its
/// entry in `conns` and `curr_connections` are undone however the task ends (a runtime
/// shutting down drops it).
///
/// An idle connection costs what its task holds, and a future is sized for its largest
/// state: one function with no wrapper layers, and TLS (the handshake, rustls' buffers)
/// boxed, keep a plain connection's task at `task::serve`'s size.
async fn connection_task(moved: std::io::Result<Moved>, reg: Registered, live: Arc<ConnLive>) {
    let Ok(accepted) = moved.and_then(register) else {
        return;
    };
    let tls = match &accepted {
        Accepted::Tcp(_, _, true) => reg.sh.tls.clone(),
        _ => None,
    };
    match (accepted, tls) {
        (Accepted::Tcp(s, ..), Some(tls)) => Box::pin(task::serve_tls(s, tls, reg, live)).await,
        (Accepted::Tcp(s, ..), None) => task::serve(s, reg, live).await,
        (Accepted::Unix(s), _) => task::serve(s, reg, live).await,
    }
}

/// The housekeeping tick, every second: `uptime_secs`, the idle timeout, then proactive
/// reclamation of expired items and the flash tier's walk (bounded walks).
async fn housekeeping(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let secs = shared.started.elapsed().as_secs();
        shared.uptime_secs.store(secs, Ordering::Relaxed);
        close_idle(&shared, secs);
        let engine = shared.engine.clone();
        let _ = tokio::task::spawn_blocking(move || {
            engine.reclaim_expired(16);
            engine.flash_walk(16);
        })
        .await;
    }
}

/// `-o idle_timeout`: shuts the socket of each connection whose last complete request is
/// older than the timeout (memcached's `conn_timeout_thread`; a request trickled in for
/// longer counts as idle, and so does a write the client stopped reading). The connection's
/// driver then reads the end or fails its write, and closes it. A `watch` stream and a
/// connection waiting on a completion are left alone.
fn close_idle(sh: &Shared, now: u64) {
    let timeout = sh.settings.idle_timeout;
    if timeout == 0 {
        return;
    }
    for c in sh.conns.lock().values() {
        let state = c.state();
        let idle = now.saturating_sub(c.last_cmd.load(Ordering::Relaxed)) > timeout;
        if idle && !matches!(state, ConnState::Watch | ConnState::IoQueue) && c.shut_both() {
            sh.counters.idle_kicks.fetch_add(1, Ordering::Relaxed);
            // Counted once: not idle again before its driver has closed it.
            c.last_cmd.store(now, Ordering::Relaxed);
        }
    }
}

/// memcached's worker threads: each `-t` thread polls its own connections
/// ([`crate::evloop`]), each beside a single-threaded runtime for the connections that need
/// one (`in_loop`); connections are dealt round robin and stay where they land. A
/// work-stealing pool moves a busy connection's wakeups between cores and showed a worse p99
/// than memcached at `-t 2`; pinned, a connection's reads, engine calls and writes stay on
/// one core and one poller.
#[derive(Debug)]
pub struct Workers {
    handles: Vec<tokio::runtime::Handle>,
    loops: Vec<crate::evloop::Loop>,
    next: std::sync::atomic::AtomicUsize,
    stops: Vec<tokio::sync::oneshot::Sender<()>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Workers {
    /// Starts `n` (at least one) workers, with tokio's timer.
    pub fn start(n: usize) -> std::io::Result<Workers> {
        Self::start_with(n, true, crate::config::Io::default())
    }

    /// [`Workers::start`], with the timer only when `timers`. A connection needs one only
    /// for `-o idle_timeout` and for TLS's handshake and close bounds ([`needs_timers`]);
    /// without them a runtime's timer is pure cost, checked at every wake-up.
    /// Their loops wait through `io` where the kernel allows it ([`crate::config::Io::effective`]).
    pub fn start_with(n: usize, timers: bool, io: crate::config::Io) -> std::io::Result<Workers> {
        let io = io.effective();
        tracing::debug!("worker threads wait through {}", io.name());
        let mut w = Workers {
            handles: Vec::new(),
            loops: Vec::new(),
            next: Default::default(),
            stops: Vec::new(),
            threads: Vec::new(),
        };
        for i in 0..n.max(1) {
            let mut rt = tokio::runtime::Builder::new_current_thread();
            rt.enable_io();
            if timers {
                rt.enable_time();
            }
            let rt = rt.build()?;
            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
            let (lp, thread) =
                crate::evloop::Loop::start(format!("memkitd-loop-{i}"), rt.handle().clone(), io)?;
            w.loops.push(lp);
            w.threads.push(thread);
            w.handles.push(rt.handle().clone());
            w.stops.push(tx);
            w.threads.push(
                std::thread::Builder::new()
                    .name(format!("memkitd-worker-{i}"))
                    .spawn(move || {
                        crate::router::pool::set_worker(i);
                        // Tasks spawned through the handle run while this blocks; dropping
                        // the runtime afterwards cancels whatever is left.
                        let _ = rt.block_on(rx);
                    })?,
            );
        }
        Ok(w)
    }

    fn pick(&self) -> (&tokio::runtime::Handle, &crate::evloop::Loop) {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.handles.len();
        (&self.handles[i], &self.loops[i])
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for lp in &mut self.loops {
            lp.stop();
        }
        for tx in self.stops.drain(..) {
            let _ = tx.send(());
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An idle connection's memory is mostly its task, whose future is sized for its largest
    /// state: this keeps a rare path (TLS, auth, `watch`, a multi-get's parts) from growing
    /// every connection again (720 bytes in a debug build; `docs/limits.md` has the RSS
    /// figures).
    #[test]
    fn an_idle_connection_task_stays_small() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let socket = std::net::TcpStream::connect(addr).unwrap();
        let settings = crate::Settings::default();
        let sh = Shared::new(Arc::new(crate::backend::engine_for(&settings)), settings);
        let _entered = rt.enter();
        let reg = Registered { sh, id: 0 };
        let live = Arc::new(ConnLive::new(0, None, false));
        let task = connection_task(Ok(Moved::Tcp(socket, addr, false)), reg, live);
        let size = std::mem::size_of_val(&task);
        eprintln!("connection task: {size} bytes");
        assert!(size <= 760, "a connection's task holds {size} bytes");
    }
}
