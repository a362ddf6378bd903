//! Real memcached as a child process, for the tests that hold memkit to the reference:
//! 127.0.0.1 on a free port, returned once it accepts, killed (by its PID) when dropped.
//!
//! Under the interop policy ([`crate::interop`]): a machine without memcached skips with a
//! note, and under `CI=true` or `MEMKIT_REQUIRE_INTEROP=1` fails. memcached being installed
//! but not starting is always a failure, never a reason to drop the memcached half of a test.
//!
//! The binary: `MEMKIT_MEMCACHED` if set, else `memcached` on `PATH`. Flags are memcached's
//! defaults plus `-l 127.0.0.1 -U 0 -p PORT` and, as root (where memcached refuses to run
//! without it), `-u nobody`; the caller's `args` come last and may add to them.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::server::{free_port, is_root, wait_for_tcp};

/// A running memcached; killed when dropped.
#[derive(Debug)]
pub struct Memcached {
    /// Its TCP port on 127.0.0.1.
    pub port: u16,
    child: Option<Child>,
}

impl Memcached {
    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("memcached is running").id()
    }

    /// Kills it (SIGKILL) and reaps it; its port is free again at once (memcached binds with
    /// SO_REUSEADDR, so [`spawn_on`] can start another there).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Memcached {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The memcached binary, or `None` (after [`crate::interop::skip`]) when there is none.
pub fn binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("MEMKIT_MEMCACHED") {
        return Some(PathBuf::from(p));
    }
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("memcached"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        crate::interop::skip("memcached");
    }
    found
}

/// memcached with `args` on a free loopback port; `None` when it is not installed (a
/// failure under CI, see the module notes).
pub fn spawn(args: &[&str]) -> Option<Memcached> {
    spawn_on(free_port(), args)
}

/// [`spawn`] on `port` (the port of one just killed, say).
pub fn spawn_on(port: u16, args: &[&str]) -> Option<Memcached> {
    spawn_env(port, args, &[])
}

/// [`spawn_on`] with environment variables (`SASL_CONF_PATH` for `-S`, say).
pub fn spawn_env(port: u16, args: &[&str], env: &[(&str, &str)]) -> Option<Memcached> {
    let bin = binary()?;
    let mut cmd = Command::new(&bin);
    cmd.envs(env.iter().copied());
    cmd.args(["-l", "127.0.0.1", "-U", "0", "-p", &port.to_string()]);
    if is_root() {
        cmd.args(["-u", "nobody"]);
    }
    let child = cmd
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{} is there but did not start: {e}", bin.display()));
    let mut m = Memcached {
        port,
        child: Some(child),
    };
    let up = wait_for_tcp(port, Duration::from_secs(10), || {
        m.child
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
    });
    assert!(up, "memcached {args:?} did not start on 127.0.0.1:{port}");
    Some(m)
}

/// memcached `-S` with `users` (name, password). Debian's memcached is built without pwdb
/// support, so the users go in a Cyrus sasldb written by `saslpasswd2` into `dir`, filed
/// under the host name (memcached passes `gethostname()` as the realm), and named by
/// `dir/memcached.conf` through `SASL_CONF_PATH`, as `tests/interop/mksasl.py` does. `None`
/// (after [`crate::interop::skip`]) when memcached, `saslpasswd2` (Debian `sasl2-bin`) or
/// the PLAIN plugin (`libsasl2-modules`) is missing.
pub fn spawn_sasl(dir: &std::path::Path, users: &[(&str, &str)]) -> Option<Memcached> {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    binary()?;
    let Some(saslpasswd2) = ["/usr/sbin/saslpasswd2", "/usr/bin/saslpasswd2"]
        .into_iter()
        .find(|p| Path::new(p).exists())
    else {
        crate::interop::skip("saslpasswd2 (Debian package sasl2-bin)");
        return None;
    };
    let plugin = [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib",
    ]
    .iter()
    .any(|d| Path::new(d).join("sasl2/libplain.so.2").exists());
    if !plugin {
        crate::interop::skip("the Cyrus SASL PLAIN plugin (Debian package libsasl2-modules)");
        return None;
    }
    let db = dir.join("sasldb2");
    let realm = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("host name");
    for (user, password) in users {
        let mut p = Command::new(saslpasswd2)
            .args(["-p", "-c", "-a", "memcached", "-u", realm.trim(), "-f"])
            .arg(&db)
            .arg(user)
            .stdin(Stdio::piped())
            .spawn()
            .expect("run saslpasswd2");
        p.stdin
            .take()
            .expect("stdin")
            .write_all(password.as_bytes())
            .expect("write the password");
        assert!(
            p.wait().expect("saslpasswd2").success(),
            "saslpasswd2 {user}"
        );
    }
    // memcached reads the sasldb after it has become `nobody`.
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    std::fs::write(
        dir.join("memcached.conf"),
        format!("mech_list: plain\nsasldb_path: {}\n", db.display()),
    )
    .expect("write memcached.conf");
    let conf = dir.to_string_lossy();
    spawn_env(free_port(), &["-S"], &[("SASL_CONF_PATH", &conf)])
}
