//! A scratch directory per test, removed when dropped.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

pub struct TempDir(pub PathBuf);

// Each test binary uses one of the constructors.
#[allow(dead_code)]
impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        Self::under(std::env::temp_dir(), tag)
    }

    /// In /dev/shm when there is one: for tests about semantics, not durability, where
    /// the fsyncs of opening and closing a store would dominate (seconds on a busy disk).
    pub fn in_memory(tag: &str) -> TempDir {
        let shm = std::path::Path::new("/dev/shm");
        Self::under(
            if shm.is_dir() {
                shm.to_path_buf()
            } else {
                std::env::temp_dir()
            },
            tag,
        )
    }

    fn under(base: PathBuf, tag: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("memkit-persist-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
