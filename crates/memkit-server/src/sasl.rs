//! SASL authentication for the binary protocol (`-S`), mechanism PLAIN, checked against a
//! password file in the format of memcached's `MEMCACHED_SASL_PWDB`.
//!
//! memcached hands SASL to Cyrus; built with `--enable-sasl-pwdb` and with that variable
//! set, Cyrus asks memcached's own callback, which reads the file on every attempt: one
//! `user:password` per line, anything after a further `:` ignored. memkitd offers PLAIN
//! only: the mechanism libmemcached, pylibmc and PHP use with a password file, and the one
//! a password file can check. Passwords never reach a log or a debug dump.
//!
//! What an unauthenticated client can make a worker thread do is bounded:
//! - the credentials: at most [`memkit_protocol::binary::MAX_SASL_DATA`] bytes, refused
//!   from the frame's header beyond (the decoder);
//! - the file: kept in memory as last read (`Pwdb`), read again only when its size,
//!   modification time or inode change, so a changed file still takes effect at the next
//!   attempt, as memcached's callback would see it, without a read per attempt;
//! - the guesses: [`FREE_FAILURES`] failed attempts in a row are checked as memcached checks
//!   them (a client that tries a wrong password, then the right one, is let in at once);
//!   after more, the connection's attempts within a backoff window ([`backoff`]: 100 ms,
//!   doubling with each further failure in a row, at most 10 s) get `AUTH_ERROR` without
//!   any password checked, counted in `auth_cmds` and `auth_errors`. Nothing waits: the
//!   window is a deadline the next attempt is compared with.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use parking_lot::Mutex;

use crate::state::Shared;

/// The reply to `SASL_LIST_MECHS`.
const MECHANISMS: &[u8] = b"PLAIN";

/// Failed attempts in a row a connection makes with no backoff, as with memcached.
pub const FREE_FAILURES: u8 = 3;
/// The backoff after the first failed attempt past [`FREE_FAILURES`], in milliseconds.
pub const BACKOFF_MS: u32 = 100;
/// The longest backoff, in milliseconds: a connection that keeps failing has one guess
/// checked in this long.
pub const MAX_BACKOFF_MS: u32 = 10_000;

/// One connection's SASL state, part of every connection's memory: 8 bytes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Session {
    /// The connection may run commands.
    pub authenticated: bool,
    /// A PLAIN exchange began without credentials and waits for them in `SASL_STEP`.
    started: bool,
    /// Failed attempts in a row (saturating): the exponent of the next backoff.
    failures: u8,
    /// Attempts before this time are refused unchecked: milliseconds since the server
    /// started, wrapping (see [`Session::backing_off`]).
    not_before: u32,
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

/// The backoff after `failures` failed attempts in a row: none for the first
/// [`FREE_FAILURES`], then [`BACKOFF_MS`] doubled per further failure, at most
/// [`MAX_BACKOFF_MS`].
pub fn backoff(failures: u8) -> u32 {
    if failures <= FREE_FAILURES {
        return 0;
    }
    let doublings = u32::from(failures - FREE_FAILURES - 1).min(16);
    (BACKOFF_MS << doublings).min(MAX_BACKOFF_MS)
}

