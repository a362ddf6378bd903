//! Server processes for the server bench: start memcached or memkitd on a free loopback port
//! with memcached's flags, wait until it answers, and read its CPU time, RSS and `stats`
//! from `/proc` and the wire. The process is killed when the [`Server`] is dropped.

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Which server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Real memcached (the baseline).
    Memcached,
    /// memkitd.
    Memkitd,
}

impl Kind {
    /// Lower-case name, as in the tables.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Memcached => "memcached",
            Kind::Memkitd => "memkitd",
        }
    }
}

/// Settings both servers get, as memcached flags.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// `-t`.
    pub threads: usize,
    /// `-m`, MiB.
    pub memory_mb: usize,
}

/// A running server process.
#[derive(Debug)]
pub struct Server {
    /// Which server.
    pub kind: Kind,
    /// Its loopback address.
    pub addr: SocketAddr,
    child: Child,
}

/// A free loopback port (bound and released; the caller retries if someone takes it).
pub fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn euid_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

impl Server {
    /// Starts `bin` (memcached or memkitd) with `-p PORT -l 127.0.0.1 -U 0 -m M -t T -c 4096`
    /// (plus `-u root` when running as root, which both require) and waits until it answers
    /// `version`.
    pub fn start(kind: Kind, bin: &Path, spec: Spec) -> io::Result<Server> {
        let m = spec.memory_mb.to_string();
        let t = spec.threads.to_string();
        Self::start_args(kind, bin, &["-m", &m, "-t", &t, "-c", "4096"])
    }

    /// Starts `bin` with `-p PORT -l 127.0.0.1 -U 0` and `args` (plus `-u root` as root,
    /// which memcached and memkitd require) and waits until it answers `version`.
    pub fn start_args(kind: Kind, bin: &Path, args: &[&str]) -> io::Result<Server> {
        let mut last_err = None;
        for _ in 0..5 {
            let port = free_port()?;
            let mut cmd = Command::new(bin);
            cmd.args(["-p", &port.to_string(), "-l", "127.0.0.1", "-U", "0"])
                .args(args);
            if euid_is_root() {
                cmd.args(["-u", "root"]);
            }
            cmd.stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::inherit());
            let child = cmd.spawn().map_err(|e| {
                io::Error::new(e.kind(), format!("cannot start {}: {e}", bin.display()))
            })?;
            let mut server = Server {
                kind,
                addr: SocketAddr::from(([127, 0, 0, 1], port)),
                child,
            };
            match server.wait_ready(Duration::from_secs(10)) {
                Ok(()) => return Ok(server),
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err.unwrap_or_else(|| io::Error::other("server did not start")))
    }

    fn wait_ready(&mut self, limit: Duration) -> io::Result<()> {
        let until = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Err(io::Error::other(format!(
                    "{} exited at start-up: {status}",
                    self.kind.name()
                )));
            }
            if let Ok(line) = self.command_line("version\r\n")
                && line.starts_with("VERSION")
            {
                return Ok(());
            }
            if Instant::now() > until {
                return Err(io::Error::other(format!(
                    "{} did not answer on {}",
                    self.kind.name(),
                    self.addr
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn command_line(&self, cmd: &str) -> io::Result<String> {
        let mut s = TcpStream::connect_timeout(&self.addr, Duration::from_millis(500))?;
        s.set_read_timeout(Some(Duration::from_secs(2)))?;
        s.write_all(cmd.as_bytes())?;
        let mut line = String::new();
        BufReader::new(s).read_line(&mut line)?;
        Ok(line)
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// User + system CPU seconds the process has used so far (all threads).
    pub fn cpu_secs(&self) -> io::Result<f64> {
        let (user, system) = self.cpu_times()?;
        Ok(user + system)
    }

    /// (user, system) CPU seconds the process has used so far (all threads).
    pub fn cpu_times(&self) -> io::Result<(f64, f64)> {
        cpu_times_of(self.pid())
    }

    /// (VmRSS, VmHWM) in bytes.
    pub fn rss(&self) -> io::Result<(u64, u64)> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))?;
        let kb = |name: &str| {
            status
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
                * 1024
        };
        Ok((kb("VmRSS:"), kb("VmHWM:")))
    }

    /// `stats` as a name -> value map.
    pub fn stats(&self) -> io::Result<HashMap<String, String>> {
        let mut s = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1))?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        s.write_all(b"stats\r\n")?;
        let mut map = HashMap::new();
        for line in BufReader::new(s).lines() {
            let line = line?;
            let line = line.trim_end();
            if line == "END" {
                return Ok(map);
            }
            let mut parts = line.splitn(3, ' ');
            if let (Some("STAT"), Some(k), Some(v)) = (parts.next(), parts.next(), parts.next()) {
                map.insert(k.to_string(), v.to_string());
            }
        }
        Err(io::Error::other("stats: no END"))
    }

