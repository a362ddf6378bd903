//! Stats that are measured: per-prefix detail from every encoding, per-class command and
//! unfetched counters, the watch counters, idle kicks, `lru_crawler mgdump`, and an
//! exporter that leaves out what memkitd does not measure. Formats are compared with real
//! memcached in tests/interop/test_stats_truth.py.

use std::time::Duration;

use memkit_testkit::TestServer;
use memkit_testkit::wire::Until;

/// `STAT name value` of a stats reply.
fn stat(reply: &str, name: &str) -> Option<u64> {
    reply.lines().find_map(|l| {
        let rest = l.strip_prefix("STAT ")?.strip_prefix(name)?;
        rest.strip_prefix(' ')?.trim().parse().ok()
    })
}

fn sorted_lines(s: &str) -> Vec<&str> {
    let mut v: Vec<&str> = s.lines().collect();
    v.sort_unstable();
    v
}

/// A binary request frame (no extras unless given).
fn bin(opcode: u8, key: &[u8], extras: &[u8], value: &[u8]) -> Vec<u8> {
    let mut f = vec![0x80, opcode];
    f.extend_from_slice(&(key.len() as u16).to_be_bytes());
    f.push(extras.len() as u8);
    f.extend_from_slice(&[0, 0, 0]);
    let body = (extras.len() + key.len() + value.len()) as u32;
    f.extend_from_slice(&body.to_be_bytes());
    f.extend_from_slice(&[0; 12]);
    f.extend_from_slice(extras);
    f.extend_from_slice(key);
    f.extend_from_slice(value);
    f
}

#[tokio::test]
async fn detail_counts_every_encoding_while_on() {
    let s = TestServer::start(&[]);
    let mut c = s.wire().await;
    // Off by default: nothing is counted.
    c.ask(b"set user:0 0 0 1\r\nx\r\n", Until::End(b"STORED\r\n"))
        .await;
    assert_eq!(c.ask(b"stats detail dump\r\n", Until::END).await, "END\r\n");
    assert_eq!(
        c.ask(b"stats detail on\r\n", Until::End(b"OK\r\n")).await,
        "OK\r\n"
    );
    let settings = c.ask(b"stats settings\r\n", Until::END).await;
    assert!(
        settings.contains("STAT detail_enabled yes\r\n"),
        "{settings}"
    );
    assert!(
        settings.contains("STAT stat_key_prefix :\r\n"),
        "{settings}"
    );
    // Text: 2 sets, a get of 3 keys (1 hit), a delete.
    c.ask(
        b"set user:1 0 0 1\r\nx\r\nadd user:1 0 0 1\r\ny\r\nget user:1 user:2 nodelim\r\ndelete user:1\r\n",
        Until::End(b"DELETED\r\n"),
    )
    .await;
    // Meta: a set, a hit and a miss, a delete.
    c.ask(
        b"ms user:3 1\r\nz\r\nmg user:3 v\r\nmg user:4 v\r\nmd user:3\r\nmn\r\n",
        Until::End(b"MN\r\n"),
    )
    .await;
    // Binary (its own connection: the first byte picks the protocol): SET (flags and
    // exptime as extras), GET hit, DELETE.
    let mut b = s.wire().await;
    for frame in [
        bin(0x01, b"sess:1", &[0; 8], b"v"),
        bin(0x00, b"sess:1", &[], &[]),
        bin(0x04, b"sess:1", &[], &[]),
    ] {
        b.send(&frame).await;
        b.read(Until::Frame).await;
    }
    let dump = c.ask(b"stats detail dump\r\n", Until::END).await;
    assert_eq!(
        sorted_lines(&dump),
        [
            "END",
            "PREFIX sess get 1 hit 1 set 1 del 1",
            "PREFIX user get 4 hit 2 set 3 del 2",
        ],
        "{dump}"
    );
    // Off: the counts stay and stop moving.
    assert_eq!(
        c.ask(b"stats detail off\r\n", Until::End(b"OK\r\n")).await,
        "OK\r\n"
    );
    c.ask(b"get user:1\r\n", Until::END).await;
    assert_eq!(c.ask(b"stats detail dump\r\n", Until::END).await, dump);
    assert_eq!(
        c.ask(b"stats detail\r\n", Until::LINE).await,
        "CLIENT_ERROR usage: stats detail on|off|dump\r\n"
    );
    // `stats reset` forgets every prefix, as memcached's does.
    c.ask(b"stats reset\r\n", Until::End(b"RESET\r\n")).await;
    assert_eq!(c.ask(b"stats detail dump\r\n", Until::END).await, "END\r\n");
    s.stop().await;
}