impl Session {
    /// `SASL_LIST_MECHS`: memcached (re)starts the connection's SASL state, which logs it
    /// out, before it lists. The backoff stays: listing is no way around it.
    pub fn list_mechs(&mut self) -> &'static [u8] {
        *self = Session {
            failures: self.failures,
            not_before: self.not_before,
            ..Session::default()
        };
        MECHANISMS
    }

    /// `SASL_AUTH` (`step` false) or `SASL_STEP`, as Cyrus runs PLAIN for memcached: every
    /// attempt logs the connection out first; a mechanism name matches in any case; an
    /// `AUTH` without data continues, and the credentials come in the `STEP`; a `STEP`
    /// with no exchange under way fails. Completed attempts count in `auth_cmds`, failed
    /// ones in `auth_errors` too. Within the backoff of a failure, every attempt fails
    /// unchecked.
    pub fn auth(&mut self, sh: &Shared, step: bool, mech: &[u8], data: &[u8]) -> Outcome {
        // Truncated on purpose: the clock wraps every 49.7 days, see `backing_off`.
        let now = sh.started.elapsed().as_millis() as u32;
        self.auth_at(sh, now, step, mech, data)
    }

    /// [`Session::auth`] at `now`, milliseconds since the server started.
    fn auth_at(&mut self, sh: &Shared, now: u32, step: bool, mech: &[u8], data: &[u8]) -> Outcome {
        self.authenticated = false;
        let under_way = std::mem::take(&mut self.started);
        if self.backing_off(now) {
            sh.counters.sasl_cmds.fetch_add(1, Relaxed);
            sh.counters.sasl_errors.fetch_add(1, Relaxed);
            tracing::debug!("SASL attempt refused unchecked: too soon after a failure");
            return Outcome::Failed;
        }
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
            self.failures = 0;
            return Outcome::Authenticated;
        }
        self.failures = self.failures.saturating_add(1);
        self.not_before = now.wrapping_add(backoff(self.failures));
        sh.counters.sasl_errors.fetch_add(1, Relaxed);
        tracing::info!("SASL authentication failed");
        Outcome::Failed
    }

    /// Whether `now` is within the backoff of the last failure. The clock wraps every 49.7
    /// days, so the deadline counts as ahead of `now` by at most the longest backoff: a
    /// plain wrapping comparison would refuse a connection that comes back 24.9 to 49.7
    /// days after a failure. One that comes back a whole number of wraps later, to within
    /// its backoff, is refused once more.
    fn backing_off(&self, now: u32) -> bool {
        let ahead = self.not_before.wrapping_sub(now);
        self.failures > FREE_FAILURES && ahead != 0 && ahead <= MAX_BACKOFF_MS
    }
}

fn check(sh: &Shared, data: &[u8]) -> bool {
    sh.settings
        .sasl_pwdb
        .as_deref()
        .is_some_and(|path| check_plain(path, data))
}

/// Whether the SASL password file accepts `user` / `pass` (for the page on the metrics
/// address, `--dashboard-keys`): not counted, no backoff of a connection's.
pub fn check_password(sh: &Shared, user: &[u8], pass: &[u8]) -> bool {
    let path = sh.settings.sasl_pwdb.as_deref();
    !user.is_empty()
        && path.is_some_and(|p| Pwdb::current(p).is_some_and(|t| file_accepts(&t, user, pass)))
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
    Pwdb::current(path).is_some_and(|text| file_accepts(&text, user, pass))
}

/// The password files as last read, by path: a process-wide resource, as memcached's
/// `MEMCACHED_SASL_PWDB` is (servers in one process that name the same file share it).
static PWDBS: Mutex<Option<HashMap<String, Pwdb>>> = Mutex::new(None);

/// One password file as last read: its contents, kept as read (the lookup is
/// [`file_accepts`]'s scan, memcached's own matching, over a file of a few lines), and
/// what identified that version of the file.
struct Pwdb {
    stamp: Stamp,
    text: Arc<[u8]>,
}

/// What changes when a file is written or replaced: its size, modification time (to the
/// nanosecond the file system keeps) and inode (a file renamed over it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    len: u64,
    mtime: (i64, i64),
    inode: (u64, u64),
}

impl Stamp {
    fn of(m: &std::fs::Metadata) -> Stamp {
        Stamp {
            len: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            inode: (m.dev(), m.ino()),
        }
    }
}

