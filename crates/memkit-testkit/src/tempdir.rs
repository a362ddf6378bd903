//! Scratch directories for tests: [`tempdir`] and [`in_memory`], each a fresh directory of
//! its own (so tests running at once never share one), removed when dropped; [`Tmpfs`], a
//! small disk that fills.
//!
//! They are readable and searchable by every user (mode 0755, where the `tempfile` crate's
//! default is 0700): memcached reads its sasldb, and memkitd its files, after giving up
//! root to another user.

use std::fs::Permissions;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

pub use tempfile::TempDir;

/// A fresh directory `memkit-<tag>-XXXXXX` in the system's temp directory.
pub fn tempdir(tag: &str) -> TempDir {
    tempdir_in(&std::env::temp_dir(), tag)
}

/// A fresh directory in `/dev/shm` where there is one (else as [`tempdir`]): for tests
/// about semantics rather than durability, where the fsyncs of opening and closing a store
/// would dominate (seconds on a busy disk).
pub fn in_memory(tag: &str) -> TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        tempdir_in(shm, tag)
    } else {
        tempdir(tag)
    }
}

fn tempdir_in(base: &Path, tag: &str) -> TempDir {
    tempfile::Builder::new()
        .prefix(&format!("memkit-{tag}-"))
        .permissions(Permissions::from_mode(0o755))
        .tempdir_in(base)
        .unwrap_or_else(|e| panic!("a temp dir in {}: {e}", base.display()))
}

/// A tmpfs of `mb` MiB mounted at `at` (created if missing) for the value's life: a small
/// disk that fills, for tests of what a full disk does. Mounting needs root, as CI has;
/// anywhere else it panics rather than let the test skip.
#[derive(Debug)]
pub struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    pub fn mount(at: &Path, mb: u32) -> Tmpfs {
        std::fs::create_dir_all(at).expect("the mount point");
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mb}m"), "tmpfs"])
            .arg(at)
            .status()
            .expect("mount(8)");
        assert!(status.success(), "mounting a tmpfs needs root: {status}");
        Tmpfs(at.to_path_buf())
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_is_new_open_to_all_and_gone_when_dropped() {
        let (a, b) = (tempdir("t"), in_memory("t"));
        assert_ne!(a.path(), b.path());
        for d in [&a, &b] {
            let meta = std::fs::metadata(d.path()).unwrap();
            assert!(meta.is_dir());
            assert_eq!(meta.permissions().mode() & 0o777, 0o755);
            let name = d.path().file_name().unwrap().to_string_lossy().into_owned();
            assert!(name.starts_with("memkit-t-"), "{name}");
        }
        let path = a.path().to_path_buf();
        std::fs::write(path.join("f"), "x").unwrap();
        drop(a);
        assert!(!path.exists());
    }
}
