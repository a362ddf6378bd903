//! The store's files are private to the user memkitd runs as: they hold the cache.
//!
//! The directory is what keeps other users out: created `0700`, and an existing one is
//! narrowed to `0700` when it is empty or holds only a store (made with a wider mode, or
//! by someone else for memkitd). A directory that holds other things too (`--persist
//! $HOME`, say) keeps its mode: it is not memkitd's to change.
//!
//! fjall creates its files with the process umask (typically `0644`, directories `0755`),
//! and keeps creating them (journals, tables) for as long as the store is open. Setting
//! the umask instead would change it for the whole process (memkitd's pid file, the `-s`
//! socket's creation), so the files fjall made are narrowed to the owner after opening and
//! again on every sweeper round ([`make_private`]). Between a file's creation and the next
//! round, the `0700` directory keeps others out.

use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;

/// fjall's own entries at the top of a store directory (fjall 3: `file.rs`), besides its
/// journals (`N.jnl`).
const FJALL_ENTRIES: [&str; 3] = ["keyspaces", "lock", "version"];

/// The mode of the store directory.
pub const DIR_MODE: u32 = 0o700;

/// Creates `dir` (its missing parents with the usual mode, `dir` itself `0700`), or narrows
/// an existing `dir` to `0700` when it is empty or holds only a store (module notes).
pub fn create_private(dir: &Path) -> io::Result<()> {
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    match std::fs::DirBuilder::new().mode(DIR_MODE).create(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => {
            // Best effort: a directory someone else owns cannot be narrowed by this user,
            // and is still theirs to give memkitd.
            let ours = std::fs::read_dir(dir).is_ok_and(|entries| {
                entries
                    .filter_map(|e| e.ok())
                    .all(|e| is_fjall_entry(&e.file_name().to_string_lossy()))
            });
            if ours {
                let _ = narrow(dir);
            }
            Ok(())
        }
        Err(e) => Err(e),
    }
}

fn is_fjall_entry(name: &str) -> bool {
    FJALL_ENTRIES.contains(&name) || name.ends_with(".jnl")
}

/// Takes group and other permissions away from `path`, if it has any (a symbolic link is
/// left alone: changing its mode would change its target's).
fn narrow(path: &Path) -> io::Result<()> {
    let meta = std::fs::symlink_metadata(path)?;
    let mode = meta.permissions().mode();
    if !meta.file_type().is_symlink() && mode & 0o077 != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & 0o700))?;
    }
    Ok(())
}

/// Narrows every file and directory fjall made in the store `dir` to its owner. Entries
/// that vanish meanwhile (fjall removes old journals and tables) are skipped; other
/// entries of the directory are not touched.
pub fn make_private(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.filter_map(|e| e.ok()) {
        if is_fjall_entry(&e.file_name().to_string_lossy()) {
            narrow_tree(&e.path());
        }
    }
}

fn narrow_tree(path: &Path) {
    let _ = narrow(path);
    // Never into a link: it could lead out of the store.
    let is_dir = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir());
    if let Some(entries) = is_dir.then(|| std::fs::read_dir(path).ok()).flatten() {
        for e in entries.filter_map(|e| e.ok()) {
            narrow_tree(&e.path());
        }
    }
}
