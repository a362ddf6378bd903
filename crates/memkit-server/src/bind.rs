//! Binding memcached's listeners: every address of every `-l` item (a name may resolve to
//! several, IPv6 ones bound IPv6-only as memcached does, so `-l 0.0.0.0,::` binds both), or
//! the `-s` UNIX socket with `-a`'s permissions. Done before the runtime starts (and, for
//! TCP, before root is given up, so ports below 1024 work), with memcached's messages.
//!
//! Binding and listening are two steps: a socket is bound here (so a port in use, a bad
//! address or a missing directory is refused at once, as memcached refuses it), and listens
//! only when [`Tcp::listen`] / [`Unix::listen`] are called, once the store can answer. Until
//! then a client's connect is refused outright rather than accepted into a backlog nobody
//! serves, so a TCP readiness probe is truthful while `--persist` recovers.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::path::Path;

use crate::config::listen::{self, ListenSpec};
use crate::config::{EX_OSERR, Refusal, Settings};
use crate::process::strerror;

/// A bound TCP socket, not yet listening, and whether TLS applies to it.
#[derive(Debug)]
pub struct Tcp {
    socket: tokio::net::TcpSocket,
    backlog: u32,
    /// memcached's last line if listening fails ("failed to listen on ...").
    what: String,
    pub tls: bool,
}

impl Tcp {
    /// listen(2) with `-b`'s backlog, registered with the current runtime; `Err` is
    /// memcached's exit status and lines for a failed listen().
    pub fn listen(self) -> Result<tokio::net::TcpListener, Refusal> {
        self.socket.listen(self.backlog).map_err(|e| {
            let e = strerror(&e);
            Refusal::new(EX_OSERR, format!("listen(): {e}\n{}: {e}", self.what))
        })
    }
}

/// The bound `-s` socket, not yet listening.
#[derive(Debug)]
pub struct Unix {
    socket: tokio::net::UnixSocket,
    backlog: u32,
    path: std::path::PathBuf,
}

impl Unix {
    /// listen(2) with `-b`'s backlog, registered with the current runtime.
    pub fn listen(self) -> Result<tokio::net::UnixListener, Refusal> {
        self.socket.listen(self.backlog).map_err(|e| {
            let e = strerror(&e);
            let path = self.path.display();
            Refusal::new(
                EX_OSERR,
                format!("listen(): {e}\nfailed to listen on UNIX socket: {path}: {e}"),
            )
        })
    }
}

/// Binds every `-l` address on the settings' port(s). `Err` is memcached's exit status and
/// its lines (the cause, then "failed to listen on ...").
pub fn tcp(s: &Settings) -> Result<Vec<Tcp>, Refusal> {
    let inter = s.listen.join(",");
    let what = if s.listen_default {
        format!("failed to listen on TCP port {}", s.port)
    } else {
        format!("failed to listen on one of interface(s) {inter}")
    };
    let fail = |cause: Option<String>, e: &io::Error| {
        let last = format!("{what}: {}", strerror(e));
        let msg = match cause {
            // memcached prints this one cause without its line end.
            Some(c) if c.starts_with("Invalid IPV6 address") => format!("{c}{last}"),
            Some(c) => format!("{c}\n{last}"),
            None => last,
        };
        Refusal::new(EX_OSERR, msg)
    };
    let specs = listen::parse(&inter, s.port, s.ssl.enabled)
        .map_err(|c| fail(Some(c), &io::Error::from_raw_os_error(0)))?;
    let mut out = Vec::new();
    for spec in &specs {
        if spec.protocol.is_some_and(|p| p != s.protocol) {
            tracing::warn!(
                "-l proto[...]: per-listener protocols are not supported; -B applies to every \
                 listener"
            );
        }
        let addrs = resolve(spec).map_err(|e| {
            let msg = e.to_string();
            let msg = msg
                .strip_prefix("failed to lookup address information: ")
                .unwrap_or(&msg);
            fail(
                Some(format!("getaddrinfo(): {msg}")),
                &io::Error::from_raw_os_error(0),
            )
        })?;
        let mut bound = 0;
        for addr in addrs {
            match bind_one(addr) {
                Ok(socket) => {
                    bound += 1;
                    out.push(Tcp {
                        socket,
                        backlog: s.backlog,
                        what: what.clone(),
                        tls: spec.tls,
                    });
                }
                // memcached skips an address in use, as long as another one binds.
                Err(e) if e.kind() == io::ErrorKind::AddrInUse => {}
                Err(e) => return Err(fail(Some(format!("bind(): {}", strerror(&e))), &e)),
            }
        }
        if bound == 0 {
            return Err(fail(None, &io::Error::from_raw_os_error(libc::EADDRINUSE)));
        }
    }
    Ok(out)
}

/// The addresses of one `-l` item: `*` is every IPv4 and IPv6 interface.
fn resolve(spec: &ListenSpec) -> io::Result<Vec<SocketAddr>> {
    match &spec.host {
        None => Ok(vec![
            SocketAddr::from(([0, 0, 0, 0], spec.port)),
            SocketAddr::from(([0u16; 8], spec.port)),
        ]),
        Some(h) => Ok((h.as_str(), spec.port).to_socket_addrs()?.collect()),
    }
}

/// One bound socket with memcached's options: SO_REUSEADDR, IPV6_V6ONLY.
fn bind_one(addr: SocketAddr) -> io::Result<tokio::net::TcpSocket> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        let s = tokio::net::TcpSocket::new_v6()?;
        let on: libc::c_int = 1;
        // SAFETY: a valid socket and an int option of the right size.
        let rc = unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::IPPROTO_IPV6,
                libc::IPV6_V6ONLY,
                (&on as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        s
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    Ok(socket)
}

/// `-s PATH` with `-a MASK`: a stale socket file at PATH is removed first, and the socket is
/// created with exactly MASK's permissions (through the umask, as memcached does). Bound,
/// not yet listening: see [`Unix::listen`].
pub fn unix(path: &Path, mask: u32, backlog: u32) -> Result<Unix, Refusal> {
    use std::os::unix::fs::FileTypeExt;
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()) {
        let _ = std::fs::remove_file(path);
    }
    let fail = |cause: &str, e: &io::Error| {
        Refusal::new(
            EX_OSERR,
            format!(
                "{cause}: {}\nfailed to listen on UNIX socket: {}: {}",
                strerror(e),
                path.display(),
                strerror(e)
            ),
        )
    };
    let socket = tokio::net::UnixSocket::new_stream().map_err(|e| fail("socket()", &e))?;
    // SAFETY: umask only swaps the process's mask; no thread creates files meanwhile.
    let old = unsafe { libc::umask(!(mask & 0o777) & 0o777) };
    let bound = socket.bind(path);
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    bound.map_err(|e| fail("bind()", &e))?;
    Ok(Unix {
        socket,
        backlog,
        path: path.to_path_buf(),
    })
}
