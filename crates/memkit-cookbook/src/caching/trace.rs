//! The per-key debug trace (seed 003, "Отладка проектов, использующих memcached"): one
//! letter per logical action on a cache, appended to a file per key or key group, so that
//! `tail -f` shows a cache's life live in production without slowing it down:
//!
//! ```text
//! MLWUHHHHHHHHHHHHHHHMLLHHHHHHHHHH
//! ```
//!
//! # The trace file format (`memkit-trace`, version 1)
//!
//! A trace file is a stream of single ASCII bytes, appended with `O_APPEND` (one `write` per
//! letter, so several processes may share a file and no letter is torn). No header, no
//! separators: exactly what the seed shows.
//!
//! | byte | meaning |
//! |------|---------|
//! | `M` | miss: the cache was absent, expired (soft or hard), tag-invalidated, or undecodable |
//! | `L` | a lock attempt (rebuild lock `add`, or a lease read `mg ... N R` that may win) |
//! | `W` | write: the loader ran and the new value was stored (not when the store failed, or a lease's store was refused because the item changed during the load) |
//! | `U` | unlock: the rebuild lock (or lease) was released |
//! | `H` | hit: a fresh value was returned from the cache |
//! | `S` | stale: a stale value was served (memkit extension) |
//! | `E` | the loader failed (memkit extension) |
//!
//! Readers (`memkit trace FILE`) must ignore any other byte (a human may add newlines) and
//! may show unknown letters as they are. A file traces one key, or a group of keys whose
//! letters interleave in the order the actions happened. Reading the seed's line: the cache
//! was missing (`M`), we locked (`L`), built it (`W`), unlocked (`U`), then 15 hits; then it
//! went stale (`M`), our lock attempt failed twice (`LL`) while someone else rebuilt it, and
//! we read their value (`H`).
//!
//! The same events go to [`tracing`] (target `memkit::cache`, level `TRACE`) through
//! [`TracingTrace`], inside the span `fetch` (fields `key`, `source`) that
//! [`Cache::fetch`](super::Cache::fetch) opens per call, and are counted per cache in
//! [`CacheStats`](super::CacheStats).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// One traced action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Letter {
    /// `M`: absent, expired, tag-invalidated or undecodable.
    Miss,
    /// `L`: an attempt to take the rebuild lock or lease.
    Lock,
    /// `W`: the loader ran and the value was stored (traced only when the store succeeded).
    Write,
    /// `U`: the lock or lease was released.
    Unlock,
    /// `H`: a fresh value was served from the cache.
    Hit,
    /// `S`: a stale value was served.
    Stale,
    /// `E`: the loader failed.
    Error,
}

impl Letter {
    /// The byte written to a trace file.
    pub fn as_byte(self) -> u8 {
        match self {
            Letter::Miss => b'M',
            Letter::Lock => b'L',
            Letter::Write => b'W',
            Letter::Unlock => b'U',
            Letter::Hit => b'H',
            Letter::Stale => b'S',
            Letter::Error => b'E',
        }
    }

    /// The letter for a trace-file byte, `None` for bytes readers skip.
    pub fn from_byte(b: u8) -> Option<Letter> {
        Some(match b {
            b'M' => Letter::Miss,
            b'L' => Letter::Lock,
            b'W' => Letter::Write,
            b'U' => Letter::Unlock,
            b'H' => Letter::Hit,
            b'S' => Letter::Stale,
            b'E' => Letter::Error,
            _ => return None,
        })
    }
}

/// Where trace letters go. Implementations must be cheap: they run on the request path.
pub trait TraceSink: Send + Sync + std::fmt::Debug {
    /// Records that `letter` happened to the cache `key`.
    fn record(&self, key: &str, letter: Letter);
}

type Route = dyn Fn(&str) -> Option<String> + Send + Sync;

/// Appends letters to files in a directory: one file per key, or per group as a routing
/// function decides (`None`: this key is not traced).
pub struct FileTrace {
    dir: PathBuf,
    route: Box<Route>,
    files: Mutex<HashMap<String, File>>,
}

impl std::fmt::Debug for FileTrace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileTrace")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// The most files a [`FileTrace`] keeps open; past it, it closes them all and reopens lazily.
const MAX_OPEN: usize = 256;

impl FileTrace {
    /// Traces the keys for which `route` returns a file name (sanitized: bytes outside
    /// `[A-Za-z0-9._-]` become `_`, and `.trace` is appended) into `dir`.
    pub fn new(
        dir: impl Into<PathBuf>,
        route: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        FileTrace {
            dir: dir.into(),
            route: Box::new(route),
            files: Mutex::new(HashMap::new()),
        }
    }

