//! ASCII authentication's password file (`-Y FILE`): its entries, as memcached 1.6 reads
//! them, and the counters `stats` reports. The unauthenticated phase itself is a state of a
//! connection's session (`session::login`).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

use parking_lot::RwLock;

/// The `user:password` entries of an auth file.
#[derive(Clone, Default)]
pub struct AuthFile {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
}

impl std::fmt::Debug for AuthFile {
    // Never print passwords, not even in a debug dump of the server state.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthFile")
            .field("entries", &self.entries.len())
            .finish()
    }
}

impl AuthFile {
    /// Parses memcached's format: one `user:password` per line, the user up to the first
    /// `:`, the password up to the end of the line (`\r`, `\n` or NUL). A line without `:`
    /// (a blank line included) makes the whole file malformed, as in memcached. memcached
    /// silently keeps only the first 8 entries; memkitd keeps them all.
    pub fn parse(text: &[u8]) -> Option<AuthFile> {
        let mut entries = Vec::new();
        for line in text.split_inclusive(|&b| b == b'\n') {
            let colon = line
                .iter()
                .position(|&b| b == b':' || b == 0 || b == b'\n')?;
            if line[colon] != b':' {
                return None;
            }
            let rest = &line[colon + 1..];
            let end = rest
                .iter()
                .position(|&b| matches!(b, b'\r' | b'\n' | 0))
                .unwrap_or(rest.len());
            entries.push((line[..colon].to_vec(), rest[..end].to_vec()));
        }
        Some(AuthFile { entries })
    }

    /// Reads and parses `path`; the error is memcached's start-up message.
    pub fn load(path: &Path) -> Result<AuthFile, String> {
        let text = std::fs::read(path).map_err(|e| {
            format!(
                "Could not open authfile [{}] for reading, error {e}",
                path.display()
            )
        })?;
        AuthFile::parse(&text).ok_or_else(|| {
            format!(
                "Authfile [{}] has a malformed entry. Should be 'user:password'",
                path.display()
            )
        })
    }

    /// Whether `user` / `pass` is an entry. Every entry is compared in full, in time that
    /// depends on the lengths only, so the reply time does not tell how much of a guess
    /// was right (memcached's `safe_memcmp`).
    pub fn check(&self, user: &[u8], pass: &[u8]) -> bool {
        let mut found = false;
        for (u, p) in &self.entries {
            found |= ct_eq(u, user) & ct_eq(p, pass);
        }
        found
    }

    /// How many entries the file has.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the file has no entries (then nobody can authenticate).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The server's authentication state: the file (reloaded on SIGHUP) and the counters
/// `stats` reports as `auth_cmds` and `auth_errors`.
#[derive(Debug)]
pub struct Auth {
    path: String,
    file: RwLock<Arc<AuthFile>>,
    pub cmds: AtomicU64,
    pub errors: AtomicU64,
}

impl Auth {
    /// Loads `path`; the error is memcached's message.
    pub fn load(path: &str) -> Result<Auth, String> {
        Ok(Auth {
            file: RwLock::new(Arc::new(AuthFile::load(Path::new(path))?)),
            path: path.to_string(),
            cmds: AtomicU64::new(0),
            errors: AtomicU64::new(0),
        })
    }

    /// The file's path (`stats settings` shows it as `auth_enabled_ascii`).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Re-reads the file (memcached does this on SIGHUP). On error the old entries stay,
    /// so a half-written file cannot lock everybody out.
    pub fn reload(&self) -> Result<usize, String> {
        let f = AuthFile::load(Path::new(&self.path))?;
        let n = f.len();
        *self.file.write() = Arc::new(f);
        Ok(n)
    }

    /// An `Auth` over entries already parsed (no file to reload).
    pub fn from_file(file: AuthFile) -> Auth {
        Auth {
            path: String::new(),
            file: RwLock::new(Arc::new(file)),
            cmds: AtomicU64::new(0),
            errors: AtomicU64::new(0),
        }
    }

    /// Whether `user` / `pass` is an entry, not counted: a login to the page on the
    /// metrics address (`--dashboard-keys`), which is no memcached command.
    pub fn verify(&self, user: &[u8], pass: &[u8]) -> bool {
        self.file.read().check(user, pass)
    }

    /// Whether `user` / `pass` is an entry, counted in `auth_cmds` and `auth_errors`.
    pub fn check(&self, user: &[u8], pass: &[u8]) -> bool {
        let ok = self.file.read().check(user, pass);
        self.cmds.fetch_add(1, Relaxed);
        if !ok {
            self.errors.fetch_add(1, Relaxed);
        }
        ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_format_is_memcacheds() {
        let f = AuthFile::parse(b"a:b:c\nuser:\r\n:pw").unwrap();
        assert!(f.check(b"a", b"b:c"));
        assert!(f.check(b"user", b""));
        assert!(f.check(b"", b"pw"));
        assert!(!f.check(b"a", b"b"));
        assert!(AuthFile::parse(b"nocolon\n").is_none());
        assert!(AuthFile::parse(b"a:b\n\nc:d\n").is_none(), "blank line");
        assert!(AuthFile::parse(b"").unwrap().is_empty());
    }
}
