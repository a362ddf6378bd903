//! The figures of the memkitd process for `/metrics`, measured when scraped.
//!
//! CPU time comes from `getrusage(RUSAGE_SELF)`, as memcached's `rusage_user` and
//! `rusage_system` do (exact microseconds, where `/proc/self/stat` counts clock ticks).
//! Resident memory is the current RSS from `/proc/self/statm` (`getrusage`'s `ru_maxrss` is
//! the peak, which never goes down); open descriptors are the entries of `/proc/self/fd`.
//! The start time is the scrape time less `stats uptime`'s clock, so the two agree.

use std::time::{SystemTime, UNIX_EPOCH};

use memkit_metrics::ProcessFigures;

use crate::state::Shared;

/// The figures now, for the server `sh`.
pub fn now(sh: &Shared) -> ProcessFigures {
    let mut p = current();
    let uptime = sh.started.elapsed();
    p.start_time_seconds = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .ok()
        .map(|t| t.saturating_sub(uptime).as_secs_f64());
    p
}

/// The figures of this process now, except its start time (which needs the server's clock).
pub fn current() -> ProcessFigures {
    let statm = std::fs::read_to_string("/proc/self/statm").ok();
    let pages = |i: usize| -> Option<u64> {
        let n: u64 = statm.as_deref()?.split_whitespace().nth(i)?.parse().ok()?;
        Some(n * page_size()?)
    };
    ProcessFigures {
        cpu_seconds: cpu_seconds(),
        resident_bytes: pages(1),
        virtual_bytes: pages(0),
        open_fds: open_fds(),
        max_fds: max_fds(),
        start_time_seconds: None,
    }
}

/// User plus system CPU time of the whole process (every thread), in seconds.
pub fn cpu_seconds() -> Option<f64> {
    // SAFETY: an rusage is integers only: all zeroes is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct it is given and reads nothing else.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return None;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some(secs(ru.ru_utime) + secs(ru.ru_stime))
}

fn page_size() -> Option<u64> {
    // SAFETY: sysconf reads a constant of the system.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(n).ok().filter(|&n| n > 0)
}

/// Open descriptors: `/proc/self/fd`'s entries less the one reading the directory opens.
pub fn open_fds() -> Option<u64> {
    let n = std::fs::read_dir("/proc/self/fd").ok()?.count() as u64;
    Some(n.saturating_sub(1))
}

/// The soft `RLIMIT_NOFILE` (what `-c` raised it to); none when unlimited.
fn max_fds() -> Option<u64> {
    // SAFETY: an rlimit is integers only: all zeroes is a valid value.
    let mut r: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: getrlimit fills the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return None;
    }
    (r.rlim_cur != libc::RLIM_INFINITY).then_some(r.rlim_cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The figures move with what the process does: CPU after work, descriptors after
    /// opening sockets, resident memory after touching pages.
    #[test]
    fn figures_are_real() {
        let before = current();
        let cpu0 = before.cpu_seconds.unwrap();
        let mut x = 0u64;
        // Works until the figure moves (a loaded machine may give this thread little of
        // the wall time), giving up after 20 s, which a figure that never moves reaches.
        let start = std::time::Instant::now();
        let mut cpu1 = cpu0;
        while cpu1 < cpu0 + 0.1 && start.elapsed() < std::time::Duration::from_secs(20) {
            for i in 0..1_000_000u64 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
            }
            std::hint::black_box(x);
            cpu1 = current().cpu_seconds.unwrap();
        }
        assert!(cpu1 >= cpu0 + 0.1, "cpu {cpu0} -> {cpu1}");

        let fds0 = open_fds().unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let socks: Vec<_> = (0..20)
            .map(|_| std::net::TcpStream::connect(addr).unwrap())
            .collect();
        // Other test threads open and close descriptors too; 21 of ours dominate.
        let fds1 = open_fds().unwrap();
        assert!(fds1 >= fds0 + 15, "fds {fds0} -> {fds1}");
        drop(socks);

        let rss0 = current().resident_bytes.unwrap();
        let big = vec![1u8; 64 << 20];
        std::hint::black_box(&big);
        let rss1 = current().resident_bytes.unwrap();
        assert!(rss1 >= rss0 + (48 << 20), "rss {rss0} -> {rss1}");
        drop(big);
        assert!(current().virtual_bytes.unwrap() >= rss0);
        assert!(max_fds().is_none_or(|m| m >= fds0));
    }
}
