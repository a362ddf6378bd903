//! `stats` and its subcommands, with memcached's names; `lru_crawler metadump` and `mgdump`.
//!
//! memkitd has no slab classes; its size classes only count. `stats items` and `stats slabs`
//! report them under memcached's field names (class ids, `chunk_size`, `mem_requested`,
//! `used_chunks`) so that tools reading memcached's output draw the same size histogram;
//! fields about slab pages are derived and documented in `docs/protocol-notes.md`.

use std::sync::atomic::Ordering::Relaxed;

use memkit_engine::EngineStats;
use memkit_protocol::render::{write_end, write_stat, write_stat_u64};

use memkit_engine::CrawledItem;

use crate::exec::Dump;
use crate::state::{ConnAddrs, Shared};

mod flash;
mod router;

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
        Some(b"extstore") if flash::pages(sh, out) => {}
        Some(b"router") if router::lines(sh, out) => {}
        Some(b"reset") => {
            sh.engine.reset_stats();
            if let Some(r) = sh.router() {
                r.tally.reset();
            }
            sh.counters.reset();
            sh.watchers.reset();
            sh.detail.clear();
            // memcached keeps these with the per-thread counters that `stats reset` zeroes.
            if let Some(a) = &sh.auth {
                a.cmds.store(0, Relaxed);
                a.errors.store(0, Relaxed);
            }
            out.extend_from_slice(b"RESET\r\n");
            return;
        }
        Some(b"detail") => {
            match args.get(1).copied() {
                Some(b"dump") => sh.detail.dump(out),
                Some(b"on") => sh.detail.set_enabled(true),
                Some(b"off") => sh.detail.set_enabled(false),
                _ => out.extend_from_slice(b"CLIENT_ERROR usage: stats detail on|off|dump\r\n"),
            }
            if matches!(args.get(1).copied(), Some(b"on" | b"off")) {
                out.extend_from_slice(b"OK\r\n");
            }
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
    // memcached 1.6.18's names, in its order. Figures about machinery memkitd does not have
    // (response objects, slab rebalancing, the LRU crawler and maintainer, NAPI, segmented
    // LRUs; the flash tier's without `-o ext_path`) are left out, as memcached leaves out
    // those of a feature turned off; the list is in docs/protocol-notes.md.
    let mut rows: Vec<(&str, String)> = vec![
        ("pid", n(u64::from(std::process::id()))),
        ("uptime", n(sh.started.elapsed().as_secs())),
        ("time", n(now)),
        ("version", crate::config::VERSION.into()),
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
    ];
    match sh.router() {
        // What the routed commands came to, not the (unused) local store's counts; the
        // lines a router cannot know left out (docs/router.md).
        Some(r) => {
            let unknown = ["get_expired", "get_flushed", "store_no_memory"];
            let routed = command_rows(sh, &r.tally.counters());
            rows.extend(routed.into_iter().filter(|(k, _)| !unknown.contains(k)));
        }
        None => rows.extend(command_rows(sh, c)),
    }
    // The flash tier's read counters go after `get_flushed`, as in memcached.
    let at = rows
        .iter()
        .position(|(k, _)| *k == "get_flushed")
        .map_or(rows.len(), |i| i + 1);
    rows.splice(at..at, flash::read_rows(sh, c));
    if sh.settings.idle_timeout > 0 {
        rows.push(("idle_kicks", n(sh.counters.idle_kicks.load(Relaxed))));
    }
    let w = sh.watchers.stats();
    rows.extend([
        ("bytes_read", n(sh.counters.bytes_read.load())),
        ("bytes_written", n(sh.counters.bytes_written.load())),
        ("limit_maxbytes", n(e.limit_maxbytes)),
        // Past -c memkitd accepts and refuses (maxconns_fast); it pauses only when accept
        // fails (out of descriptors), as memcached disables its listener.
        (
            "accepting_conns",
            n(u64::from(!sh.counters.listen_paused.load(Relaxed))),
        ),
        (
            "listen_disabled_num",
            n(sh.counters.listen_disabled_num.load(Relaxed)),
        ),
        (
            "time_in_listen_disabled_us",
            n(sh.counters.time_in_listen_disabled_us.load(Relaxed)),
        ),
        ("threads", n(sh.settings.threads as u64)),
        ("conn_yields", n(sh.counters.conn_yields.load(Relaxed))),
        (
            "hash_power_level",
            n(u64::from((e.index_bytes / 9).max(1).ilog2())),
        ),
        ("hash_bytes", n(e.index_bytes)),
        ("log_worker_dropped", n(w.log_worker_dropped)),
        ("log_worker_written", n(w.log_worker_written)),
        ("log_watcher_skipped", n(w.log_watcher_skipped)),
        ("log_watcher_sent", n(w.log_watcher_sent)),
        ("log_watchers", n(w.log_watchers)),
    ]);
    rows.extend(flash::store_rows(sh));
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
        ("bytes", n(c.bytes)),
        ("curr_items", n(c.curr_items)),
        ("total_items", n(c.total_items)),
        ("expired_unfetched", n(c.expired_unfetched)),
        ("evicted_unfetched", n(c.evicted_unfetched)),
        (
            "evicted_active",
            n(e.classes.iter().map(|k| k.counters.evicted_active).sum()),
        ),
        ("evictions", n(c.evictions)),
        ("reclaimed", n(c.reclaimed)),
        // memkit's own: how its memory is held.
        ("memkit_mapped_bytes", n(e.mapped_bytes)),
        ("memkit_index_bytes", n(e.index_bytes)),
        ("memkit_segments", n(e.segments)),
        ("memkit_segment_size", n(e.segment_size)),
        ("memkit_shards", n(e.shards)),
        ("memkit_evict_retained", n(c.evict_retained)),
        ("memkit_detail_untracked", n(sh.detail.untracked())),
        ("memkit_io_moves", n(sh.counters.io_moves.load(Relaxed))),
    ]);
    rows.extend(flash::memkit_rows(sh, &e));
    for (k, v) in rows {
        write_stat(out, k, v.as_bytes());
    }
    persist_stats(sh, out);
    raft_stats(sh, out);
}

