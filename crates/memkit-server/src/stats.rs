//! `stats` and its subcommands, with memcached's names; `lru_crawler metadump`.
//!
//! memkitd has no slab classes; its size classes only count. `stats items` and `stats slabs`
//! report them under memcached's field names (class ids, `chunk_size`, `mem_requested`,
//! `used_chunks`) so that tools reading memcached's output draw the same size histogram;
//! fields about slab pages are derived and documented in `docs/protocol-notes.md`.

use std::sync::atomic::Ordering::Relaxed;

use memkit_engine::EngineStats;
use memkit_protocol::render::{write_end, write_stat, write_stat_u64};

use crate::server::Shared;

/// Writes the reply to `stats [args]`.
pub fn write_stats(sh: &Shared, args: &[&[u8]], out: &mut Vec<u8>) {
    match args.first().copied() {
        None => general(sh, out),
        Some(b"settings") => settings(sh, out),
        Some(b"items") => items(sh, out),
        Some(b"slabs") => slabs(sh, out),
        Some(b"sizes") => sizes(sh, out),
        Some(b"conns") => conns(sh, out),
        Some(b"cachedump") => cachedump(sh, args, out),
        Some(b"reset") => {
            sh.engine.reset_stats();
            sh.counters.reset();
            // memcached keeps these with the per-thread counters that `stats reset` zeroes.
            if let Some(a) = &sh.auth {
                a.cmds.store(0, Relaxed);
                a.errors.store(0, Relaxed);
            }
            out.extend_from_slice(b"RESET\r\n");
            return;
        }
        Some(b"detail") => {
            out.extend_from_slice(match args.get(1).copied() {
                Some(b"dump") => b"END\r\n".as_slice(),
                Some(b"on" | b"off") => b"OK\r\n",
                _ => b"CLIENT_ERROR usage: stats detail on|off|dump\r\n",
            });
            return;
        }
        Some(_) => {
            out.extend_from_slice(b"ERROR\r\n");
            return;
        }
    }
    write_end(out);
}

fn rusage() -> (f64, f64) {
    // utime and stime are fields 14 and 15 of /proc/self/stat, in clock ticks (100/s).
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = after.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0) / 100.0;
    (tick(11), tick(12))
}