impl Pwdb {
    /// The contents of the file at `path` now: the copy in memory while the file's stamp
    /// is the one it was read with, else the file read again. `None` when the file cannot
    /// be read (then nobody authenticates, as with memcached).
    fn current(path: &str) -> Option<Arc<[u8]>> {
        // Taken before the read: a change during the read leaves a newer stamp on the
        // file than the one kept, so the next attempt reads it again.
        let stamp = Stamp::of(&std::fs::metadata(path).ok()?);
        let mut files = PWDBS.lock();
        let files = files.get_or_insert_with(HashMap::new);
        if let Some(f) = files.get(path)
            && f.stamp == stamp
        {
            return Some(f.text.clone());
        }
        let text: Arc<[u8]> = std::fs::read(path).ok()?.into();
        let kept = Pwdb {
            stamp,
            text: text.clone(),
        };
        files.insert(path.to_owned(), kept);
        Some(text)
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

    /// A server with `-S` over a password file of its own (removed when dropped).
    struct Server {
        sh: Arc<Shared>,
        file: std::path::PathBuf,
    }

    impl Server {
        fn new(name: &str, users: &str) -> Server {
            let file =
                std::env::temp_dir().join(format!("memkit-sasl-{name}-{}", std::process::id()));
            std::fs::write(&file, users).unwrap();
            let argv = ["memkitd", "-S", "--sasl-pwdb", file.to_str().unwrap()];
            let (settings, _) = crate::Settings::from_args(clap::Parser::parse_from(argv));
            let sh = Shared::new(Arc::new(crate::backend::engine_for(&settings)), settings);
            Server { sh, file }
        }

        fn path(&self) -> &str {
            self.file.to_str().unwrap()
        }

        /// `auth_cmds` and `auth_errors` so far.
        fn counted(&self) -> (u64, u64) {
            let c = &self.sh.counters;
            (c.sasl_cmds.load(Relaxed), c.sasl_errors.load(Relaxed))
        }
    }

    impl Drop for Server {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.file);
        }
    }

    #[test]
    fn the_backoff_doubles_up_to_its_cap() {
        let ms: Vec<u32> = (0..=12).map(backoff).collect();
        assert_eq!(
            ms,
            [
                0, 0, 0, 0, 100, 200, 400, 800, 1600, 3200, 6400, 10_000, 10_000
            ]
        );
        assert_eq!(backoff(u8::MAX), MAX_BACKOFF_MS);
        assert!(std::mem::size_of::<Session>() <= 8);
    }

    #[test]
    fn attempts_within_the_backoff_of_a_failure_fail_unchecked() {
        let s = Server::new("backoff", "u:p\n");
        let (sh, mut c) = (&*s.sh, Session::default());
        let (wrong, right) = (&b"\0u\0q"[..], &b"\0u\0p"[..]);
        // memcached's: a few wrong guesses, each checked at once.
        for _ in 0..FREE_FAILURES {
            assert_eq!(c.auth_at(sh, 1000, false, b"PLAIN", wrong), Outcome::Failed);
        }
        assert!(!c.backing_off(1000));
        assert_eq!(c.auth_at(sh, 1000, false, b"PLAIN", wrong), Outcome::Failed);
        // The right password, too soon after one more: refused without a look, counted.
        assert_eq!(c.auth_at(sh, 1099, false, b"PLAIN", right), Outcome::Failed);
        assert_eq!(s.counted(), (5, 5));
        // Listing the mechanisms starts the exchange afresh, not the backoff.
        assert_eq!(c.list_mechs(), b"PLAIN");
        assert_eq!(c.auth_at(sh, 1099, false, b"PLAIN", b""), Outcome::Failed);
        // Refusals do not lengthen it: at its end the password is checked again.
        assert_eq!(
            c.auth_at(sh, 1100, false, b"PLAIN", right),
            Outcome::Authenticated
        );
        assert!(c.authenticated);
        assert_eq!(s.counted(), (7, 6));

        // Failures in a row double it; a success forgets them.
        let mut t = 5000;
        for _ in 0..FREE_FAILURES {
            assert_eq!(c.auth_at(sh, t, false, b"PLAIN", wrong), Outcome::Failed);
        }
        for want in [100, 200, 400, 800] {
            assert_eq!(c.auth_at(sh, t, false, b"PLAIN", wrong), Outcome::Failed);
            assert_eq!(
                c.auth_at(sh, t + want - 1, false, b"PLAIN", right),
                Outcome::Failed
            );
            t += want;
        }
        assert_eq!(
            c.auth_at(sh, t, false, b"PLAIN", right),
            Outcome::Authenticated
        );
        // A success forgot the failures: a wrong guess and the right one, at once.
        assert_eq!(c.auth_at(sh, t, false, b"PLAIN", wrong), Outcome::Failed);
        assert_eq!(
            c.auth_at(sh, t, false, b"PLAIN", right),
            Outcome::Authenticated
        );

        // Another connection has its own.
        let mut other = Session::default();
        assert_eq!(
            other.auth_at(sh, t + 100, false, b"PLAIN", wrong),
            Outcome::Failed
        );
        assert_eq!(
            c.auth_at(sh, t + 101, false, b"PLAIN", right),
            Outcome::Authenticated
        );
    }

    #[test]
    fn the_backoff_survives_the_clock_wrapping_and_ends_after_a_long_idle() {
        let s = Server::new("wrap", "u:p\n");
        let (sh, mut c) = (&*s.sh, Session::default());
        let (wrong, right) = (&b"\0u\0q"[..], &b"\0u\0p"[..]);
        for _ in 0..=FREE_FAILURES {
            assert_eq!(
                c.auth_at(sh, u32::MAX - 9, false, b"PLAIN", wrong),
                Outcome::Failed
            );
        }
        assert_eq!(c.auth_at(sh, 50, false, b"PLAIN", right), Outcome::Failed);
        assert_eq!(
            c.auth_at(sh, 90, false, b"PLAIN", right),
            Outcome::Authenticated
        );
        // 25 days after a failure, the wrapped deadline is not ahead of the clock.
        for _ in 0..=FREE_FAILURES {
            assert_eq!(c.auth_at(sh, 0, false, b"PLAIN", wrong), Outcome::Failed);
        }
        let later = 25 * 24 * 3600 * 1000;
        assert_eq!(
            c.auth_at(sh, later, false, b"PLAIN", right),
            Outcome::Authenticated
        );
    }

    /// The file is read again when it changes, and only then: contents replaced in place
    /// with the same length and modification time are not seen.
    #[test]
    fn the_password_file_is_read_again_when_it_changes_only() {
        let s = Server::new("reload", "u:old\n");
        let path = s.path();
        assert!(check_plain(path, b"\0u\0old"));
        let mtime = std::fs::metadata(path).unwrap().modified().unwrap();
        let same_stamp = |text: &str| {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
            f.write_all(text.as_bytes()).unwrap();
            f.set_modified(mtime).unwrap();
        };
        same_stamp("u:new\n");
        assert!(check_plain(path, b"\0u\0old"), "read again unchanged");
        assert!(!check_plain(path, b"\0u\0new"));
        // A new modification time, the length kept: the new password.
        let f = std::fs::File::options().write(true).open(path).unwrap();
        f.set_modified(mtime + std::time::Duration::from_secs(1))
            .unwrap();
        assert!(check_plain(path, b"\0u\0new"));
        assert!(!check_plain(path, b"\0u\0old"));
        // A new length, the modification time kept.
        std::fs::write(path, "u:newer\n").unwrap();
        let f = std::fs::File::options().write(true).open(path).unwrap();
        f.set_modified(mtime + std::time::Duration::from_secs(1))
            .unwrap();
        assert!(check_plain(path, b"\0u\0newer"));
        // Gone: nobody.
        std::fs::remove_file(path).unwrap();
        assert!(!check_plain(path, b"\0u\0newer"));
    }
}
