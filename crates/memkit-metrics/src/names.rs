//! The name tables: which `stats` field becomes which metric, of which type, with which help
//! text. memcached's own fields take the community exporter's names
//! (`prometheus/memcached_exporter`, `pkg/exporter/exporter.go`) and help texts, so its
//! dashboards work unchanged; fields the exporter does not know (TLS, memkitd's persistent
//! store) are named here, after the same conventions (`_total` counters, units in the name).

use crate::Kind;

// (metric, stat, kind, help) for the general stats.
pub(crate) const GENERAL: &[(&str, &str, Kind, &str)] = &[
    (
        "memcached_auth_commands_total",
        "auth_cmds",
        Kind::Counter,
        "Authentication attempts (-Y and SASL), successful or not.",
    ),
    (
        "memcached_auth_errors_total",
        "auth_errors",
        Kind::Counter,
        "Failed authentication attempts (-Y and SASL).",
    ),
    (
        "memcached_uptime_seconds",
        "uptime",
        Kind::Counter,
        "Number of seconds since the server started.",
    ),
    (
        "memcached_time_seconds",
        "time",
        Kind::Gauge,
        "current UNIX time according to the server.",
    ),
    (
        "memcached_process_user_cpu_seconds_total",
        "rusage_user",
        Kind::Counter,
        "Accumulated user time for this process.",
    ),
    (
        "memcached_process_system_cpu_seconds_total",
        "rusage_system",
        Kind::Counter,
        "Accumulated system time for this process.",
    ),
    (
        "memcached_current_bytes",
        "bytes",
        Kind::Gauge,
        "Current number of bytes used to store items.",
    ),
    (
        "memcached_limit_bytes",
        "limit_maxbytes",
        Kind::Gauge,
        "Number of bytes this server is allowed to use for storage.",
    ),
    (
        "memcached_current_items",
        "curr_items",
        Kind::Gauge,
        "Current number of items stored by this instance.",
    ),
    (
        "memcached_items_total",
        "total_items",
        Kind::Counter,
        "Total number of items stored during the life of this instance.",
    ),
    (
        "memcached_read_bytes_total",
        "bytes_read",
        Kind::Counter,
        "Total number of bytes read by this server from network.",
    ),
    (
        "memcached_written_bytes_total",
        "bytes_written",
        Kind::Counter,
        "Total number of bytes sent by this server to network.",
    ),
    (
        "memcached_current_connections",
        "curr_connections",
        Kind::Gauge,
        "Current number of open connections.",
    ),
    (
        "memcached_connections_total",
        "total_connections",
        Kind::Counter,
        "Total number of connections opened since the server started running.",
    ),
    (
        "memcached_connections_rejected_total",
        "rejected_connections",
        Kind::Counter,
        "Total number of connections rejected due to hitting the memcached's -c limit in maxconns_fast mode.",
    ),
    (
        "memcached_connections_yielded_total",
        "conn_yields",
        Kind::Counter,
        "Total number of connections yielded running due to hitting the memcached's -R limit.",
    ),
    (
        "memcached_connections_listener_disabled_total",
        "listen_disabled_num",
        Kind::Counter,
        "Number of times that memcached has hit its connections limit and disabled its listener.",
    ),
    (
        "memcached_items_evicted_total",
        "evictions",
        Kind::Counter,
        "Total number of valid items removed from cache to free memory for new items.",
    ),
    (
        "memcached_items_reclaimed_total",
        "reclaimed",
        Kind::Counter,
        "Total number of times an entry was stored using memory from an expired entry.",
    ),
    (
        "memcached_item_too_large_total",
        "store_too_large",
        Kind::Counter,
        "The number of times an item exceeded the max-item-size when being stored.",
    ),
    (
        "memcached_item_no_memory_total",
        "store_no_memory",
        Kind::Counter,
        "The number of times an item could not be stored due to no more memory.",
    ),
    (
        "memcached_lru_crawler_starts_total",
        "lru_crawler_starts",
        Kind::Counter,
        "Times an LRU crawler was started.",
    ),
    (
        "memcached_direct_reclaims_total",
        "direct_reclaims",
        Kind::Counter,
        "Times worker threads had to directly reclaim or evict items.",
    ),
    (
        "memcached_lru_crawler_items_checked_total",
        "crawler_items_checked",
        Kind::Counter,
        "Total items examined by LRU Crawler.",
    ),
    (
        "memcached_lru_crawler_reclaimed_total",
        "crawler_reclaimed",
        Kind::Counter,
        "Total items freed by LRU Crawler.",
    ),
    (
        "memcached_lru_crawler_moves_to_cold_total",
        "moves_to_cold",
        Kind::Counter,
        "Total number of items moved from HOT/WARM to COLD LRU's.",
    ),
    (
        "memcached_lru_crawler_moves_to_warm_total",
        "moves_to_warm",
        Kind::Counter,
        "Total number of items moved from COLD to WARM LRU.",
    ),
    (
        "memcached_lru_crawler_moves_within_lru_total",
        "moves_within_lru",
        Kind::Counter,
        "Total number of items reshuffled within HOT or WARM LRU's.",
    ),
    (
        "memcached_accepting_connections",
        "accepting_conns",
        Kind::Gauge,
        "The Memcached server is currently accepting new connections.",
    ),
    // memcached 1.6 reports these with -Z only; the exporter has no name for them.
    (
        "memcached_ssl_handshake_errors_total",
        "ssl_handshake_errors",
        Kind::Counter,
        "TLS handshakes that failed or timed out.",
    ),
    (
        "memcached_ssl_new_sessions_total",
        "ssl_new_sessions",
        Kind::Counter,
        "TLS sessions established without resumption.",
    ),
];