fn general(sh: &Shared, out: &mut Vec<u8>) {
    let e: EngineStats = sh.engine.stats();
    let c = &e.counters;
    let now = memkit_types::Clock::now_secs(&**sh.engine.clock());
    let (user, sys) = rusage();
    let conns = sh.counters.curr_connections.load(Relaxed);
    let n = |v: u64| v.to_string();
    // memcached 1.6.18's names, in its order. Fields about machinery memkitd does not have
    // (slab rebalancing, LRU maintainer, extstore, NAPI) are reported as 0.
    let mut rows: Vec<(&str, String)> = vec![
        ("pid", n(u64::from(std::process::id()))),
        ("uptime", n(sh.started.elapsed().as_secs())),
        ("time", n(now)),
        ("version", crate::VERSION.into()),
        ("libevent", "tokio".into()),
        ("pointer_size", "64".into()),
        ("rusage_user", format!("{user:.6}")),
        ("rusage_system", format!("{sys:.6}")),
        ("max_connections", n(sh.settings.conn_limit as u64)),
        ("curr_connections", n(conns)),
        (
            "total_connections",
            n(sh.counters.total_connections.load(Relaxed)),
        ),
        (
            "rejected_connections",
            n(sh.counters.rejected_connections.load(Relaxed)),
        ),
        ("connection_structures", n(conns)),
        ("response_obj_oom", "0".into()),
        ("response_obj_count", n(conns)),
        ("response_obj_bytes", "0".into()),
        ("read_buf_count", n(conns)),
        ("read_buf_bytes", "0".into()),
        ("read_buf_bytes_free", "0".into()),
        ("read_buf_oom", "0".into()),
        ("reserved_fds", "20".into()),
        ("cmd_get", n(c.cmd_get)),
        ("cmd_set", n(c.cmd_set)),
        ("cmd_flush", n(c.cmd_flush)),
        ("cmd_touch", n(c.cmd_touch)),
        ("cmd_meta", n(sh.counters.cmd_meta.load(Relaxed))),
        ("get_hits", n(c.get_hits)),
        ("get_misses", n(c.get_misses)),
        ("get_expired", n(c.get_expired)),
        ("get_flushed", n(c.get_flushed)),
        ("delete_misses", n(c.delete_misses)),
        ("delete_hits", n(c.delete_hits)),
        ("incr_misses", n(c.incr_misses)),
        ("incr_hits", n(c.incr_hits)),
        ("decr_misses", n(c.decr_misses)),
        ("decr_hits", n(c.decr_hits)),
        ("cas_misses", n(c.cas_misses)),
        ("cas_hits", n(c.cas_hits)),
        ("cas_badval", n(c.cas_badval)),
        ("touch_hits", n(c.touch_hits)),
        ("touch_misses", n(c.touch_misses)),
        ("store_too_large", n(c.store_too_large)),
        ("store_no_memory", n(c.store_no_memory)),
        (
            "auth_cmds",
            n(sh.auth.as_ref().map_or(0, |a| a.cmds.load(Relaxed))
                + sh.counters.sasl_cmds.load(Relaxed)),
        ),
        (
            "auth_errors",
            n(sh.auth.as_ref().map_or(0, |a| a.errors.load(Relaxed))
                + sh.counters.sasl_errors.load(Relaxed)),
        ),
        ("bytes_read", n(sh.counters.bytes_read.load(Relaxed))),
        ("bytes_written", n(sh.counters.bytes_written.load(Relaxed))),
        ("limit_maxbytes", n(e.limit_maxbytes)),
        ("accepting_conns", "1".into()),
        ("listen_disabled_num", "0".into()),
        ("time_in_listen_disabled_us", "0".into()),
        ("threads", n(sh.settings.threads as u64)),
        ("conn_yields", "0".into()),
        (
            "hash_power_level",
            n(u64::from((e.index_bytes / 9).max(1).ilog2())),
        ),
        ("hash_bytes", n(e.index_bytes)),
        ("hash_is_expanding", "0".into()),
        ("slab_reassign_rescues", "0".into()),
        ("slab_reassign_chunk_rescues", "0".into()),
        ("slab_reassign_evictions_nomem", "0".into()),
        ("slab_reassign_inline_reclaim", "0".into()),
        ("slab_reassign_busy_items", "0".into()),
        ("slab_reassign_busy_deletes", "0".into()),
        ("slab_reassign_running", "0".into()),
        ("slabs_moved", "0".into()),
        ("lru_crawler_running", "0".into()),
        ("lru_crawler_starts", "0".into()),
        ("lru_maintainer_juggles", "0".into()),
        ("malloc_fails", "0".into()),
        ("log_worker_dropped", "0".into()),
        ("log_worker_written", "0".into()),
        ("log_watcher_skipped", "0".into()),
        ("log_watcher_sent", "0".into()),
        ("log_watchers", "0".into()),
    ];
    // Only with -Z, where memcached puts them.
    if let Some(tls) = &sh.tls {
        rows.push((
            "ssl_handshake_errors",
            n(tls.handshake_errors.load(Relaxed)),
        ));
        rows.push((
            "time_since_server_cert_refresh",
            n(tls.loaded.elapsed().as_secs()),
        ));
    }
    rows.extend([
        ("unexpected_napi_ids", "0".into()),
        ("round_robin_fallback", "0".into()),
        ("bytes", n(c.bytes)),
        ("curr_items", n(c.curr_items)),
        ("total_items", n(c.total_items)),
        ("slab_global_page_pool", "0".into()),
        ("expired_unfetched", n(c.expired_unfetched)),
        ("evicted_unfetched", n(c.evicted_unfetched)),
        ("evicted_active", "0".into()),
        ("evictions", n(c.evictions)),
        ("reclaimed", n(c.reclaimed)),
        ("crawler_reclaimed", "0".into()),
        ("crawler_items_checked", "0".into()),
        ("lrutail_reflocked", "0".into()),
        ("moves_to_cold", "0".into()),
        ("moves_to_warm", "0".into()),
        ("moves_within_lru", "0".into()),
        ("direct_reclaims", "0".into()),
        ("lru_bumps_dropped", "0".into()),
        // memkit's own: how its memory is held.
        ("memkit_mapped_bytes", n(e.mapped_bytes)),
        ("memkit_index_bytes", n(e.index_bytes)),
        ("memkit_segments", n(e.segments)),
        ("memkit_segment_size", n(e.segment_size)),
        ("memkit_shards", n(e.shards)),
        ("memkit_evict_retained", n(c.evict_retained)),
    ]);
    for (k, v) in rows {
        write_stat(out, k, v.as_bytes());
    }
    persist_stats(sh, out);
}

