//! SASL authentication for the binary protocol (`-S`), mechanism PLAIN, checked against a
//! password file in the format of memcached's `MEMCACHED_SASL_PWDB`.
//!
//! memcached hands SASL to Cyrus; built with `--enable-sasl-pwdb` and with that variable
//! set, Cyrus asks memcached's own callback, which reads the file on every attempt: one
//! `user:password` per line, anything after a further `:` ignored. memkitd does the same
//! (so a changed file takes effect at the next attempt, with no signal) and offers PLAIN
//! only: the mechanism libmemcached, pylibmc and PHP use with a password file, and the one
//! a password file can check. Passwords never reach a log or a debug dump.

use std::sync::atomic::Ordering::Relaxed;

use crate::state::Shared;

/// The reply to `SASL_LIST_MECHS`.
const MECHANISMS: &[u8] = b"PLAIN";

/// One connection's SASL state.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Session {
    /// The connection may run commands.
    pub authenticated: bool,
    /// A PLAIN exchange began without credentials and waits for them in `SASL_STEP`.
    started: bool,
}

/// What a `SASL_AUTH` or `SASL_STEP` came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// `Authenticated`.
    Authenticated,
    /// `AUTH_CONTINUE`: send the credentials in a `SASL_STEP`.
    Continue,
    /// `AUTH_ERROR`.
    Failed,
}

impl Session {
    /// `SASL_LIST_MECHS`: memcached (re)starts the connection's SASL state, which logs it
    /// out, before it lists.
    pub fn list_mechs(&mut self) -> &'static [u8] {
        *self = Session::default();
        MECHANISMS
    }

    /// `SASL_AUTH` (`step` false) or `SASL_STEP`, as Cyrus runs PLAIN for memcached: every
    /// attempt logs the connection out first; a mechanism name matches in any case; an
    /// `AUTH` without data continues, and the credentials come in the `STEP`; a `STEP`
    /// with no exchange under way fails. Completed attempts count in `auth_cmds`, failed
    /// ones in `auth_errors` too.
    pub fn auth(&mut self, sh: &Shared, step: bool, mech: &[u8], data: &[u8]) -> Outcome {
        self.authenticated = false;
        let under_way = std::mem::take(&mut self.started);
        let ok = if step {
            under_way && check(sh, data)
        } else if !mech.eq_ignore_ascii_case(MECHANISMS) {
            false
        } else if data.is_empty() {
            self.started = true;
            return Outcome::Continue;
        } else {
            check(sh, data)
        };
        sh.counters.sasl_cmds.fetch_add(1, Relaxed);
        if ok {
            self.authenticated = true;
            return Outcome::Authenticated;
        }
        sh.counters.sasl_errors.fetch_add(1, Relaxed);
        tracing::info!("SASL authentication failed");
        Outcome::Failed
    }
}

fn check(sh: &Shared, data: &[u8]) -> bool {
    sh.settings
        .sasl_pwdb
        .as_deref()
        .is_some_and(|path| check_plain(path, data))
}

/// PLAIN's message is `authzid NUL authcid NUL password` (RFC 4616); an authorization
/// identity other than the user's own is refused, as Cyrus refuses it by default.
fn check_plain(path: &str, data: &[u8]) -> bool {
    let mut parts = data.splitn(3, |&b| b == 0);
    let (Some(authz), Some(user), Some(pass)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    if user.is_empty() || (!authz.is_empty() && authz != user) {
        return false;
    }
    match std::fs::read(path) {
        Ok(text) => file_accepts(&text, user, pass),
        Err(_) => false,
    }
}

/// memcached's `sasl_server_userdb_checkpass`: the first line for `user` decides; its
/// password ends at a `:`, the end of the line, or a NUL.
fn file_accepts(text: &[u8], user: &[u8], pass: &[u8]) -> bool {
    for line in text.split(|&b| b == b'\n') {
        let Some(rest) = line.strip_prefix(user).and_then(|r| r.strip_prefix(b":")) else {
            continue;
        };
        let end = rest
            .iter()
            .position(|&b| matches!(b, b':' | b'\r' | 0))
            .unwrap_or(rest.len());
        return ct_eq(&rest[..end], pass);
    }
    false
}

/// Equality in time that depends on the lengths only.
fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_line_for_a_user_decides_and_extra_fields_are_ignored() {
        let file = b"alice:secret:extra\r\nbob:pw\nalice:other\n";
        assert!(file_accepts(file, b"alice", b"secret"));
        assert!(!file_accepts(file, b"alice", b"other"));
        assert!(!file_accepts(file, b"alice", b"secre"));
        assert!(file_accepts(file, b"bob", b"pw"));
        assert!(!file_accepts(file, b"bo", b"pw"));
        assert!(!file_accepts(file, b"carol", b""));
    }

    #[test]
    fn plain_messages_are_split_at_nul() {
        let dir = std::env::temp_dir().join(format!("memkit-sasl-{}", std::process::id()));
        std::fs::write(&dir, "u:p\n").unwrap();
        let path = dir.to_str().unwrap();
        assert!(check_plain(path, b"\0u\0p"));
        assert!(check_plain(path, b"u\0u\0p"));
        assert!(!check_plain(path, b"admin\0u\0p"));
        assert!(!check_plain(path, b"\0u\0q"));
        assert!(!check_plain(path, b"u\0p"));
        std::fs::remove_file(&dir).unwrap();
    }
}