#[tokio::test]
async fn dash_d_sets_the_delimiter_and_turns_detail_on() {
    let s = TestServer::start(&["-D", "/"]);
    let mut c = s.wire().await;
    let settings = c.ask(b"stats settings\r\n", Until::END).await;
    assert!(
        settings.contains("STAT detail_enabled yes\r\n"),
        "{settings}"
    );
    assert!(
        settings.contains("STAT stat_key_prefix /\r\n"),
        "{settings}"
    );
    c.ask(
        b"set a/b 0 0 1\r\nx\r\nset a:b 0 0 1\r\nx\r\n",
        Until::End(b"STORED\r\nSTORED\r\n"),
    )
    .await;
    assert_eq!(
        c.ask(b"stats detail dump\r\n", Until::END).await,
        "PREFIX a get 0 hit 0 set 1 del 0\r\nEND\r\n"
    );
    s.stop().await;
}

#[tokio::test]
async fn per_class_command_counters_are_measured() {
    let s = TestServer::start(&[]);
    let mut c = s.wire().await;
    // Small items: class 1 (96 bytes).
    // Eleven reply lines: STORED, a hit (3), a miss, 7, 6, TOUCHED, a hit with its CAS (3).
    c.ask(
        b"set k 0 0 1\r\n5\r\nget k\r\nget nope\r\nincr k 2\r\ndecr k 1\r\ntouch k 100\r\ngets k\r\n",
        Until::Lines(11),
    )
    .await;
    let gets = c.ask(b"gets k\r\n", Until::END).await;
    let cas: u64 = gets.split_whitespace().nth(4).unwrap().parse().unwrap();
    c.ask(
        format!("cas k 0 0 1 {cas}\r\n7\r\ncas k 0 0 1 {cas}\r\n8\r\ndelete k\r\n").as_bytes(),
        Until::End(b"DELETED\r\n"),
    )
    .await;
    // A bigger item lands in another class.
    let big = "v".repeat(500);
    c.ask(
        format!("set big 0 0 500\r\n{big}\r\nget big\r\n").as_bytes(),
        Until::END,
    )
    .await;
    let slabs = c.ask(b"stats slabs\r\n", Until::END).await;
    for (name, v) in [
        ("1:get_hits", 3),
        ("1:cmd_set", 3),
        ("1:delete_hits", 1),
        ("1:incr_hits", 1),
        ("1:decr_hits", 1),
        ("1:cas_hits", 1),
        ("1:cas_badval", 1),
        ("1:touch_hits", 1),
    ] {
        assert_eq!(stat(&slabs, name), Some(v), "{name} in {slabs}");
    }
    // Class 1 is empty now but keeps its counters; the big item's class has its own.
    let big_class = slabs
        .lines()
        .filter_map(|l| l.strip_prefix("STAT "))
        .find(|l| l.ends_with(":get_hits 1") && !l.starts_with("1:"))
        .unwrap_or_else(|| panic!("no class with the big item's hit: {slabs}"));
    let id = big_class.split(':').next().unwrap();
    assert_eq!(stat(&slabs, &format!("{id}:cmd_set")), Some(1), "{slabs}");
    assert_eq!(stat(&slabs, "active_slabs"), Some(2), "{slabs}");
    // Summed over the classes they are the general counters.
    let general = c.ask(b"stats\r\n", Until::END).await;
    assert_eq!(stat(&general, "get_hits"), Some(4));
    assert_eq!(stat(&general, "cas_badval"), Some(1));
    c.ask(b"stats reset\r\n", Until::End(b"RESET\r\n")).await;
    let slabs = c.ask(b"stats slabs\r\n", Until::END).await;
    assert_eq!(stat(&slabs, "1:get_hits"), None, "reset: {slabs}");
    assert_eq!(stat(&slabs, &format!("{id}:get_hits")), Some(0), "{slabs}");
    s.stop().await;
}