/// Persistent mode's counters (absent in memcached mode, as in memcached).
fn persist_stats(sh: &Shared, out: &mut Vec<u8>) {
    let Some(p) = &sh.persist else { return };
    let s = p.stats();
    write_stat(out, "persist_durability", s.durability.as_bytes());
    for (k, v) in [
        ("persist_writes", s.writes),
        ("persist_bytes_written", s.bytes_written),
        ("persist_loads", s.loads),
        ("persist_purged", s.purged),
        ("persist_flushes", s.flushes),
        ("persist_last_flush_unix", s.last_flush_unix),
        ("persist_bytes_on_disk", s.bytes_on_disk),
        ("persist_items", s.items),
        ("persist_items_approx", s.items_approx),
        ("persist_write_errors", s.write_errors),
        ("persist_failed", u64::from(s.failed)),
        ("persist_refused_full", s.refused_full),
        ("persist_disk_free", s.disk_free),
        ("persist_disk_reserve", s.disk_reserve),
        ("persist_disk_low", u64::from(s.disk_low)),
    ] {
        write_stat_u64(out, k, v);
    }
}

fn settings(sh: &Shared, out: &mut Vec<u8>) {
    let st = &sh.settings;
    let ssl = &st.ssl;
    let yes = |b: bool| if b { "yes" } else { "no" };
    let n = |v: u64| v.to_string();
    let rows: Vec<(&str, String)> = vec![
        ("maxbytes", n(sh.engine.stats().limit_maxbytes)),
        ("maxconns", n(st.conn_limit as u64)),
        ("tcpport", n(u64::from(st.port))),
        ("udpport", "0".into()),
        ("inter", st.listen.join(",")),
        ("verbosity", sh.verbosity.load(Relaxed).to_string()),
        ("oldest", "0".into()),
        ("evictions", if st.evict { "on" } else { "off" }.into()),
        ("domain_socket", "NULL".into()),
        ("umask", "700".into()),
        ("shutdown_command", yes(st.enable_shutdown).into()),
        ("growth_factor", format!("{:.2}", st.factor)),
        ("chunk_size", n(st.min_size as u64)),
        ("num_threads", n(st.threads as u64)),
        ("num_threads_per_udp", n(st.threads as u64)),
        ("stat_key_prefix", ":".into()),
        ("detail_enabled", "no".into()),
        ("reqs_per_event", n(st.reqs_per_event as u64)),
        ("cas_enabled", "yes".into()),
        ("tcp_backlog", n(u64::from(st.backlog))),
        ("binding_protocol", st.protocol.name().into()),
        (
            "auth_enabled_sasl",
            if st.sasl { "yes" } else { "no" }.into(),
        ),
        (
            "auth_enabled_ascii",
            sh.auth
                .as_ref()
                .map_or("no".into(), |a| a.path().to_string()),
        ),
        ("item_size_max", n(st.item_size_max as u64)),
        ("maxconns_fast", "yes".into()),
        ("hashpower_init", "0".into()),
        ("slab_reassign", "no".into()),
        ("slab_automove", "0".into()),
        ("slab_automove_ratio", "0.80".into()),
        ("slab_automove_window", "30".into()),
        ("slab_chunk_max", n((st.item_size_max / 2) as u64)),
        ("lru_crawler", "yes".into()),
        ("lru_crawler_sleep", "100".into()),
        ("lru_crawler_tocrawl", "0".into()),
        ("tail_repair_time", "0".into()),
        ("flush_enabled", "yes".into()),
        ("dump_enabled", yes(st.dumping).into()),
        ("hash_algorithm", "foldhash".into()),
        ("lru_maintainer_thread", "no".into()),
        ("lru_segmented", "no".into()),
        ("hot_lru_pct", "0".into()),
        ("warm_lru_pct", "0".into()),
        ("hot_max_factor", "0.00".into()),
        ("warm_max_factor", "0.00".into()),
        ("temp_lru", "no".into()),
        ("temporary_ttl", "0".into()),
        ("idle_timeout", n(st.idle_timeout)),
        ("watcher_logbuf_size", "262144".into()),
        ("worker_logbuf_size", "65536".into()),
        ("read_buf_mem_limit", "0".into()),
        ("track_sizes", "yes".into()),
        ("inline_ascii_response", "no".into()),
        ("ext_item_size", "512".into()),
        ("ext_item_age", "4294967295".into()),
        ("ext_low_ttl", "0".into()),
        ("ext_recache_rate", "2000".into()),
        ("ext_wbuf_size", "4194304".into()),
        ("ext_compact_under", "0".into()),
        ("ext_drop_under", "0".into()),
        ("ext_max_sleep", "1000000".into()),
        ("ext_max_frag", "0.80".into()),
        ("slab_automove_freeratio", "0.010".into()),
        ("ext_drop_unread", "no".into()),
        ("ssl_enabled", yes(ssl.enabled).into()),
        (
            "ssl_chain_cert",
            ssl.chain_cert.clone().unwrap_or("(null)".into()),
        ),
        ("ssl_key", ssl.key.clone().unwrap_or("(null)".into())),
        ("ssl_verify_mode", ssl.verify_mode.to_string()),
        ("ssl_keyformat", "1".into()),
        ("ssl_ciphers", "NULL".into()),
        ("ssl_ca_cert", ssl.ca_cert.clone().unwrap_or("NULL".into())),
        ("ssl_wbuf_size", "16384".into()),
        ("ssl_session_cache", "no".into()),
        ("ssl_kernel_tls", "no".into()),
        (
            "ssl_min_version",
            if ssl.min_version >= 3 {
                "tlsv1.3"
            } else {
                "tlsv1.2"
            }
            .into(),
        ),
        ("num_napi_ids", "(null)".into()),
        ("memory_file", "(null)".into()),
        ("watch_enabled", yes(st.watch).into()),
        ("memkit_eviction_policy", "s3fifo-segments".into()),
    ];
    for (k, v) in rows {
        write_stat(out, k, v.as_bytes());
    }
}