/// A replicated node's place in its group (absent otherwise).
fn raft_stats(sh: &Shared, out: &mut Vec<u8>) {
    let Some(rep) = sh.replica() else { return };
    let f = rep.figures();
    write_stat_u64(out, "raft_node", f.node);
    write_stat(out, "raft_role", f.role.as_bytes());
    for (k, v) in [
        ("raft_leader", f.leader),
        ("raft_term", f.term),
        ("raft_last_log_index", f.last_log_index),
        ("raft_commit_index", f.commit_index),
        ("raft_applied_index", f.applied_index),
    ] {
        write_stat_u64(out, k, v);
    }
}

/// The command counters, from `cmd_get` to `auth_errors`.
fn command_rows(sh: &Shared, c: &memkit_engine::Counters) -> Vec<(&'static str, String)> {
    let n = |v: u64| v.to_string();
    vec![
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
    ]
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
    let yes = |b: bool| if b { "yes" } else { "no" };
    let n = |v: u64| v.to_string();
    // memcached 1.6.18's names and order. Settings of machinery memkitd does not have (slab
    // automove, the LRU crawler, segmented LRUs, the logger's buffers) are left out, as are
    // flags accepted without effect, and the `ext_*` without the flash tier;
    // docs/protocol-notes.md lists them.
    let mut rows: Vec<(&str, String)> = vec![
        ("maxbytes", n(sh.engine.stats().limit_maxbytes)),
        ("maxconns", n(st.conn_limit as u64)),
        ("tcpport", n(u64::from(st.port))),
        // memkitd has no UDP: memcached's value for a UDP port turned off.
        ("udpport", "0".into()),
        ("inter", st.listen.join(",")),
        ("verbosity", sh.verbosity.load(Relaxed).to_string()),
        ("evictions", if st.evict { "on" } else { "off" }.into()),
        (
            "domain_socket",
            st.unix_socket
                .as_ref()
                .map_or("NULL".into(), |p| p.display().to_string()),
        ),
        ("umask", format!("{:o}", st.unix_mask)),
        ("shutdown_command", yes(st.enable_shutdown).into()),
        // The size classes are memcached's defaults whatever -f and -n say
        // (memkit_engine::stats): 96 bytes (48 of data) growing by 1.25.
        ("growth_factor", "1.25".into()),
        ("chunk_size", "48".into()),
        ("num_threads", n(st.threads as u64)),
        (
            "stat_key_prefix",
            char::from(sh.detail.delimiter()).to_string(),
        ),
        ("detail_enabled", yes(sh.detail.enabled()).into()),
        // Worker loops' connections give way after this many requests (conn_yields).
        ("reqs_per_event", n(st.reqs_per_event as u64)),
        // -C is accepted but CAS stays on.
        ("cas_enabled", "yes".into()),
        ("tcp_backlog", n(u64::from(st.backlog))),
        ("binding_protocol", st.protocol.name().into()),
        ("auth_enabled_sasl", yes(st.sasl).into()),
        (
            "auth_enabled_ascii",
            sh.auth
                .as_ref()
                .map_or("no".into(), |a| a.path().to_string()),
        ),
        ("item_size_max", n(st.item_size_max as u64)),
        ("maxconns_fast", "yes".into()),
        ("slab_reassign", "no".into()),
        ("slab_automove", "0".into()),
        (
            "slab_chunk_max",
            n(*sh.class_sizes.last().unwrap_or(&0) as u64),
        ),
        ("lru_crawler", "no".into()),
        ("flush_enabled", yes(st.flush_enabled).into()),
        ("dump_enabled", yes(st.dumping).into()),
        ("hash_algorithm", "foldhash".into()),
        ("lru_maintainer_thread", "no".into()),
        ("lru_segmented", "no".into()),
        ("temp_lru", "no".into()),
        ("idle_timeout", n(st.idle_timeout)),
        ("track_sizes", "yes".into()),
        ("inline_ascii_response", "no".into()),
    ];
    rows.extend(flash::settings_rows(st));
    rows.extend(ssl_settings(st));
    rows.extend([
        ("num_napi_ids", "(null)".into()),
        // The warm restart file (`-e`), unless --persist makes it unused.
        (
            "memory_file",
            match (&st.memory_file, &st.persist) {
                (Some(p), None) => p.display().to_string(),
                _ => "(null)".into(),
            },
        ),
        ("watch_enabled", yes(st.watch).into()),
        ("memkit_eviction_policy", "s3fifo-segments".into()),
        // What the worker loops wait with (--io, as the kernel allows it).
        ("memkit_io", st.io.name().into()),
    ]);
    for (k, v) in rows {
        write_stat(out, k, v.as_bytes());
    }
}