/// Sums `items:<class>:<field>` over the classes.
fn class_sum(items: &str, field: &str) -> u64 {
    let tail = format!(":{field} ");
    items
        .lines()
        .filter(|l| l.contains(&tail))
        .filter_map(|l| l.rsplit(' ').next()?.trim().parse::<u64>().ok())
        .sum()
}

#[tokio::test]
async fn per_class_expired_unfetched() {
    let s = TestServer::start(&[]);
    let mut c = s.wire().await;
    c.ask(b"set fetched 0 1 1\r\nx\r\nget fetched\r\n", Until::END)
        .await;
    c.ask(b"set lonely 0 1 1\r\nx\r\n", Until::End(b"STORED\r\n"))
        .await;
    // `stats items` lists a class while it holds items (as memcached's does).
    c.ask(b"set keep 0 0 1\r\nx\r\n", Until::End(b"STORED\r\n"))
        .await;
    tokio::time::sleep(Duration::from_millis(2100)).await;
    // The reads find both expired and reclaim them: one was never fetched.
    c.ask(b"get fetched lonely\r\n", Until::END).await;
    let items = c.ask(b"stats items\r\n", Until::END).await;
    assert_eq!(
        stat(&items, "items:1:expired_unfetched"),
        Some(1),
        "{items}"
    );
    assert_eq!(stat(&items, "items:1:reclaimed"), Some(2), "{items}");
    s.stop().await;
}

#[tokio::test]
async fn per_class_evicted_counts() {
    // -m 2 with 20 KB values: the store evicts long before the loop ends.
    let s = TestServer::start(&["-m", "2"]);
    let mut c = s.wire().await;
    let value = "v".repeat(20_000);
    for i in 0..400 {
        let get = if i % 2 == 0 {
            String::new()
        } else {
            format!("get fill{i}\r\n")
        };
        c.ask(
            format!("set fill{i} 0 1000 20000\r\n{value}\r\n{get}mn\r\n").as_bytes(),
            Until::End(b"MN\r\n"),
        )
        .await;
    }
    let items = c.ask(b"stats items\r\n", Until::END).await;
    let general = c.ask(b"stats\r\n", Until::END).await;
    let evicted = stat(&general, "evictions").unwrap();
    let unfetched = stat(&general, "evicted_unfetched").unwrap();
    assert!(
        evicted > 0 && unfetched > 0 && unfetched <= evicted,
        "{general}"
    );
    assert_eq!(class_sum(&items, "evicted"), evicted, "{items}");
    assert_eq!(class_sum(&items, "evicted_unfetched"), unfetched, "{items}");
    // Every filler had a TTL.
    assert_eq!(class_sum(&items, "evicted_nonzero"), evicted, "{items}");
    s.stop().await;
}