fn items(sh: &Shared, out: &mut Vec<u8>) {
    let e = sh.engine.stats();
    for (i, c) in e.classes.iter().enumerate().filter(|(_, c)| c.items > 0) {
        let id = i + 1;
        let age = u64::from(e.oldest_age);
        for (k, v) in [
            ("number", c.items),
            ("number_hot", 0),
            ("number_warm", 0),
            ("number_cold", c.items),
            ("age_hot", 0),
            ("age_warm", 0),
            ("age", age),
            ("mem_requested", c.bytes),
            ("evicted", c.evicted),
            ("evicted_nonzero", 0),
            ("evicted_time", 0),
            ("outofmemory", 0),
            ("tailrepairs", 0),
            ("reclaimed", c.reclaimed),
            ("expired_unfetched", 0),
            ("evicted_unfetched", 0),
            ("evicted_active", 0),
            ("crawler_reclaimed", 0),
            ("crawler_items_checked", 0),
            ("lrutail_reflocked", 0),
            ("moves_to_cold", 0),
            ("moves_to_warm", 0),
            ("moves_within_lru", 0),
            ("direct_reclaims", 0),
            ("hits_to_hot", 0),
            ("hits_to_warm", 0),
            ("hits_to_cold", 0),
            ("hits_to_temp", 0),
        ] {
            write_stat_u64(out, &format!("items:{id}:{k}"), v);
        }
    }
}