fn ssl_settings(st: &crate::config::Settings) -> Vec<(&'static str, String)> {
    let ssl = &st.ssl;
    let yes = |b: bool| if b { "yes" } else { "no" };
    vec![
        ("ssl_enabled", yes(ssl.enabled).into()),
        (
            "ssl_chain_cert",
            ssl.chain_cert.clone().unwrap_or("(null)".into()),
        ),
        ("ssl_key", ssl.key.clone().unwrap_or("(null)".into())),
        ("ssl_verify_mode", ssl.verify_mode.to_string()),
        // PEM (SSL_FILETYPE_PEM), the only format memkitd reads.
        ("ssl_keyformat", "1".into()),
        // rustls' own cipher suites: none configured.
        ("ssl_ciphers", "NULL".into()),
        ("ssl_ca_cert", ssl.ca_cert.clone().unwrap_or("NULL".into())),
        // rustls keeps a server-side session cache (256 sessions) unless told otherwise.
        ("ssl_session_cache", "yes".into()),
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
    ]
}

fn items(sh: &Shared, out: &mut Vec<u8>) {
    let e = sh.engine.stats();
    // One queue per shard, not per class: the age of the oldest segment stands for every
    // class. Fields about hot/warm/cold LRUs, the crawler and tail repairs are left out.
    let age = u64::from(e.oldest_age);
    for (i, c) in e.classes.iter().enumerate().filter(|(_, c)| c.items > 0) {
        let id = i + 1;
        let k = &c.counters;
        for (name, v) in [
            ("number", c.items),
            ("age", age),
            ("mem_requested", c.bytes),
            ("evicted", c.evicted),
            ("evicted_nonzero", k.evicted_nonzero),
            ("reclaimed", c.reclaimed),
            ("expired_unfetched", k.expired_unfetched),
            ("evicted_unfetched", k.evicted_unfetched),
            ("evicted_active", k.evicted_active),
        ] {
            write_stat_u64(out, &format!("items:{id}:{name}"), v);
        }
    }
}