#[tokio::test]
async fn watch_counters_follow_the_stream() {
    let s = TestServer::start(&[]);
    let mut c = s.wire().await;
    let general = c.ask(b"stats\r\n", Until::END).await;
    assert_eq!(stat(&general, "log_watchers"), Some(0));
    let mut w = s.wire().await;
    w.ask(b"watch fetchers\r\n", Until::End(b"OK\r\n")).await;
    c.ask(b"set wk 0 0 1\r\nx\r\n", Until::End(b"STORED\r\n"))
        .await;
    // Gets until the watcher has seen 5 lines (it is subscribed once its OK is written).
    let mut seen = 0;
    let mut buf = Vec::new();
    for _ in 0..100 {
        c.ask(b"get wk\r\n", Until::END).await;
        buf.extend(w.pending(Duration::from_millis(50)).await);
        seen = buf.iter().filter(|&&b| b == b'\n').count();
        if seen >= 5 {
            break;
        }
    }
    assert!(seen >= 5, "{}", String::from_utf8_lossy(&buf));
    let general = c.ask(b"stats\r\n", Until::END).await;
    assert_eq!(stat(&general, "log_watchers"), Some(1), "{general}");
    let sent = stat(&general, "log_watcher_sent").unwrap();
    assert!(sent >= seen as u64, "sent {sent}, seen {seen}");
    assert!(stat(&general, "log_worker_written").unwrap() >= sent);
    assert_eq!(stat(&general, "log_watcher_skipped"), Some(0));
    drop(w);
    let mut gone = false;
    for _ in 0..100 {
        // The watcher notices the close at its next read or event.
        c.ask(b"get wk\r\n", Until::END).await;
        let general = c.ask(b"stats\r\n", Until::END).await;
        if stat(&general, "log_watchers") == Some(0) {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(gone, "log_watchers did not go back to 0");
    s.stop().await;
}

#[tokio::test]
async fn idle_kicks_count_connections_closed_by_the_idle_timeout() {
    let s = TestServer::start(&["-o", "idle_timeout=1"]);
    let mut c = s.wire().await;
    let general = c.ask(b"stats\r\n", Until::END).await;
    assert_eq!(stat(&general, "idle_kicks"), Some(0), "{general}");
    assert!(c.closed().await, "an idle connection is closed");
    let mut c = s.wire().await;
    let general = c.ask(b"stats\r\n", Until::END).await;
    assert_eq!(stat(&general, "idle_kicks"), Some(1), "{general}");
    s.stop().await;
    // Without a timeout memcached does not report it.
    let s = TestServer::start(&[]);
    let general = s.wire().await.ask(b"stats\r\n", Until::END).await;
    assert_eq!(stat(&general, "idle_kicks"), None);
    s.stop().await;
}

#[tokio::test]
async fn mgdump_lists_live_keys_as_meta_gets() {
    let s = TestServer::start(&[]);
    let mut c = s.wire().await;
    // `AAEC` is base64 for the bytes 0 1 2: a key only meta's `b` can write.
    c.ask(
        b"set plain 0 0 1\r\nx\r\nset gone 0 0 1\r\nx\r\ndelete gone\r\nms AAEC 1 b\r\ny\r\nmn\r\n",
        Until::End(b"MN\r\n"),
    )
    .await;
    let dump = c
        .ask(b"lru_crawler mgdump hash\r\n", Until::End(b"EN\r\n"))
        .await;
    assert_eq!(
        sorted_lines(&dump),
        ["EN", "mg AAEC b", "mg plain"],
        "{dump}"
    );
    s.stop().await;
    let s = TestServer::start(&["-X"]);
    assert_eq!(
        s.wire()
            .await
            .ask(b"lru_crawler mgdump hash\r\n", Until::LINE)
            .await,
        "ERROR key dump not allowed\r\n"
    );
    s.stop().await;
}

#[tokio::test]
async fn the_exporter_has_only_measured_figures() {
    let s = TestServer::start(&[]);
    let mut c = s.wire().await;
    c.ask(b"set k 0 0 1\r\nx\r\nget k\r\n", Until::END).await;
    let text = memkit_server::metrics::exposition(s.shared());
    assert!(
        text.contains(
            "memcached_slab_commands_total{slab=\"1\",command=\"get\",status=\"hit\"} 1\n"
        ),
        "{text}"
    );
    // Measured since worker loops give way after -R requests.
    assert!(
        text.contains("memcached_connections_yielded_total 0\n"),
        "{text}"
    );
    for absent in [
        "memcached_lru_crawler_",
        "memcached_slab_chunks_free",
        "memcached_slab_hot_items",
        "memcached_slab_items_tailrepairs_total",
        "memcached_slab_lru_hits_total",
    ] {
        assert!(!text.contains(absent), "{absent} in {text}");
    }
    s.stop().await;
}
