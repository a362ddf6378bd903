//! memkitd as a child process: [`Launch`] (what to run) and [`Running`] (the child, its
//! standard error, signals).
//!
//! **Which binary.** `MEMKIT_MEMKITD` if set; else [`Launch::bin`]'s (memkit-server's own
//! tests pass `env!("CARGO_BIN_EXE_memkitd")`, which Cargo has just built); else, under
//! `cargo test` (`CARGO` set), `cargo build -p memkit-server --bin memkitd` once per test
//! binary, with the profile of the running test (so `cargo test -p memkit-tools` tests the
//! memkitd of this checkout, and a workspace run finds it built already), and the
//! `memkitd` beside the test's own target directory. Cargo cannot express "this crate's
//! tests need that crate's binary" without a dependency on the crate (which memkit-tools
//! must not have), hence the build.
//!
//! **Which address.** When `args` name no listener (`-p`, `-l`, `-s`), the launcher adds
//! `-p FREE -l 127.0.0.1` and, as root, `-u root` (memkitd, as memcached, refuses root
//! without `-u`), and retries with another port if memkitd exits before it is ready (another
//! process took the port). Otherwise the argv is the caller's, unchanged, and the address
//! is `-s`'s socket or 127.0.0.1:`-p`.
//!
//! **Ready.** memkitd tells `NOTIFY_SOCKET` `READY=1` once every listener accepts (the
//! store open): the launcher gives it a socket of its own and waits for that, 30 s at most.
//! A caller that sets `NOTIFY_SOCKET` itself is probed by connecting instead; one that
//! watches start-up itself asks for [`Launch::no_wait`].

use std::io::{ErrorKind, Read};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{Addr, Kind, TestServer, free_port, is_root};

/// How long a child may take to become ready or to exit.
const PATIENCE: Duration = Duration::from_secs(30);

/// The memkitd binary for tests that have no `CARGO_BIN_EXE_memkitd` (see the module notes).
pub fn memkitd_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("MEMKIT_MEMKITD") {
            return PathBuf::from(p);
        }
        // target/<profile>/deps/<test> -> target/<profile>
        let exe = std::env::current_exe().expect("the test's own path");
        let dir = exe.parent().and_then(Path::parent).expect("a target dir");
        if let Some(cargo) = std::env::var_os("CARGO") {
            let mut cmd = Command::new(cargo);
            cmd.args(["build", "-q", "-p", "memkit-server", "--bin", "memkitd"]);
            match dir.file_name().and_then(|n| n.to_str()) {
                Some("debug") | None => {}
                Some(profile) => {
                    cmd.args(["--profile", profile]);
                }
            }
            let st = cmd.status().expect("run cargo to build memkitd");
            assert!(st.success(), "cargo build -p memkit-server --bin memkitd");
        }
        let bin = dir.join("memkitd");
        assert!(
            bin.exists(),
            "no memkitd at {} (set MEMKIT_MEMKITD)",
            bin.display()
        );
        bin
    })
}

/// A caller's adjustment of the command ([`Launch::command`]).
type Setup = Box<dyn FnMut(&mut Command)>;

/// A command line for a memkitd child; [`Launch::start`] runs it.
pub struct Launch {
    bin: Option<PathBuf>,
    args: Vec<String>,
    envs: Vec<(String, String)>,
    wait: bool,
    setup: Vec<Setup>,
}

impl std::fmt::Debug for Launch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launch")
            .field("bin", &self.bin)
            .field("args", &self.args)
            .field("envs", &self.envs)
            .finish_non_exhaustive()
    }
}

impl TestServer {
    /// memkitd as a child process with `args`, once it is ready (see [`process`](self)).
    pub fn process(args: &[&str]) -> TestServer {
        Self::launch(args).start()
    }