    /// One counter from `stats`, 0 if absent.
    pub fn stat_u64(&self, name: &str) -> io::Result<u64> {
        Ok(self
            .stats()?
            .get(name)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0))
    }

    /// Sends `signal` (a name `kill -s` takes, such as `USR1`) and waits up to `limit` for
    /// the process to exit.
    pub fn stop_with(
        &mut self,
        signal: &str,
        limit: Duration,
    ) -> io::Result<std::process::ExitStatus> {
        let pid = self.pid().to_string();
        let sent = Command::new("kill").args(["-s", signal, &pid]).status()?;
        if !sent.success() {
            return Err(io::Error::other(format!("kill -s {signal} {pid} failed")));
        }
        let until = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            if Instant::now() > until {
                return Err(io::Error::other(format!(
                    "{} did not exit within {limit:?} of SIG{signal}",
                    self.kind.name()
                )));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// SIGKILLs the process (by its PID, `kill(2)` straight from here: no `kill` command to
    /// spawn between the time taken and the signal) and waits for it to exit. Returns when
    /// the signal was sent.
    pub fn kill_now(&mut self) -> io::Result<Instant> {
        let at = Instant::now();
        self.child.kill()?;
        self.child.wait()?;
        Ok(at)
    }

    /// The version line (`VERSION ...`).
    pub fn version(&self) -> String {
        self.command_line("version\r\n")
            .map(|l| l.trim().trim_start_matches("VERSION ").to_string())
            .unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// (user, system) CPU seconds process `pid` has used so far (all threads), from
/// `/proc/PID/stat`.
pub fn cpu_times_of(pid: u32) -> io::Result<(f64, f64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name's closing parenthesis start at field 3 (state);
    // utime and stime are fields 14 and 15.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| io::Error::other("bad /proc stat"))?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    Ok((
        ticks(11) as f64 / clock_ticks(),
        ticks(12) as f64 / clock_ticks(),
    ))
}

/// `sysconf(_SC_CLK_TCK)` by way of `getconf`, 100 if that fails (Linux's usual value).
pub fn clock_ticks() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// This process's soft `RLIMIT_NOFILE` ("Max open files" in `/proc/self/limits`); `None`
/// when unlimited or unreadable.
pub fn open_files_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// `/proc/loadavg`'s first three fields.
pub fn loadavg() -> Option<String> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
}

/// The first `name` found on `PATH`, or in `/usr/bin`, `/usr/local/bin`.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/local/bin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Where memkitd of `profile` (`release` or `debug`) is, building it first with the cargo
/// that runs us (`$CARGO`, set by `cargo run` / `cargo test`) when there is one.
///
/// Looked for, in order: next to the running executable (and its parent, for test
/// executables in `deps/` and examples in `examples/`), `$CARGO_TARGET_DIR/<profile>`, the
/// workspace's `target/<profile>`.
pub fn locate_memkitd(profile: &str, build: bool) -> io::Result<PathBuf> {
    if build && let Some(cargo) = std::env::var_os("CARGO") {
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "-q", "-p", "memkit-server", "--bin", "memkitd"]);
        if profile == "release" {
            cmd.arg("--release");
        }
        let status = cmd.status()?;
        if !status.success() {
            return Err(io::Error::other(format!(
                "cargo build -p memkit-server failed: {status}"
            )));
        }
    }
    let mut candidates = Vec::new();
    if let Ok(exe) = std::env::current_exe()
        && let Some(dir) = exe.parent()
    {
        if dir.file_name().is_some_and(|n| n == profile) {
            candidates.push(dir.join("memkitd"));
        }
        if dir
            .file_name()
            .is_some_and(|n| n == "deps" || n == "examples")
            && let Some(up) = dir.parent()
            && up.file_name().is_some_and(|n| n == profile)
        {
            candidates.push(up.join("memkitd"));
        }
    }
    if let Some(t) = std::env::var_os("CARGO_TARGET_DIR") {
        candidates.push(PathBuf::from(t).join(profile).join("memkitd"));
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    candidates.push(workspace.join("target").join(profile).join("memkitd"));
    candidates.into_iter().find(|p| p.is_file()).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "memkitd ({profile}) not found: build it with `cargo build{} -p memkit-server`, \
                 or pass --memkitd",
                if profile == "release" {
                    " --release"
                } else {
                    ""
                }
            ),
        )
    })
}