fn slabs(sh: &Shared, out: &mut Vec<u8>) {
    let e = sh.engine.stats();
    let mut active = 0;
    // memcached lists a class once it has had a page; here, once it holds an item or has
    // counted a command (a class emptied by deletes keeps its counters, as there).
    let used = |c: &&memkit_engine::ClassStats| {
        c.items > 0 || c.counters != memkit_engine::ClassCounters::default()
    };
    for (i, c) in e.classes.iter().enumerate().filter(|(_, c)| used(c)) {
        active += 1;
        let id = i + 1;
        let size = u64::from(c.size.max(1));
        // No pages are reserved per class here; a "page" is reported as the 1 MiB memcached
        // would use, filled as tightly as memkit packs the items (no chunk is ever free).
        let per_page = (1 << 20) / size;
        let pages = c.bytes.div_ceil(1 << 20);
        let k = &c.counters;
        for (name, v) in [
            ("chunk_size", size),
            ("chunks_per_page", per_page),
            ("total_pages", pages),
            ("total_chunks", c.items),
            ("used_chunks", c.items),
            ("get_hits", k.get_hits),
            ("cmd_set", k.cmd_set),
            ("delete_hits", k.delete_hits),
            ("incr_hits", k.incr_hits),
            ("decr_hits", k.decr_hits),
            ("cas_hits", k.cas_hits),
            ("cas_badval", k.cas_badval),
            ("touch_hits", k.touch_hits),
        ] {
            write_stat_u64(out, &format!("{id}:{name}"), v);
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
    // memcached's get_conn_text: `tcp:` or `tcp6:` and the address; a UNIX client has no
    // address of its own (memcached prints its zeroed one as `?:<AF 0>`), its listen
    // address is the socket's path.
    let tcp = |a: &std::net::SocketAddr| match a {
        std::net::SocketAddr::V4(_) => format!("tcp:{a}"),
        std::net::SocketAddr::V6(_) => format!("tcp6:{a}"),
    };
    let conns: Vec<_> = sh
        .conns
        .lock()
        .iter()
        .map(|(id, c)| (*id, c.clone()))
        .collect();
    for (id, c) in conns {
        let (addr, listen) = match c.addrs() {
            Some(ConnAddrs::Unix(path)) => (
                "?:<AF 0>".to_string(),
                format!("unix:{}", path.unwrap_or_default().display()),
            ),
            Some(ConnAddrs::Tcp(peer, local)) => (tcp(&peer), tcp(&local)),
            None => continue,
        };
        write_stat(out, &format!("{id}:addr"), addr.as_bytes());
        write_stat(out, &format!("{id}:listen_addr"), listen.as_bytes());
        write_stat(out, &format!("{id}:state"), c.state().name().as_bytes());
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

/// memcached's cap on a `stats cachedump` reply (`item_cachedump`'s buffer).
const CACHEDUMP_MAX: usize = 2 << 20;

fn cachedump(sh: &Shared, args: &[&[u8]], out: &mut Vec<u8>) {
    let parse = |i: usize| {
        args.get(i)
            .and_then(|a| std::str::from_utf8(a).ok()?.parse::<usize>().ok())
    };
    let (Some(class), limit) = (parse(1), parse(2).unwrap_or(0)) else {
        out.extend_from_slice(b"CLIENT_ERROR bad command line format\r\n");
        return;
    };
    let (start, mut n) = (out.len(), 0);
    let mut cursor = memkit_engine::DumpCursor::default();
    let full =
        |n: usize, out: &Vec<u8>| (limit != 0 && n >= limit) || out.len() - start >= CACHEDUMP_MAX;
    while !full(n, out)
        && sh.engine.crawl(&mut cursor, 64, |m| {
            if class_id(sh, m.size) as usize != class || full(n, out) {
                return;
            }
            n += 1;
            out.extend_from_slice(b"ITEM ");
            out.extend_from_slice(m.key);
            let tail = format!(
                " [{} b; {} s]\r\n",
                m.value_len,
                m.exptime_unix.unwrap_or(0)
            );
            out.extend_from_slice(tail.as_bytes());
        })
    {}
}

/// `lru_crawler metadump all`: one line per live item, then `END`.
/// One item's line of a dump (`lru_crawler metadump` or `mgdump`), in memcached's format.
pub fn dump_line(sh: &Shared, kind: Dump, m: &CrawledItem<'_>, out: &mut Vec<u8>) {
    match kind {
        Dump::Meta => {
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
        }
        Dump::Mg => {
            out.extend_from_slice(b"mg ");
            if m.key.iter().all(|&b| b > b' ' && b != 0x7f) {
                out.extend_from_slice(m.key);
                out.extend_from_slice(b"\r\n");
            } else {
                memkit_protocol::base64::encode_into(m.key, out);
                out.extend_from_slice(b" b\r\n");
            }
        }
    }
}

/// The line that ends a dump.
pub fn dump_end(kind: Dump, out: &mut Vec<u8>) {
    out.extend_from_slice(match kind {
        Dump::Meta => b"END\r\n",
        Dump::Mg => b"EN\r\n",
    });
}

/// The memcached-style class id (from 1) of an item of `size` bytes.
pub fn class_id(sh: &Shared, size: usize) -> u32 {
    let classes = &sh.class_sizes;
    (classes
        .partition_point(|&s| (s as usize) < size)
        .min(classes.len() - 1)
        + 1) as u32
}
