//! The flash tier's lines (`-o ext_path`), with memcached 1.6.18's names and order; none of
//! them without the tier, as in memcached. Left out, because memkitd has nothing they would
//! measure (docs/protocol-notes.md): `get_aborted_extstore` (a flash read is never aborted:
//! the store's read queue is unbounded), `get_oom_extstore` (read buffers are allocated as
//! any other memory, never from a pool that runs out), and in `stats extstore` each page's
//! `bucket` and `free_bucket` (memcached's page buckets; memkit's store has one kind of page).

use memkit_engine::{Counters, EngineStats};
use memkit_protocol::render::write_stat_u64;

use crate::config::Settings;
use crate::state::Shared;

/// `get_extstore` .. `badcrc_from_extstore`, which memcached prints after `get_flushed`.
pub(super) fn read_rows(sh: &Shared, c: &Counters) -> Vec<(&'static str, String)> {
    if sh.engine.flash_store().is_none() {
        return Vec::new();
    }
    [
        ("get_extstore", c.get_extstore),
        ("recache_from_extstore", c.recache_from_extstore),
        ("miss_from_extstore", c.miss_from_extstore),
        ("badcrc_from_extstore", c.badcrc_from_extstore),
    ]
    .map(|(k, v)| (k, v.to_string()))
    .to_vec()
}

/// `extstore_compact_lost` .. `extstore_io_queue`, which memcached prints after
/// `log_watchers`.
pub(super) fn store_rows(sh: &Shared) -> Vec<(&'static str, String)> {
    let Some(store) = sh.engine.flash_store() else {
        return Vec::new();
    };
    let s = store.stats();
    [
        ("extstore_compact_lost", s.compact_lost),
        ("extstore_compact_rescues", s.compact_rescues),
        ("extstore_compact_skipped", s.compact_skipped),
        ("extstore_page_allocs", s.page_allocs),
        ("extstore_page_evictions", s.page_evictions),
        ("extstore_page_reclaims", s.page_reclaims),
        ("extstore_pages_free", s.pages_free),
        ("extstore_pages_used", s.pages_used),
        ("extstore_objects_evicted", s.objects_evicted),
        ("extstore_objects_read", s.objects_read),
        ("extstore_objects_written", s.objects_written),
        ("extstore_objects_used", s.objects_used),
        ("extstore_bytes_evicted", s.bytes_evicted),
        ("extstore_bytes_written", s.bytes_written),
        ("extstore_bytes_read", s.bytes_read),
        ("extstore_bytes_used", s.bytes_used),
        ("extstore_bytes_fragmented", s.bytes_fragmented),
        ("extstore_limit_maxbytes", s.limit_maxbytes),
        ("extstore_io_queue", s.io_queue),
    ]
    .map(|(k, v)| (k, v.to_string()))
    .to_vec()
}

/// memkit's own lines about the tier, with its other `memkit_*` lines: items whose value is
/// on flash (their stubs are in RAM, and in `curr_items`), the bytes of their records
/// there, values eviction moved to flash (memcached counts only `extstore_objects_written`,
/// which includes compaction's rewrites), and writes the store failed (a full or failing
/// disk).
pub(super) fn memkit_rows(sh: &Shared, e: &EngineStats) -> Vec<(&'static str, String)> {
    let Some(store) = sh.engine.flash_store() else {
        return Vec::new();
    };
    [
        ("memkit_extstore_items", e.flash_items),
        ("memkit_extstore_item_bytes", e.flash_bytes),
        ("memkit_evicted_to_extstore", e.counters.evicted_to_extstore),
        ("memkit_extstore_write_errors", store.stats().write_errors),
    ]
    .map(|(k, v)| (k, v.to_string()))
    .to_vec()
}

/// The `ext_*` lines of `stats settings`, in memcached's order (it prints them between
/// `inline_ascii_response` and the TLS settings). memcached's `slab_automove_freeratio`,
/// among them, is a slab setting memkitd does not have.
pub(super) fn settings_rows(st: &Settings) -> Vec<(&'static str, String)> {
    let Some(f) = &st.flash else {
        return Vec::new();
    };
    vec![
        ("ext_item_size", f.item_size.to_string()),
        ("ext_item_age", f.item_age.to_string()),
        ("ext_low_ttl", f.low_ttl.to_string()),
        ("ext_recache_rate", f.recache_rate.to_string()),
        ("ext_wbuf_size", f.wbuf_size.to_string()),
        ("ext_compact_under", f.compact_under().to_string()),
        ("ext_drop_under", f.drop_under().to_string()),
        ("ext_max_sleep", f.max_sleep.to_string()),
        ("ext_max_frag", format!("{:.2}", f.max_frag)),
        (
            "ext_drop_unread",
            if f.drop_unread { "yes" } else { "no" }.into(),
        ),
    ]
}

/// `stats extstore`: each page's version (0: free) and live bytes, as `N:version` and
/// `N:bytes`. `false` without the tier (the caller answers `ERROR`, as before the tier).
pub(super) fn pages(sh: &Shared, out: &mut Vec<u8>) -> bool {
    let Some(store) = sh.engine.flash_store() else {
        return false;
    };
    for (i, p) in store.page_stats().iter().enumerate() {
        write_stat_u64(out, &format!("{i}:version"), u64::from(p.version));
        write_stat_u64(out, &format!("{i}:bytes"), p.bytes);
    }
    true
}
