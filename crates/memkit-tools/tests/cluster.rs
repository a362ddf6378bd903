//! `memkit cluster status|add|remove` against a replicated group of memkitd processes (the
//! testkit's `Group`), and the group's figures in memkitd's exporter: three voters and one
//! leader seen from any node; a fourth node added through the CLI becomes a voter that
//! holds every earlier write; a node removed leaves the membership and the leader's
//! follower lags; on `-Y` nodes the command needs credentials; a plain memkitd has no raft
//! series and refuses the command.

mod common;

use std::time::{Duration, Instant};

use common::{Memkitd, dead_addr, memkit, stderr, stdout};
use memkit_testkit::server::{Group, GroupOptions};
use memkit_testkit::wire::{BlockingWire, Until};

const ELECTION: Duration = Duration::from_secs(15);

/// `memkit --servers node(id) cluster ...` with `opts` first.
fn cluster(g: &Group, id: u64, opts: &[&str], args: &[&str]) -> std::process::Output {
    let server = format!("127.0.0.1:{}", g.port(id));
    memkit(&server, &[opts, &["cluster"], args].concat(), None)
}

/// `cluster status --format json` through node `id`, parsed.
fn status(g: &Group, id: u64, opts: &[&str]) -> serde_json::Value {
    let o = cluster(g, id, opts, &["status", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)))
}

/// The members' ids, voters and learners, and the leader (from the member flagged so).
fn members(st: &serde_json::Value) -> (Vec<u64>, Vec<u64>, Vec<u64>) {
    let (mut voters, mut learners, mut leaders) = (Vec::new(), Vec::new(), Vec::new());
    for m in st["members"].as_array().unwrap() {
        let id = m["id"].as_u64().unwrap();
        if m["voter"] == true {
            voters.push(id);
        } else {
            learners.push(id);
        }
        if m["leader"] == true {
            leaders.push(id);
        }
    }
    (voters, learners, leaders)
}

