//! The process-level flags, done with the system calls memcached makes: `-u` (refuse to run
//! as root without it; otherwise give up root for that user and its group), `-r` (core
//! file limit), `-c` (open files limit), `-k` (mlockall), `-d` (daemon), `-P` (pid file).

use std::ffi::{CStr, CString};
use std::io;

use crate::config::{EX_NOUSER, EX_OSERR, EX_USAGE, Refusal};

/// The account `-u` names.
#[derive(Debug, Clone)]
pub struct Identity {
    pub name: String,
    pub uid: libc::uid_t,
    pub gid: libc::gid_t,
}

/// Whether the real or effective user is root (memcached checks both).
pub fn is_root() -> bool {
    // SAFETY: getuid and geteuid cannot fail and touch no memory.
    unsafe { libc::getuid() == 0 || libc::geteuid() == 0 }
}

/// The identity to take: `None` when not root (memcached then ignores `-u`); refused as
/// memcached refuses, when root without `-u` or with an unknown user.
pub fn identity(user: Option<&str>) -> Result<Option<Identity>, Refusal> {
    if !is_root() {
        return Ok(None);
    }
    let name = match user {
        Some(u) if !u.is_empty() => u,
        _ => {
            return Err(Refusal::new(
                EX_USAGE,
                "can't run as root without the -u switch",
            ));
        }
    };
    let missing = || {
        Refusal::new(
            EX_NOUSER,
            format!("can't find the user {name} to switch to"),
        )
    };
    let cname = CString::new(name).map_err(|_| missing())?;
    // SAFETY: a passwd is integers and pointers: all zeroes (null pointers) is a valid value.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0u8; 16 * 1024];
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call; `buf` outlives the use of `pw`'s strings
    // (none are kept: uid and gid are copied out).
    let rc = unsafe {
        libc::getpwnam_r(
            cname.as_ptr(),
            &mut pw,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut found,
        )
    };
    if rc != 0 || found.is_null() {
        return Err(missing());
    }
    Ok(Some(Identity {
        name: name.to_string(),
        uid: pw.pw_uid,
        gid: pw.pw_gid,
    }))
}

/// Gives up root: no supplementary groups, then the user's group, then the user, in
/// memcached's order (the group first, while still allowed to change it). glibc applies
/// each call to every thread of the process.
pub fn drop_to(id: &Identity) -> Result<(), Refusal> {
    // SAFETY: setgroups with a zero count reads nothing.
    if unsafe { libc::setgroups(0, std::ptr::null()) } < 0 {
        let e = io::Error::last_os_error();
        // EPERM: already without the privilege to change groups, which is what we want.
        tracing::warn!("failed to drop supplementary groups: {}", strerror(&e));
        if e.raw_os_error() != Some(libc::EPERM) {
            return Err(Refusal::new(
                EX_OSERR,
                "failed to drop supplementary groups",
            ));
        }
    }
    // SAFETY: plain system calls on integers.
    if unsafe { libc::setgid(id.gid) } < 0 || unsafe { libc::setuid(id.uid) } < 0 {
        return Err(Refusal::new(
            EX_OSERR,
            format!("failed to assume identity of user {}", id.name),
        ));
    }
    Ok(())
}

/// `-r`: the core file limit raised to unlimited, else to its hard limit; refused when it
/// stays 0 (no core file could be written).
pub fn raise_core_limit() -> Result<(), Refusal> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `rl` is a valid rlimit for each call.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_CORE, &mut rl) == 0 {
            let inf = libc::rlimit {
                rlim_cur: libc::RLIM_INFINITY,
                rlim_max: libc::RLIM_INFINITY,
            };
            if libc::setrlimit(libc::RLIMIT_CORE, &inf) != 0 {
                let hard = libc::rlimit {
                    rlim_cur: rl.rlim_max,
                    rlim_max: rl.rlim_max,
                };
                libc::setrlimit(libc::RLIMIT_CORE, &hard);
            }
        }
        if libc::getrlimit(libc::RLIMIT_CORE, &mut rl) != 0 || rl.rlim_cur == 0 {
            return Err(Refusal::new(EX_OSERR, "failed to ensure corefile creation"));
        }
    }
    Ok(())
}

/// `-c`: room for that many connections. memcached sets `RLIMIT_NOFILE` to exactly `-c`;
/// memkitd needs descriptors of its own besides (reactors, listeners, the store's files), so
/// it raises the limit to `-c` plus a margin and never lowers it. When even root cannot
/// raise it that far, memcached's refusal.
pub fn files_for(conns: usize) -> Result<(), Refusal> {
    let want = conns.saturating_add(128) as libc::rlim_t;
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `rl` is a valid rlimit for each call.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) != 0 {
            return Err(Refusal::new(
                EX_OSERR,
                "failed to getrlimit number of files",
            ));
        }
        if rl.rlim_cur >= want {
            return Ok(());
        }
        let new = libc::rlimit {
            rlim_cur: want,
            rlim_max: rl.rlim_max.max(want),
        };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &new) != 0 {
            return Err(Refusal::new(
                EX_OSERR,
                "failed to set rlimit for open files. Try starting as root or requesting \
                 smaller maxconns value.",
            ));
        }
    }
    Ok(())
}

/// `-k`: every page locked in memory, now and later; memcached's warning when it fails.
pub fn lock_memory() -> Result<(), String> {
    // SAFETY: a plain system call.
    if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } != 0 {
        let e = io::Error::last_os_error();
        return Err(format!(
            "warning: -k invalid, mlockall() failed: {}",
            strerror(&e)
        ));
    }
    Ok(())
}

/// `-d`: memcached's `daemonize(maxcore, verbose)`: fork and detach; the working directory
/// stays when core files are wanted (`-r`), standard streams stay with `-v`. Call before any
/// thread starts: only the calling thread survives the fork.
pub fn daemonize(keep_dir: bool, keep_streams: bool) -> Result<(), Refusal> {
    // SAFETY: called while the process has one thread.
    if unsafe { libc::daemon(i32::from(keep_dir), i32::from(keep_streams)) } == -1 {
        return Err(Refusal::new(1, "failed to daemon() in order to daemonize"));
    }
    Ok(())
}

/// `-P`: the pid written to `PATH.tmp` and renamed over `PATH`, as memcached does; a failure
/// is reported and start-up goes on, as there.
pub fn write_pid(path: &str) {
    let tmp = format!("{path}.tmp");
    let r = std::fs::write(&tmp, format!("{}\n", std::process::id()));
    if let Err(e) = r {
        tracing::error!(
            "Could not open the pid file {tmp} for writing: {}",
            strerror(&e)
        );
        return;
    }
    if let Err(e) = std::fs::rename(&tmp, path) {
        tracing::error!(
            "Could not rename the pid file from {tmp} to {path}: {}",
            strerror(&e)
        );
    }
}

/// The C library's text for an error (`No such file or directory`), without Rust's
/// ` (os error 2)` suffix, so messages read as memcached's.
pub fn strerror(e: &io::Error) -> String {
    match e.raw_os_error() {
        // SAFETY: strerror returns a NUL-terminated static or thread-local string.
        Some(n) => unsafe { CStr::from_ptr(libc::strerror(n)) }
            .to_string_lossy()
            .into_owned(),
        None => e.to_string(),
    }
}
