//! The flash tier's life in memkitd (`-o ext_path`, memcached's extstore): the store is
//! opened with the engine ([`open`]), and at exit flushed, with `-e` and a graceful stop its
//! page table saved beside the warm restart file ([`save`]), and shut down ([`stop`]).
//!
//! Warm restart with the tier: the engine's file (`-e FILE`) holds each stub's location on
//! flash, and `FILE.ext` the store's state (which pages hold what, at which version), written
//! after the engine's file and synced and renamed as it is. At the next start `FILE.ext` is
//! read and removed before the store opens (so a crash after it starts cold, as the engine
//! does with its own file), the store restored from it, and then the engine, whose restored
//! stubs keep only the locations the store still holds. memcached 1.6.18 does not restart
//! with extstore ("memory restart with extstore not presently supported").

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memkit_engine::memkit_flash::FlashStore;
use memkit_engine::{Engine, FlashTier};

use crate::config::{FlashSettings, Refusal};

/// Where the flash store's state goes beside the warm restart file `memory_file`.
pub fn state_path(memory_file: &Path) -> PathBuf {
    let mut p = memory_file.as_os_str().to_owned();
    p.push(".ext");
    PathBuf::from(p)
}

/// The tier for these settings, or `None` without `ext_path`. With `-e`, the store is
/// restored from `FILE.ext` when there is one (which is removed once read; a state that
/// does not restore is logged and the store opened empty). A store that does not open is
/// memcached's "Failed to open extstore file" refusal, exit status 1, naming the paths.
pub fn open(
    flash: Option<&FlashSettings>,
    memory_file: Option<&Path>,
) -> Result<Option<FlashTier>, Refusal> {
    let Some(f) = flash else { return Ok(None) };
    let cfg = f.store_config();
    let state = memory_file.and_then(|m| take_state(&state_path(m)));
    let restored = state.and_then(|(path, bytes)| {
        FlashStore::restore(cfg.clone(), &bytes)
            .inspect_err(|e| {
                tracing::warn!(
                    "warm restart: flash state {} not restored: {e}; the flash tier starts empty",
                    path.display()
                )
            })
            .ok()
    });
    let store = match restored {
        Some(s) => s,
        None => FlashStore::open(cfg).map_err(|e| {
            let paths: Vec<String> = f
                .files
                .iter()
                .map(|s| s.path.display().to_string())
                .collect();
            Refusal::new(
                1,
                format!("Failed to open extstore file {}: {e}", paths.join(", ")),
            )
        })?,
    };
    Ok(Some(f.tier(store)))
}

/// Reads and removes the state file; `None` when there is none (or it cannot be read,
/// which is logged).
fn take_state(path: &Path) -> Option<(PathBuf, Vec<u8>)> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::warn!("warm restart: flash state {}: {e}", path.display());
            let _ = fs::remove_file(path);
            return None;
        }
    };
    if let Err(e) = fs::remove_file(path) {
        // Used only if it is gone: a state read twice would point stubs at rewritten pages.
        tracing::warn!(
            "warm restart: flash state {} could not be removed: {e}; the flash tier starts empty",
            path.display()
        );
        return None;
    }
    Some((path.to_path_buf(), bytes))
}

/// After the engine's warm save to `memory_file`: flushes the store and writes its state to
/// `FILE.ext` (mode 0600, synced, then renamed into place and the directory synced). On
/// failure the engine's file is removed too, so the next start is cold rather than holding
/// stubs no store knows.
pub fn save(engine: &Engine, memory_file: &Path) {
    let Some(store) = engine.flash_store() else {
        return;
    };
    let path = state_path(memory_file);
    match write_state(store, &path) {
        Ok(n) => tracing::info!(
            target: crate::log::LIFECYCLE,
            "warm restart: saved the flash tier's state ({n} bytes) to {}",
            path.display()
        ),
        Err(e) => {
            tracing::error!(
                "warm restart: could not save the flash tier's state to {}: {e}; \
                 the next start will be empty",
                path.display()
            );
            let _ = fs::remove_file(memory_file);
        }
    }
}

fn write_state(store: &Arc<FlashStore>, path: &Path) -> std::io::Result<usize> {
    store.flush()?;
    let bytes = store.save_state()?;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let _ = fs::remove_file(&tmp);
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut file| {
            file.write_all(&bytes)?;
            file.sync_all()?;
            fs::rename(&tmp, path)?;
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                File::open(dir)?.sync_all()?;
            }
            Ok(bytes.len())
        });
    written.inspect_err(|_| {
        let _ = fs::remove_file(&tmp);
    })
}

/// At exit, after any save: stops the store's threads.
pub fn stop(engine: &Engine) {
    if let Some(store) = engine.flash_store() {
        store.shutdown();
    }
}