// The flash tier (memkitd's `-o ext_path`, memcached's extstore; its lines are present
// only with the tier on): the exporter's names, types and help texts for memcached's
// `extstore_*` (it types `extstore_bytes_used` as a counter; so does this), memkit's own
// names for the read counters the exporter leaves out and for memkitd's `memkit_*` lines.
pub(crate) const EXTSTORE: &[(&str, &str, Kind, &str)] = &[
    (
        "memcached_extstore_compact_lost_total",
        "extstore_compact_lost",
        Kind::Counter,
        "Total number of items lost because they were locked during extstore compaction.",
    ),
    (
        "memcached_extstore_compact_rescued_total",
        "extstore_compact_rescues",
        Kind::Counter,
        "Total number of items moved to a new page during extstore compaction,",
    ),
    (
        "memcached_extstore_compact_skipped_total",
        "extstore_compact_skipped",
        Kind::Counter,
        "Total number of items dropped due to inactivity during extstore compaction.",
    ),
    (
        "memcached_extstore_pages_allocated_total",
        "extstore_page_allocs",
        Kind::Counter,
        "Total number of times a page was allocated in extstore.",
    ),
    (
        "memcached_extstore_pages_evicted_total",
        "extstore_page_evictions",
        Kind::Counter,
        "Total number of times a page was evicted from extstore.",
    ),
    (
        "memcached_extstore_pages_reclaimed_total",
        "extstore_page_reclaims",
        Kind::Counter,
        "Total number of times an empty extstore page was freed.",
    ),
    (
        "memcached_extstore_pages_free",
        "extstore_pages_free",
        Kind::Gauge,
        "Number of extstore pages not yet containing any items.",
    ),
    (
        "memcached_extstore_pages_used",
        "extstore_pages_used",
        Kind::Gauge,
        "Number of extstore pages containing at least one item.",
    ),
    (
        "memcached_extstore_objects_evicted_total",
        "extstore_objects_evicted",
        Kind::Counter,
        "Total number of items evicted from extstore to free up space.",
    ),
    (
        "memcached_extstore_objects_read_total",
        "extstore_objects_read",
        Kind::Counter,
        "Total number of items read from extstore.",
    ),
    (
        "memcached_extstore_objects_written_total",
        "extstore_objects_written",
        Kind::Counter,
        "Total number of items written to extstore.",
    ),
    (
        "memcached_extstore_objects_used",
        "extstore_objects_used",
        Kind::Gauge,
        "Number of items stored in extstore.",
    ),
    (
        "memcached_extstore_bytes_evicted_total",
        "extstore_bytes_evicted",
        Kind::Counter,
        "Total number of bytes evicted from extstore to free up space.",
    ),
    (
        "memcached_extstore_bytes_written_total",
        "extstore_bytes_written",
        Kind::Counter,
        "Total number of bytes written to extstore.",
    ),
    (
        "memcached_extstore_bytes_read_total",
        "extstore_bytes_read",
        Kind::Counter,
        "Total number of bytes read from extstore.",
    ),
    (
        "memcached_extstore_bytes_used",
        "extstore_bytes_used",
        Kind::Counter,
        "Current number of bytes used to store items in extstore.",
    ),
    (
        "memcached_extstore_bytes_fragmented",
        "extstore_bytes_fragmented",
        Kind::Gauge,
        "Current number of bytes in extstore pages allocated but not used to store an object.",
    ),
    (
        "memcached_extstore_bytes_limit",
        "extstore_limit_maxbytes",
        Kind::Gauge,
        "Number of bytes of external storage allocated for this server.",
    ),
    (
        "memcached_extstore_io_queue_depth",
        "extstore_io_queue",
        Kind::Gauge,
        "Number of items in the I/O queue waiting to be processed.",
    ),
    (
        "memkit_extstore_gets_total",
        "get_extstore",
        Kind::Counter,
        "Reads that found their value on flash (memcached's get_extstore).",
    ),
    (
        "memkit_extstore_get_misses_total",
        "miss_from_extstore",
        Kind::Counter,
        "Flash reads that found the value gone or unreadable: misses (miss_from_extstore).",
    ),
    (
        "memkit_extstore_get_badcrc_total",
        "badcrc_from_extstore",
        Kind::Counter,
        "Flash reads whose bytes failed their checksum (badcrc_from_extstore).",
    ),
    (
        "memkit_extstore_recaches_total",
        "recache_from_extstore",
        Kind::Counter,
        "Values a flash read brought back to RAM (recache_from_extstore).",
    ),
    (
        "memkit_extstore_items",
        "memkit_extstore_items",
        Kind::Gauge,
        "Items whose value is on flash (their keys stay in RAM, and in memcached_current_items).",
    ),
    (
        "memkit_extstore_item_bytes",
        "memkit_extstore_item_bytes",
        Kind::Gauge,
        "Bytes of those items' records on flash.",
    ),
    (
        "memkit_extstore_evicted_total",
        "memkit_evicted_to_extstore",
        Kind::Counter,
        "Values eviction moved from RAM to flash.",
    ),
    (
        "memkit_extstore_write_errors_total",
        "memkit_extstore_write_errors",
        Kind::Counter,
        "Writes to flash that failed (a full or failing disk).",
    ),
];

