//! memkitd in this process (feature `server`), laid out as the binary lays itself out: the
//! acceptor and housekeeping on a current-thread runtime of its own thread, connections on
//! `-t` pinned worker runtimes.
//!
//! memkit-server dev-depends on this crate with the feature on, so its integration tests
//! and this module share one copy of memkit-server (the same library, the same features):
//! a `Shared` from [`TestServer::shared`] is the test's own type.

use std::sync::Arc;
use std::time::{Duration, Instant};

use memkit_server::server::{Listener, Workers, run_listeners};
use memkit_server::{Args, Settings, Shared};
use tokio::sync::oneshot;

use super::{Addr, Kind, TestServer};

/// The server's thread and the means to stop it.
#[derive(Debug)]
pub(super) struct InProcess {
    shared: Arc<Shared>,
    pub(super) unix: Option<std::path::PathBuf>,
    stop: Option<oneshot::Sender<()>>,
    done: Option<oneshot::Receiver<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TestServer {
    /// memkitd in-process with memcached-style `args` (`-m 8`, `-Y FILE`, `-Z -o ...`,
    /// `--persist DIR`, `-s PATH`) on 127.0.0.1 at a free port. Returns once it listens.
    pub fn start(args: &[&str]) -> TestServer {
        Self::start_on(0, args)
    }

    /// [`TestServer::start`] on `port` (0: a free one). The bind is retried for 5 s, so a
    /// server can take the port of one just stopped.
    pub fn start_on(port: u16, args: &[&str]) -> TestServer {
        Self::start_with(port, args, true)
    }

    /// memkitd in-process as an embedder runs it without worker threads: every connection
    /// is a tokio task on the server's runtime (`memkit_server::task`), the driver TLS
    /// connections and embedders use, whatever the flags say of `-t` and `--io`.
    pub fn start_tasks(args: &[&str]) -> TestServer {
        Self::start_with(0, args, false)
    }

    fn start_with(port: u16, args: &[&str], workers: bool) -> TestServer {
        let argv = std::iter::once("memkitd").chain(args.iter().copied());
        let (settings, _) = Settings::from_args(<Args as clap::Parser>::parse_from(argv));
        let (engine, persist) = memkit_server::backend_for(&settings).expect("open the store");
        let unix = settings.unix_socket.clone();
        let unix_sock = unix.as_ref().map(|p| {
            memkit_server::bind::unix(p, settings.unix_mask, settings.backlog)
                .unwrap_or_else(|r| panic!("-s {}: {}", p.display(), r.message))
        });
        let shared = Shared::with_persist(engine, persist.map(|p| p.store), settings);
        let tcp = bind_retrying(port);
        let addr = tcp.local_addr().expect("local address");
        let (stop, stop_rx) = oneshot::channel::<()>();
        let (done_tx, done) = oneshot::channel::<()>();
        let (ready_tx, ready) = std::sync::mpsc::channel::<()>();
        let sh = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("memkitd-test-{}", addr.port()))
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                let workers = workers.then(|| {
                    Workers::start_with(sh.settings.threads, true, sh.settings.io)
                        .expect("worker threads")
                });
                rt.block_on(async {
                    let listener = tokio::net::TcpListener::from_std(tcp).expect("listener");
                    let mut listeners = vec![Listener::from(listener)];
                    if let Some(u) = unix_sock {
                        listeners.push(Listener::Unix(u.listen().expect("listen -s")));
                    }
                    let _ = ready_tx.send(());
                    let stop = async move {
                        let _ = stop_rx.await;
                    };
                    run_listeners(listeners, sh, stop, workers.as_ref()).await;
                });
                drop(workers);
                drop(rt);
                let _ = done_tx.send(());
            })
            .expect("spawn the server thread");
        // Every listener listens before the test connects (a UNIX socket is bound here but
        // listens on the server's thread).
        ready.recv().expect("the server thread starts");
        TestServer {
            addr: Addr::Tcp(addr),
            kind: Kind::InProcess(InProcess {
                shared,
                unix,
                stop: Some(stop),
                done: Some(done),
                thread: Some(thread),
            }),
        }
    }

    /// The in-process server's state (engine, counters, settings). Panics for a child.
    pub fn shared(&self) -> &Arc<Shared> {
        match &self.kind {
            Kind::InProcess(s) => &s.shared,
            Kind::Process(_) => panic!("a child process's state is not in this process"),
        }
    }

    /// Whether an in-process server's thread is still serving (it has not stopped by itself
    /// or panicked). Panics for a child.
    pub fn is_serving(&self) -> bool {
        match &self.kind {
            Kind::InProcess(s) => s.thread.as_ref().is_some_and(|t| !t.is_finished()),
            Kind::Process(_) => panic!("a child process's thread is not in this process"),
        }
    }

    /// Stops an in-process server gracefully and waits (5 s at most) until it has: its
    /// listeners closed, every connection closed, its threads gone.
    pub async fn stop(mut self) {
        let Kind::InProcess(s) = &mut self.kind else {
            return self.kill();
        };
        if let Some(tx) = s.stop.take() {
            let _ = tx.send(());
        }
        s.stopped().await;
    }

    /// Waits (5 s at most) for an in-process server to stop by itself (`shutdown` with
    /// `-A`).
    pub async fn stopped(mut self) {
        match &mut self.kind {
            Kind::InProcess(s) => s.stopped().await,
            Kind::Process(_) => panic!("an in-process server's wait"),
        }
    }
}

impl InProcess {
    async fn stopped(&mut self) {
        if let Some(done) = self.done.take() {
            tokio::time::timeout(Duration::from_secs(5), done)
                .await
                .expect("the server stops within 5 s")
                .expect("the server thread ends cleanly");
        }
        self.join();
    }

    /// Stops it from synchronous code (or a drop).
    pub(super) fn stop_blocking(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        self.join();
    }

    fn join(&mut self) {
        if let Some(t) = self.thread.take() {
            let panicked = t.join().is_err();
            // Dropping a server whose thread panicked while the test is already unwinding
            // must not panic again.
            assert!(
                !panicked || std::thread::panicking(),
                "the server thread panicked"
            );
        }
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        self.stop_blocking();
    }
}

/// 127.0.0.1:`port`, retried for 5 s while the port is still held (0 binds at once).
fn bind_retrying(port: u16) -> std::net::TcpListener {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match std::net::TcpListener::bind(("127.0.0.1", port)) {
            Ok(l) => {
                l.set_nonblocking(true).expect("nonblocking listener");
                return l;
            }
            Err(e) if Instant::now() < deadline => {
                eprintln!("binding 127.0.0.1:{port}: {e}; retrying");
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("binding 127.0.0.1:{port}: {e}"),
        }
    }
}
