//! Free-space admission: refuse new data while the filesystem is nearly full, so that fjall
//! itself never meets ENOSPC.
//!
//! Why not just let the write fail: fjall treats any failed journal write, and any failed
//! background flush or compaction, as fatal — it poisons the database and every later
//! write fails until the process reopens it. A full disk would then need a restart even
//! after space is freed, and a flush that fails mid-group leaves writes visible that never
//! became durable. Keeping `reserve` bytes free for fjall's own work (journal appends
//! already accepted, memtable flushes, compactions) turns "disk full" into an ordinary,
//! recoverable refusal: new data gets `SERVER_ERROR out of disk space storing object`,
//! reads and deletes keep working, and writes resume by themselves once space is back.
//!
//! statvfs(2) is asked at most once per [`CHECK_BYTES`] written or [`CHECK_MS`] elapsed
//! while space is fine, and on every refused write once it is low (refusals are cheap next
//! to the clients retrying them, and this notices freed space at once).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::time::Instant;

/// Re-check free space after this many bytes were written since the last check. Must stay
/// well below any sensible reserve: it is how far writes can eat into it unseen.
pub const CHECK_BYTES: u64 = 1 << 20;
/// Re-check after this long (other processes and compactions use space too).
pub const CHECK_MS: u64 = 100;

/// The free-space guard of one store directory.
#[derive(Debug)]
pub(crate) struct Space {
    dir: PathBuf,
    /// Refuse new data once fewer bytes than this are free; 0 disables the guard.
    pub reserve: u64,
    low: AtomicBool,
    checked_bytes: AtomicU64,
    checked_ms: AtomicU64,
    /// The last free-space figure seen (for `stats`).
    pub free: AtomicU64,
    base: Instant,
}

/// Bytes available to an unprivileged writer on the filesystem holding `dir`.
pub fn free_bytes(dir: &std::path::Path) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: a statvfs is integers only: all zeroes is a valid value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path and `st` a writable statvfs buffer.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    #[allow(clippy::unnecessary_cast)] // the field types differ between platforms
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}

impl Space {
    pub fn new(dir: PathBuf, reserve: u64) -> Space {
        let s = Space {
            dir,
            reserve,
            low: AtomicBool::new(false),
            checked_bytes: AtomicU64::new(0),
            checked_ms: AtomicU64::new(0),
            free: AtomicU64::new(0),
            base: Instant::now(),
        };
        s.check(0);
        s
    }

    fn check(&self, written: u64) -> bool {
        self.checked_bytes.store(written, Relaxed);
        self.checked_ms
            .store(self.base.elapsed().as_millis() as u64, Relaxed);
        // If statvfs itself fails, let the write try: fjall reports a real failure.
        let free = free_bytes(&self.dir).unwrap_or(u64::MAX);
        self.free.store(free, Relaxed);
        let low = free < self.reserve;
        self.low.store(low, Relaxed);
        low
    }

    /// Whether new data must be refused, `written` being the store's running byte count.
    pub fn low(&self, written: u64) -> bool {
        if self.reserve == 0 {
            return false;
        }
        if self.low.load(Relaxed) {
            return self.check(written);
        }
        if written.wrapping_sub(self.checked_bytes.load(Relaxed)) >= CHECK_BYTES
            || (self.base.elapsed().as_millis() as u64).wrapping_sub(self.checked_ms.load(Relaxed))
                >= CHECK_MS
        {
            return self.check(written);
        }
        false
    }

    /// Whether the last check found space low (for `stats`).
    pub fn is_low(&self) -> bool {
        self.low.load(Relaxed)
    }
}