    /// A child with `args`, to be configured before [`Launch::start`].
    pub fn launch(args: &[&str]) -> Launch {
        Launch {
            bin: None,
            args: args.iter().map(|a| a.to_string()).collect(),
            envs: Vec::new(),
            wait: true,
            setup: Vec::new(),
        }
    }
}

impl Launch {
    /// Runs this binary (unless `MEMKIT_MEMKITD` names another).
    pub fn bin(mut self, path: impl Into<PathBuf>) -> Launch {
        self.bin = Some(path.into());
        self
    }

    /// Sets an environment variable (`RUST_LOG` and `NOTIFY_SOCKET` are otherwise removed).
    pub fn env(mut self, key: &str, value: &str) -> Launch {
        self.envs.push((key.into(), value.into()));
        self
    }

    /// Returns as soon as the child is spawned.
    pub fn no_wait(mut self) -> Launch {
        self.wait = false;
        self
    }

    /// Adjusts the command before each spawn (limits, user, working directory).
    pub fn command(mut self, f: impl FnMut(&mut Command) + 'static) -> Launch {
        self.setup.push(Box::new(f));
        self
    }

    fn has(&self, flags: &[&str]) -> bool {
        self.args.iter().any(|a| {
            flags
                .iter()
                .any(|f| a == f || (f.starts_with("--") && a.starts_with(&format!("{f}="))))
        })
    }

    fn value(&self, short: &str, long: &str) -> Option<&str> {
        let mut it = self.args.iter();
        while let Some(a) = it.next() {
            if a == short || a == long {
                return it.next().map(String::as_str);
            }
            if let Some(v) = a.strip_prefix(&format!("{long}=")) {
                return Some(v);
            }
        }
        None
    }

    /// Starts the child; panics (with its standard error) if it does not become ready.
    pub fn start(mut self) -> TestServer {
        let auto = !self.has(&["-p", "--port", "-l", "--listen", "-s", "--unix-socket"]);
        let mut why = String::new();
        for _ in 0..if auto { 5 } else { 1 } {
            match self.try_start(auto.then(free_port)) {
                Ok(s) => return s,
                Err(e) => why = e,
            }
        }
        panic!("{why}")
    }

