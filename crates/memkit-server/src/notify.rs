//! systemd's readiness protocol (`sd_notify(3)`), for `Type=notify` units: when the service
//! manager sets `NOTIFY_SOCKET`, memkitd sends `READY=1` there once its listeners accept and
//! the store answers. The protocol is one datagram on a UNIX socket (a path, or an abstract
//! name written with a leading `@`), so it is written here rather than taken from a crate.
//! Without `NOTIFY_SOCKET` nothing is sent.

use std::io;
use std::os::unix::net::UnixDatagram;

/// Sends `state` (newline-separated `KEY=VALUE` assignments) to `$NOTIFY_SOCKET`; `Ok(false)`
/// when the variable is not set.
pub fn send(state: &str) -> io::Result<bool> {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return Ok(false);
    };
    let sock = UnixDatagram::unbound()?;
    let bytes = std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str());
    match bytes.strip_prefix(b"@") {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
            sock.send_to_addr(state.as_bytes(), &addr)?;
        }
        None => {
            sock.send_to(state.as_bytes(), &path)?;
        }
    }
    Ok(true)
}

/// `READY=1`: the listeners accept and the store answers. A failure to tell is logged, not
/// fatal (systemd then times the start out, which says more than an exit here would).
pub fn ready() {
    let state = format!(
        "READY=1\nMAINPID={}\nSTATUS=accepting connections",
        std::process::id()
    );
    match send(&state) {
        Ok(true) => tracing::debug!("told the service manager: ready"),
        Ok(false) => {}
        Err(e) => tracing::warn!("NOTIFY_SOCKET: cannot send READY=1: {e}"),
    }
}
