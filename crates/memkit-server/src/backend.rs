//! The storage a server's settings ask for: the engine alone (with `-e`, restored from a
//! warm restart file), or with `--persist` the engine over a persistent store.

use std::sync::Arc;

use crate::config::Settings;

/// The storage for these settings: the engine alone (with `-e`, restored from a warm
/// restart file), or with `--persist` the engine over a persistent store (opened and
/// recovered here; start-up reports what it found).
pub fn backend_for(
    settings: &Settings,
) -> Result<
    (
        Arc<memkit_engine::Engine>,
        Option<memkit_persist::Persistent>,
    ),
    String,
> {
    let Some(dir) = &settings.persist else {
        return Ok((Arc::new(crate::warm::engine_for(settings)), None));
    };
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
    let p = memkit_persist::open(&opts, cfg)?;
    Ok((p.engine.clone(), Some(p)))
}

/// An engine for these settings.
pub fn engine_for(settings: &Settings) -> memkit_engine::Engine {
    memkit_engine::Engine::new(settings.engine_config())
}