    fn try_start(&mut self, port: Option<u16>) -> Result<TestServer, String> {
        let bin = match (std::env::var_os("MEMKIT_MEMKITD"), &self.bin) {
            (None, Some(b)) => b.clone(),
            _ => memkitd_bin().to_path_buf(),
        };
        let mut cmd = Command::new(bin);
        if let Some(p) = port {
            cmd.args(["-p", &p.to_string(), "-l", "127.0.0.1"]);
            if is_root() && !self.has(&["-u", "--user"]) {
                cmd.args(["-u", "root"]);
            }
        }
        cmd.args(&self.args)
            .env_remove("RUST_LOG")
            .env_remove("NOTIFY_SOCKET");
        let own_notify = self.wait && !self.envs.iter().any(|(k, _)| k == "NOTIFY_SOCKET");
        let notify = own_notify.then(Notify::bind);
        if let Some(n) = &notify {
            cmd.env("NOTIFY_SOCKET", &n.path);
        }
        for (k, v) in &self.envs {
            cmd.env(k, v);
        }
        for f in &mut self.setup {
            f(&mut cmd);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = Running::new(cmd.spawn().expect("spawn memkitd"));
        let addr = match (self.value("-s", "--unix-socket"), port) {
            (Some(path), _) => Addr::Unix(path.into()),
            (None, Some(p)) => Addr::Tcp(([127, 0, 0, 1], p).into()),
            (None, None) => {
                let p = self.value("-p", "--port").unwrap_or("11211");
                Addr::Tcp(([127, 0, 0, 1], p.parse().expect("-p PORT")).into())
            }
        };
        let ready = match (&notify, self.wait) {
            (_, false) => true,
            (Some(n), true) => n.ready(&mut child),
            (None, true) => probe(&addr, &mut child),
        };
        if !ready {
            child.kill();
            let err = child.stderr_text();
            return Err(format!("memkitd {:?} was not ready: {err}", self.args));
        }
        Ok(TestServer {
            addr,
            kind: Kind::Process(child),
        })
    }
}

/// Connects to `addr` until it accepts, while the child lives.
fn probe(addr: &Addr, child: &mut Running) -> bool {
    let deadline = Instant::now() + PATIENCE;
    while Instant::now() < deadline && child.try_wait().is_none() {
        let ok = match addr {
            Addr::Tcp(a) => std::net::TcpStream::connect(a).is_ok(),
            Addr::Unix(p) => std::os::unix::net::UnixStream::connect(p).is_ok(),
        };
        if ok {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// A datagram socket standing in for systemd's: memkitd sends `READY=1` to it.
struct Notify {
    sock: UnixDatagram,
    path: PathBuf,
}

impl Notify {
    fn bind() -> Notify {
        static N: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "memkit-notify-{}-{}.sock",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_file(&path);
        let sock = UnixDatagram::bind(&path).expect("bind a notify socket");
        // memkitd may have given up root (`-u nobody`) before it says it is ready.
        let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666));
        sock.set_read_timeout(Some(Duration::from_millis(20)))
            .expect("socket timeout");
        Notify { sock, path }
    }

    /// Whether `READY=1` arrived before the child exited or [`PATIENCE`] ran out.
    fn ready(&self, child: &mut Running) -> bool {
        let deadline = Instant::now() + PATIENCE;
        let mut buf = [0u8; 512];
        while Instant::now() < deadline && child.try_wait().is_none() {
            match self.sock.recv(&mut buf) {
                Ok(n) if String::from_utf8_lossy(&buf[..n]).contains("READY=1") => return true,
                Ok(_) => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) => panic!("notify socket: {e}"),
            }
        }
        false
    }
}

impl Drop for Notify {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A memkitd child and what it writes to standard error (read as it comes, so a verbose
/// child never blocks on a full pipe); killed when dropped.
#[derive(Debug)]
pub struct Running {
    child: Child,
    stderr: Option<JoinHandle<Vec<u8>>>,
    status: Option<ExitStatus>,
}

impl Running {
    fn new(mut child: Child) -> Running {
        let stderr = child.stderr.take().map(|mut e| {
            std::thread::spawn(move || {
                let mut v = Vec::new();
                let _ = e.read_to_end(&mut v);
                v
            })
        });
        Running {
            child,
            stderr,
            status: None,
        }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` (unless it has exited and been reaped).
    pub fn signal(&mut self, signal: i32) {
        if self.try_wait().is_none() {
            // SAFETY: kill(2) on our own, not yet reaped, child.
            unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
        }
    }

    /// Its exit status, once it has exited.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().expect("wait for memkitd");
        }
        self.status
    }

    /// [`Running::signal`], then [`Running::wait_exit`].
    pub fn stop_with(&mut self, signal: i32) -> (ExitStatus, String) {
        self.signal(signal);
        self.wait_exit()
    }

    /// Waits (`PATIENCE` at most) for it to exit: its status and all its standard error.
    pub fn wait_exit(&mut self) -> (ExitStatus, String) {
        let deadline = Instant::now() + PATIENCE;
        let status = loop {
            if let Some(s) = self.try_wait() {
                break s;
            }
            assert!(Instant::now() < deadline, "memkitd did not exit");
            std::thread::sleep(Duration::from_millis(10));
        };
        (status, self.stderr_text())
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        if self.try_wait().is_none() {
            let _ = self.child.kill();
            self.status = self.child.wait().ok();
        }
    }

    /// Everything it wrote to standard error; call once it has exited.
    fn stderr_text(&mut self) -> String {
        let bytes = self
            .stderr
            .take()
            .map(|t| t.join().unwrap_or_default())
            .unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill();
    }
}