    /// Traces exactly the keys in `keys`, one file each.
    pub fn keys(dir: impl Into<PathBuf>, keys: &[&str]) -> Self {
        let set: std::collections::HashSet<String> = keys.iter().map(|k| k.to_string()).collect();
        Self::new(dir, move |k| set.contains(k).then(|| k.to_owned()))
    }

    /// Traces every key that starts with `prefix` into one group file `group`.
    pub fn prefix_group(dir: impl Into<PathBuf>, prefix: &str, group: &str) -> Self {
        let (prefix, group) = (prefix.to_owned(), group.to_owned());
        Self::new(dir, move |k| k.starts_with(&prefix).then(|| group.clone()))
    }

    /// The file a key's letters go to, if it is traced.
    pub fn path_for(&self, key: &str) -> Option<PathBuf> {
        (self.route)(key).map(|name| self.dir.join(file_name(&name)))
    }
}

fn file_name(name: &str) -> String {
    let mut s: String = name
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_' {
                b as char
            } else {
                '_'
            }
        })
        .take(200)
        .collect();
    if s.starts_with('.') {
        s.insert(0, '_');
    }
    s.push_str(".trace");
    s
}

impl TraceSink for FileTrace {
    fn record(&self, key: &str, letter: Letter) {
        let Some(name) = (self.route)(key) else {
            return;
        };
        let mut files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        if !files.contains_key(&name) {
            if files.len() >= MAX_OPEN {
                files.clear();
            }
            let path = self.dir.join(file_name(&name));
            match OpenOptions::new().create(true).append(true).open(&path) {
                Ok(f) => {
                    files.insert(name.clone(), f);
                }
                Err(e) => {
                    tracing::warn!(target: "memkit::cache", path = %path.display(), error = %e, "trace file");
                    return;
                }
            }
        }
        if let Some(f) = files.get_mut(&name) {
            // Debugging aid: a failed write must never fail the request.
            let _ = f.write_all(&[letter.as_byte()]);
        }
    }
}

/// Keeps letters in memory, per key: for tests and for a debug endpoint.
#[derive(Debug, Default)]
pub struct MemoryTrace {
    letters: Mutex<HashMap<String, String>>,
}

impl MemoryTrace {
    /// An empty trace.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// The letters recorded for `key`, in order.
    pub fn letters(&self, key: &str) -> String {
        self.letters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .cloned()
            .unwrap_or_default()
    }

    /// Forgets everything recorded.
    pub fn clear(&self) {
        self.letters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

impl TraceSink for MemoryTrace {
    fn record(&self, key: &str, letter: Letter) {
        self.letters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key.to_owned())
            .or_default()
            .push(letter.as_byte() as char);
    }
}

/// Sends each letter to [`tracing`] as a `TRACE` event of target `memkit::cache` with the
/// fields `key` and `letter`, for metrics pipelines built on tracing subscribers.
#[derive(Debug, Default, Clone, Copy)]
pub struct TracingTrace;

impl TraceSink for TracingTrace {
    fn record(&self, key: &str, letter: Letter) {
        tracing::trace!(target: "memkit::cache", key, letter = %(letter.as_byte() as char));
    }
}

/// Several sinks at once (e.g. a file for `tail -f` and tracing for metrics).
#[derive(Debug, Default)]
pub struct Tee(pub Vec<Arc<dyn TraceSink>>);

impl TraceSink for Tee {
    fn record(&self, key: &str, letter: Letter) {
        for s in &self.0 {
            s.record(key, letter);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letters_round_trip() {
        for l in [
            Letter::Miss,
            Letter::Lock,
            Letter::Write,
            Letter::Unlock,
            Letter::Hit,
            Letter::Stale,
            Letter::Error,
        ] {
            assert_eq!(Letter::from_byte(l.as_byte()), Some(l));
        }
        assert_eq!(Letter::from_byte(b'\n'), None);
    }

    #[test]
    fn file_trace_appends_per_route() {
        let dir = std::env::temp_dir().join(format!("memkit-trace-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let t = FileTrace::prefix_group(&dir, "posts:", "posts");
        t.record("posts:1", Letter::Miss);
        t.record("users:1", Letter::Miss);
        t.record("posts:2", Letter::Hit);
        let path = t.path_for("posts:9").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "MH");
        assert!(t.path_for("users:1").is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