fn slabs(sh: &Shared, out: &mut Vec<u8>) {
    let e = sh.engine.stats();
    let mut active = 0;
    for (i, c) in e.classes.iter().enumerate().filter(|(_, c)| c.items > 0) {
        active += 1;
        let id = i + 1;
        let size = u64::from(c.size.max(1));
        // No pages are reserved per class here; a "page" is reported as the 1 MiB memcached
        // would use, filled as tightly as memkit packs the items. Per-class command counters
        // are not kept (the engine counts per shard): they read 0.
        let per_page = (1 << 20) / size;
        let pages = c.bytes.div_ceil(1 << 20);
        for (k, v) in [
            ("chunk_size", size),
            ("chunks_per_page", per_page),
            ("total_pages", pages),
            ("total_chunks", c.items),
            ("used_chunks", c.items),
            ("free_chunks", 0),
            ("free_chunks_end", 0),
            ("get_hits", 0),
            ("cmd_set", 0),
            ("delete_hits", 0),
            ("incr_hits", 0),
            ("decr_hits", 0),
            ("cas_hits", 0),
            ("cas_badval", 0),
            ("touch_hits", 0),
        ] {
            write_stat_u64(out, &format!("{id}:{k}"), v);
        }
    }
    write_stat_u64(out, "active_slabs", active);
    write_stat_u64(out, "total_malloced", e.mapped_bytes);
}

fn sizes(sh: &Shared, out: &mut Vec<u8>) {
    // memcached's sizes histogram: 32-byte buckets of item size.
    let mut hist = std::collections::BTreeMap::<usize, u64>::new();
    sh.engine
        .for_each_item(|m| *hist.entry(m.size.div_ceil(32) * 32).or_default() += 1);
    write_stat(out, "sizes_status", b"enabled");
    for (size, n) in hist {
        write_stat_u64(out, &size.to_string(), n);
    }
}

fn conns(sh: &Shared, out: &mut Vec<u8>) {
    for (id, c) in sh.conns.lock().iter() {
        write_stat(
            out,
            &format!("{id}:addr"),
            format!("tcp:{}", c.peer).as_bytes(),
        );
        write_stat(
            out,
            &format!("{id}:listen_addr"),
            format!("tcp:{}", c.local).as_bytes(),
        );
        write_stat(out, &format!("{id}:state"), c.state.as_bytes());
        write_stat_u64(
            out,
            &format!("{id}:secs_since_last_cmd"),
            sh.started
                .elapsed()
                .as_secs()
                .saturating_sub(c.last_cmd.load(Relaxed)),
        );
    }
}

fn cachedump(sh: &Shared, args: &[&[u8]], out: &mut Vec<u8>) {
    let parse = |i: usize| {
        args.get(i)
            .and_then(|a| std::str::from_utf8(a).ok()?.parse::<usize>().ok())
    };
    let (Some(class), limit) = (parse(1), parse(2).unwrap_or(0)) else {
        out.extend_from_slice(b"CLIENT_ERROR bad command line format\r\n");
        return;
    };
    let mut n = 0;
    sh.engine.for_each_item(|m| {
        if class_id(sh, m.size) as usize == class && (limit == 0 || n < limit) {
            n += 1;
            out.extend_from_slice(b"ITEM ");
            out.extend_from_slice(m.key);
            out.extend_from_slice(
                format!(
                    " [{} b; {} s]\r\n",
                    m.value_len,
                    m.exptime_unix.unwrap_or(0)
                )
                .as_bytes(),
            );
        }
    });
}

/// `lru_crawler metadump all`: one line per live item, then `END`.
pub fn write_metadump(sh: &Shared, out: &mut Vec<u8>) {
    sh.engine.for_each_item(|m| {
        let exp = m.exptime_unix.map_or(-1, |e| e as i64);
        let line = format!(
            "key={} exp={exp} la={} cas={} fetch={} cls={} size={}\n",
            crate::watch::uriencode(m.key),
            m.last_access_unix,
            m.cas,
            if m.fetched { "yes" } else { "no" },
            class_id(sh, m.size),
            m.size
        );
        out.extend_from_slice(line.as_bytes());
    });
    out.extend_from_slice(b"END\r\n");
}

/// The memcached-style class id (from 1) of an item of `size` bytes.
pub fn class_id(sh: &Shared, size: usize) -> u32 {
    let classes = &sh.class_sizes;
    (classes
        .partition_point(|&s| (s as usize) < size)
        .min(classes.len() - 1)
        + 1) as u32
}