/// Polls `check` on node `id`'s scrape until it holds (the node refreshes its figures every
/// 20 ms, a lag needs a heartbeat).
fn scrape_until(g: &Group, id: u64, what: &str, check: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = g.scrape(id);
        if check(&text) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "node {id}: never {what}:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The value of the sample `series` (name and labels, as written).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

fn set(g: &Group, id: u64, key: &str, value: &str) {
    let req = format!("set {key} 0 0 {}\r\n{value}\r\n", value.len());
    let got = g.wire(id).ask(req.as_bytes(), Until::LINE);
    assert_eq!(got.trim_end(), "STORED", "set {key} through node {id}");
}

/// Seen from every node, through `cluster status` (JSON and text) and `memkit top`: three
/// voters and one leader.
fn three_voters_one_leader(g: &Group, leader: u64, follower: u64) {
    // Every node reports the same membership: three voters, one leader.
    for id in g.ids() {
        let st = status(g, id, &[]);
        assert_eq!(st["node"], id);
        assert_eq!(st["leader"], leader);
        assert_eq!(members(&st), (vec![1, 2, 3], vec![], vec![leader]), "{st}");
    }
    let o = cluster(g, follower, &[], &["status"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains(&format!(
            "node {follower} at 127.0.0.1:{}: follower, leader {leader}",
            g.port(follower)
        )),
        "{text}"
    );
    let rows: Vec<&str> = text.lines().filter(|l| l.contains(" voter ")).collect();
    assert_eq!(rows.len(), 3, "{text}");
    assert_eq!(rows.iter().filter(|r| r.contains(" leader ")).count(), 1);

    // `memkit top` gives each node a row of its replication section.
    let all: Vec<String> = g
        .ids()
        .iter()
        .map(|&i| format!("127.0.0.1:{}", g.port(i)))
        .collect();
    let o = memkit(&all.join(","), &["top", "-b", "-n", "1"], None);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    let section: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.contains("replicated group"))
        .skip(2)
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(section.len(), 3, "{text}");
    assert_eq!(
        section.iter().filter(|l| l.contains(" leader ")).count(),
        1,
        "{text}"
    );
}

/// The exporter: the leader's figures and its followers' lag; a follower's, without lags.
fn exporter_of_a_group(g: &Group, leader: u64, follower: u64) {
    let text = scrape_until(g, leader, "lists both followers' lag", |t| {
        t.matches("memkit_raft_follower_lag{node=").count() == 2
    });
    assert_eq!(
        sample(&text, "memkit_raft_role{role=\"leader\"}"),
        Some(1.0)
    );
    assert_eq!(sample(&text, "memkit_raft_leader"), Some(leader as f64));
    assert!(sample(&text, "memkit_raft_term").unwrap() >= 1.0, "{text}");
    for name in ["memkit_raft_commit_index", "memkit_raft_applied_index"] {
        assert!(sample(&text, name).is_some(), "{name} in\n{text}");
    }
    let text = g.scrape(follower);
    assert_eq!(
        sample(&text, "memkit_raft_role{role=\"follower\"}"),
        Some(1.0)
    );
    assert_eq!(
        sample(&text, "memkit_raft_role{role=\"leader\"}"),
        Some(0.0)
    );
    assert!(!text.contains("memkit_raft_follower_lag"), "{text}");
}

#[test]
fn status_add_and_remove_through_the_cli_and_the_exporter() {
    let mut g = Group::start_with(GroupOptions {
        metrics: true,
        ..Default::default()
    });
    let leader = g.leader(ELECTION);

    let follower = g.ids().into_iter().find(|&i| i != leader).unwrap();
    three_voters_one_leader(&g, leader, follower);
    exporter_of_a_group(&g, leader, follower);

    // Writes before the fourth node exists.
    for i in 0..100 {
        set(&g, 1 + i % 3, &format!("before{i}"), &format!("v{i}"));
    }

    // Node 4 started as a joining node is started, then added through a follower.
    let four = g.add_node();
    let o = cluster(&g, follower, &[], &["add", "4", &g.raft_addr(four)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "voters=1,2,3,4 learners=\n");
    let st = status(&g, four, &[]);
    assert_eq!(
        members(&st),
        (vec![1, 2, 3, 4], vec![], vec![leader]),
        "{st}"
    );
    // Its own role follows once it has applied the change that made it a voter.
    let deadline = Instant::now() + ELECTION;
    while status(&g, four, &[])["role"] != "follower" {
        assert!(Instant::now() < deadline, "node 4 never became a follower");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Every earlier write is readable on it (one `memkit get` of all 100 keys).
    let keys: Vec<String> = (0..100).map(|i| format!("before{i}")).collect();
    let mut args = vec!["get"];
    args.extend(keys.iter().map(String::as_str));
    let o = memkit(&format!("127.0.0.1:{}", g.port(four)), &args, None);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let want: String = (0..100).map(|i| format!("v{i}\n")).collect();
    assert_eq!(stdout(&o), want);
    scrape_until(&g, leader, "lists node 4's lag", |t| {
        t.contains("memkit_raft_follower_lag{node=\"4\"}")
    });

    // Remove a follower other than node 4, through node 4; it leaves every view.
    let gone = g
        .ids()
        .into_iter()
        .find(|&i| i != leader && i != four)
        .unwrap();
    let o = cluster(&g, four, &[], &["remove", &gone.to_string()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mut left: Vec<u64> = vec![1, 2, 3, 4];
    left.retain(|&i| i != gone);
    let ids = left
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",");
    assert_eq!(stdout(&o), format!("voters={ids} learners=\n"));
    g.kill(gone);
    let st = status(&g, leader, &[]);
    assert_eq!(members(&st), (left.clone(), vec![], vec![leader]), "{st}");
    let gone_lag = format!("memkit_raft_follower_lag{{node=\"{gone}\"}}");
    scrape_until(&g, leader, "drops the removed node's lag", |t| {
        !t.contains(&gone_lag) && t.matches("memkit_raft_follower_lag{node=").count() == 2
    });
    // The group still takes writes, and node 4 reads them.
    set(&g, leader, "after", "yes");
    let o = memkit(
        &format!("127.0.0.1:{}", g.port(four)),
        &["get", "after"],
        None,
    );
    assert_eq!(stdout(&o), "yes\n", "{}", stderr(&o));

    // What the node refuses is a failure: status 2 and its reason (node ids start at 1).
    let o = cluster(&g, leader, &[], &["add", "0", "127.0.0.1:1"]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert!(stderr(&o).contains("cluster add 0"), "{}", stderr(&o));
}

#[test]
fn a_plain_server_has_no_group_and_binary_is_refused() {
    let mport = memkit_testkit::server::free_port();
    let m = Memkitd::start(&["--metrics-addr", &format!("127.0.0.1:{mport}")]);
    let o = memkit(&m.addr(), &["cluster", "status"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("not a node of a replicated group"),
        "{}",
        stderr(&o)
    );
    let mut w = BlockingWire::tcp(("127.0.0.1", mport)).unwrap();
    let text = w.ask(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", Until::Closed);
    assert!(text.contains("memcached_up 1"), "{text}");
    assert!(!text.contains("memkit_raft"), "{text}");
    // A first server that cannot be reached is skipped for the next.
    let servers = format!("{},{}", dead_addr(), m.addr());
    let o = memkit(&servers, &["cluster", "status"], None);
    assert!(stderr(&o).contains("not a node of a replicated group"));
    // --binary: refused before any server is contacted.
    let o = memkit(&dead_addr(), &["--binary", "cluster", "status"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("cannot run with --binary"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn on_authenticating_nodes_the_command_needs_credentials() {
    let dir = memkit_testkit::tempdir("cluster-auth");
    let users = dir.path().join("users");
    std::fs::write(&users, "alice:secret\n").unwrap();
    let g = Group::start_with(GroupOptions {
        nodes: 3,
        args: vec!["-Y".into(), users.display().to_string()],
        ..Default::default()
    });
    let auth = ["--username", "alice", "--password", "secret"];
    // The group's own helpers speak without credentials: wait for a leader through the CLI.
    let deadline = Instant::now() + ELECTION;
    let st = loop {
        let st = status(&g, 1, &auth);
        if members(&st).2.len() == 1 {
            break st;
        }
        assert!(Instant::now() < deadline, "no leader: {st}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(members(&st).0, vec![1, 2, 3]);
    for opts in [&[][..], &["--username", "alice", "--password", "wrong"][..]] {
        for args in [&["status"][..], &["remove", "3"][..]] {
            let o = cluster(&g, 2, opts, args);
            assert_eq!(
                o.status.code(),
                Some(2),
                "{opts:?} {args:?}: {}",
                stdout(&o)
            );
            assert!(stdout(&o).is_empty(), "{}", stdout(&o));
        }
    }
    // Nothing was removed.
    assert_eq!(members(&status(&g, 3, &auth)).0, vec![1, 2, 3]);
}