// memkitd's `--persist` store (the `persist_*` stats, present only in persistent mode):
// memkit's own, so `memkit_` rather than the exporter's `memcached_` namespace.
// `persist_durability` is a label (`memkit_persist_durability_info`), not a number.
pub(crate) const PERSIST: &[(&str, &str, Kind, &str)] = &[
    (
        "memkit_persist_writes_total",
        "persist_writes",
        Kind::Counter,
        "Records written to the persistent store's journal.",
    ),
    (
        "memkit_persist_written_bytes_total",
        "persist_bytes_written",
        Kind::Counter,
        "Key and record bytes written to the persistent store's journal.",
    ),
    (
        "memkit_persist_loads_total",
        "persist_loads",
        Kind::Counter,
        "Memory misses answered from the persistent store.",
    ),
    (
        "memkit_persist_purged_total",
        "persist_purged",
        Kind::Counter,
        "Expired or flushed records removed from the persistent store.",
    ),
    (
        "memkit_persist_flushes_total",
        "persist_flushes",
        Kind::Counter,
        "Journal fsyncs (group commits).",
    ),
    (
        "memkit_persist_last_flush_timestamp_seconds",
        "persist_last_flush_unix",
        Kind::Gauge,
        "Unix time of the last journal fsync.",
    ),
    (
        "memkit_persist_disk_bytes",
        "persist_bytes_on_disk",
        Kind::Gauge,
        "Bytes the persistent store's files take on disk.",
    ),
    (
        "memkit_persist_items",
        "persist_items",
        Kind::Gauge,
        "Live items on disk, as of the sweeper's last whole pass.",
    ),
    (
        "memkit_persist_items_approx",
        "persist_items_approx",
        Kind::Gauge,
        "The store's estimate of its records, versions and tombstones not yet compacted included.",
    ),
    (
        "memkit_persist_write_errors_total",
        "persist_write_errors",
        Kind::Counter,
        "Writes the persistent store failed.",
    ),
    (
        "memkit_persist_failed",
        "persist_failed",
        Kind::Gauge,
        "1 once the persistent store failed for good (a restart is needed).",
    ),
    (
        "memkit_persist_refused_full_total",
        "persist_refused_full",
        Kind::Counter,
        "Writes refused for lack of disk space.",
    ),
    (
        "memkit_persist_disk_free_bytes",
        "persist_disk_free",
        Kind::Gauge,
        "Free bytes on the store's file system at the last check.",
    ),
    (
        "memkit_persist_disk_reserve_bytes",
        "persist_disk_reserve",
        Kind::Gauge,
        "Free bytes below which new data is refused.",
    ),
    (
        "memkit_persist_disk_low",
        "persist_disk_low",
        Kind::Gauge,
        "1 while new data is refused because the disk is nearly full.",
    ),
];

