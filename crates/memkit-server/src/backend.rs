//! The storage a server's settings ask for: the engine alone (with `-e`, restored from a
//! warm restart file; with `-o ext_path`, over a flash tier), or with `--persist` the engine
//! over a persistent store.

use std::sync::Arc;

use crate::config::{EX_OSERR, EX_USAGE, Refusal, Settings};

/// The storage for these settings: the engine alone (with `-e`, restored from a warm
/// restart file; with `-o ext_path`, over the flash tier, opened or restored here), or with
/// `--persist` the engine over a persistent store (opened and recovered here; start-up
/// reports what it found). `Err`: the message to exit with, and the status.
pub fn backend_for(
    settings: &Settings,
) -> Result<
    (
        Arc<memkit_engine::Engine>,
        Option<memkit_persist::Persistent>,
    ),
    Refusal,
> {
    let Some(dir) = &settings.persist else {
        let flash = crate::flash::open(settings.flash.as_ref(), settings.memory_file.as_deref())?;
        let cfg = memkit_engine::EngineConfig {
            flash,
            ..settings.engine_config()
        };
        let engine = Arc::new(crate::warm::engine_for(settings, cfg));
        // Compaction asks the engine about the records it moves: it needs the engine's Arc.
        engine.attach_flash();
        return Ok((engine, None));
    };
    if settings.flash.is_some() {
        // Settings::check refuses this command line; settings built otherwise too.
        return Err(Refusal::new(EX_USAGE, crate::config::FLASH_WITH_PERSIST));
    }
    let opts = memkit_persist::PersistOptions {
        durability: settings.durability,
        reserve: settings.persist_reserve,
        ..memkit_persist::PersistOptions::new(dir)
    };
    let cfg = memkit_engine::EngineConfig {
        memory_limit: settings.memory_limit,
        item_size_max: settings.item_size_max,
        ..Default::default()
    };
    let p = memkit_persist::open(&opts, cfg)
        .map_err(|e| Refusal::new(EX_OSERR, format!("persistent store: {e}")))?;
    Ok((p.engine.clone(), Some(p)))
}

/// An engine for these settings, without `-e`'s file or the flash tier (tests, embedders).
pub fn engine_for(settings: &Settings) -> memkit_engine::Engine {
    memkit_engine::Engine::new(settings.engine_config())
}
