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
    let s = |out: &mut Vec<u8>, k: &str, v: u64| write_stat_u64(out, k, v);
    s(out, "pid", u64::from(std::process::id()));
    s(out, "uptime", sh.started.elapsed().as_secs());
    s(out, "time", now);
    write_stat(out, "version", crate::VERSION.as_bytes());
    write_stat(out, "libevent", b"tokio");
    s(out, "pointer_size", 64);
    write_stat(out, "rusage_user", format!("{user:.6}").as_bytes());
    write_stat(out, "rusage_system", format!("{sys:.6}").as_bytes());
    s(out, "max_connections", sh.settings.conn_limit as u64);
    s(
        out,
        "curr_connections",
        sh.counters.curr_connections.load(Relaxed),
    );
    s(
        out,
        "total_connections",
        sh.counters.total_connections.load(Relaxed),
    );
    s(
        out,
        "rejected_connections",
        sh.counters.rejected_connections.load(Relaxed),
    );
    s(
        out,
        "connection_structures",
        sh.counters.curr_connections.load(Relaxed),
    );
    s(out, "cmd_get", c.cmd_get);
    s(out, "cmd_set", c.cmd_set);
    s(out, "cmd_flush", c.cmd_flush);
    s(out, "cmd_touch", c.cmd_touch);
    s(out, "cmd_meta", sh.counters.cmd_meta.load(Relaxed));
    for (k, v) in [
        ("get_hits", c.get_hits),
        ("get_misses", c.get_misses),
        ("get_expired", c.get_expired),
        ("get_flushed", c.get_flushed),
        ("delete_misses", c.delete_misses),
        ("delete_hits", c.delete_hits),
        ("incr_misses", c.incr_misses),
        ("incr_hits", c.incr_hits),
        ("decr_misses", c.decr_misses),
        ("decr_hits", c.decr_hits),
        ("cas_misses", c.cas_misses),
        ("cas_hits", c.cas_hits),
        ("cas_badval", c.cas_badval),
        ("touch_hits", c.touch_hits),
        ("touch_misses", c.touch_misses),
        ("store_too_large", c.store_too_large),
        ("store_no_memory", c.store_no_memory),
        ("auth_cmds", 0),
        ("auth_errors", 0),
    ] {
        s(out, k, v);
    }
    s(out, "bytes_read", sh.counters.bytes_read.load(Relaxed));
    s(
        out,
        "bytes_written",
        sh.counters.bytes_written.load(Relaxed),
    );
    s(out, "limit_maxbytes", e.limit_maxbytes);
    s(out, "accepting_conns", 1);
    s(out, "threads", sh.settings.threads as u64);
    s(out, "hash_bytes", e.index_bytes);
    s(out, "hash_is_expanding", 0);
    for (k, v) in [
        ("evictions", c.evictions),
        ("reclaimed", c.reclaimed),
        ("curr_items", c.curr_items),
        ("total_items", c.total_items),
        ("expired_unfetched", c.expired_unfetched),
        ("evicted_unfetched", c.evicted_unfetched),
        ("evicted_active", 0),
        ("bytes", c.bytes),
        // memkit's own: how its memory is held.
        ("memkit_mapped_bytes", e.mapped_bytes),
        ("memkit_index_bytes", e.index_bytes),
        ("memkit_segments", e.segments),
        ("memkit_segment_size", e.segment_size),
        ("memkit_shards", e.shards),
        ("memkit_evict_retained", c.evict_retained),
    ] {
        s(out, k, v);
    }
}

fn settings(sh: &Shared, out: &mut Vec<u8>) {
    let st = &sh.settings;
    let yes = |b: bool| if b { "yes" } else { "no" };
    let rows: Vec<(&str, String)> = vec![
        ("maxbytes", sh.engine.stats().limit_maxbytes.to_string()),
        ("maxconns", st.conn_limit.to_string()),
        ("tcpport", st.port.to_string()),
        ("udpport", "0".into()),
        ("inter", st.listen.join(",")),
        ("verbosity", sh.verbosity.load(Relaxed).to_string()),
        ("oldest", "0".into()),
        ("evictions", if st.evict { "on" } else { "off" }.into()),
        ("domain_socket", "NULL".into()),
        ("umask", "700".into()),
        ("shutdown_command", yes(st.enable_shutdown).into()),
        ("growth_factor", format!("{:.2}", st.factor)),
        ("chunk_size", st.min_size.to_string()),
        ("num_threads", st.threads.to_string()),
        ("num_threads_per_udp", st.threads.to_string()),
        ("stat_key_prefix", ":".into()),
        ("detail_enabled", "no".into()),
        ("reqs_per_event", st.reqs_per_event.to_string()),
        ("cas_enabled", "yes".into()),
        ("tcp_backlog", st.backlog.to_string()),
        ("binding_protocol", "ascii".into()),
        ("auth_enabled_sasl", "no".into()),
        ("auth_enabled_ascii", "no".into()),
        ("item_size_max", st.item_size_max.to_string()),
        ("maxconns_fast", "yes".into()),
        ("hashpower_init", "0".into()),
        ("slab_reassign", "no".into()),
        ("slab_automove", "0".into()),
        ("lru_crawler", "yes".into()),
        ("idle_timeout", st.idle_timeout.to_string()),
        ("dump_enabled", yes(st.dumping).into()),
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
        for (k, v) in [
            ("number", c.items),
            ("number_hot", 0),
            ("number_warm", 0),
            ("number_cold", c.items),
            ("age", u64::from(e.oldest_age)),
            ("mem_requested", c.bytes),
            ("evicted", c.evicted),
            ("evicted_nonzero", 0),
            ("evicted_time", 0),
            ("outofmemory", 0),
            ("tailrepairs", 0),
            ("reclaimed", c.reclaimed),
            ("expired_unfetched", 0),
            ("evicted_unfetched", 0),
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
        // would use, filled as tightly as memkit packs the items.
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
            ("mem_requested", c.bytes),
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
            c.last_cmd.elapsed().as_secs(),
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