// `stats items` per-class fields: (field, metric, kind, help).
pub(crate) const ITEMS: &[(&str, &str, Kind, &str)] = &[
    (
        "number",
        "memcached_slab_current_items",
        Kind::Gauge,
        "Number of items currently stored in this slab class.",
    ),
    (
        "age",
        "memcached_slab_items_age_seconds",
        Kind::Gauge,
        "Number of seconds the oldest item has been in the slab class.",
    ),
    (
        "crawler_reclaimed",
        "memcached_slab_items_crawler_reclaimed_total",
        Kind::Counter,
        "Number of items freed by the LRU Crawler.",
    ),
    (
        "evicted",
        "memcached_slab_items_evicted_total",
        Kind::Counter,
        "Total number of times an item had to be evicted from the LRU before it expired.",
    ),
    (
        "evicted_nonzero",
        "memcached_slab_items_evicted_nonzero_total",
        Kind::Counter,
        "Total number of times an item which had an explicit expire time set had to be evicted from the LRU before it expired.",
    ),
    (
        "evicted_time",
        "memcached_slab_items_evicted_time_seconds",
        Kind::Counter,
        "Seconds since the last access for the most recent item evicted from this class.",
    ),
    (
        "evicted_unfetched",
        "memcached_slab_items_evicted_unfetched_total",
        Kind::Counter,
        "Total nmber of items evicted and never fetched.",
    ),
    (
        "expired_unfetched",
        "memcached_slab_items_expired_unfetched_total",
        Kind::Counter,
        "Total number of valid items evicted from the LRU which were never touched after being set.",
    ),
    (
        "outofmemory",
        "memcached_slab_items_outofmemory_total",
        Kind::Counter,
        "Total number of items for this slab class that have triggered an out of memory error.",
    ),
    (
        "reclaimed",
        "memcached_slab_items_reclaimed_total",
        Kind::Counter,
        "Total number of items reclaimed.",
    ),
    (
        "tailrepairs",
        "memcached_slab_items_tailrepairs_total",
        Kind::Counter,
        "Total number of times the entries for a particular ID need repairing.",
    ),
    (
        "mem_requested",
        "memcached_slab_mem_requested_bytes",
        Kind::Gauge,
        "Number of bytes of memory actual items take up within a slab.",
    ),
    (
        "moves_to_cold",
        "memcached_slab_items_moves_to_cold",
        Kind::Counter,
        "Number of items moved from HOT or WARM into COLD.",
    ),
    (
        "moves_to_warm",
        "memcached_slab_items_moves_to_warm",
        Kind::Counter,
        "Number of items moves from COLD into WARM.",
    ),
    (
        "moves_within_lru",
        "memcached_slab_items_moves_within_lru",
        Kind::Counter,
        "Number of times active items were bumped within HOT or WARM.",
    ),
    (
        "number_hot",
        "memcached_slab_hot_items",
        Kind::Gauge,
        "Number of items presently stored in the HOT LRU.",
    ),
    (
        "number_warm",
        "memcached_slab_warm_items",
        Kind::Gauge,
        "Number of items presently stored in the WARM LRU.",
    ),
    (
        "number_cold",
        "memcached_slab_cold_items",
        Kind::Gauge,
        "Number of items presently stored in the COLD LRU.",
    ),
    (
        "number_temp",
        "memcached_slab_temporary_items",
        Kind::Gauge,
        "Number of items presently stored in the TEMPORARY LRU.",
    ),
    (
        "age_hot",
        "memcached_slab_hot_age_seconds",
        Kind::Gauge,
        "Age of the oldest item in HOT LRU.",
    ),
    (
        "age_warm",
        "memcached_slab_warm_age_seconds",
        Kind::Gauge,
        "Age of the oldest item in WARM LRU.",
    ),
];

// `stats slabs` per-class fields.
pub(crate) const SLABS: &[(&str, &str, Kind, &str)] = &[
    (
        "chunk_size",
        "memcached_slab_chunk_size_bytes",
        Kind::Gauge,
        "Number of bytes allocated to each chunk within this slab class.",
    ),
    (
        "chunks_per_page",
        "memcached_slab_chunks_per_page",
        Kind::Gauge,
        "Number of chunks within a single page for this slab class.",
    ),
    (
        "total_pages",
        "memcached_slab_current_pages",
        Kind::Gauge,
        "Number of pages allocated to this slab class.",
    ),
    (
        "total_chunks",
        "memcached_slab_current_chunks",
        Kind::Gauge,
        "Number of chunks allocated to this slab class.",
    ),
    (
        "used_chunks",
        "memcached_slab_chunks_used",
        Kind::Gauge,
        "Number of chunks allocated to an item.",
    ),
    (
        "free_chunks",
        "memcached_slab_chunks_free",
        Kind::Gauge,
        "Number of chunks not yet allocated items.",
    ),
    (
        "free_chunks_end",
        "memcached_slab_chunks_free_end",
        Kind::Gauge,
        "Number of free chunks at the end of the last allocated page.",
    ),
];
