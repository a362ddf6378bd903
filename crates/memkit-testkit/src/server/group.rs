//! [`Group`]: a replicated group of memkitd child processes (`--raft-*`) on 127.0.0.1, each
//! with its `--persist` directory in one scratch directory, that a test kills (SIGKILL),
//! restarts, wipes and cuts off from the others. The one way tests start a group.
//!
//! With [`GroupOptions::relays`], every node dials every other through a
//! [`crate::relay::Relay`] of its own (node `i`'s `--raft-peers` names, for node `j`, the
//! relay from `i` to `j`; memkit-raft dials the addresses a node's own list gives), so a
//! test can cut any one way between two nodes, or a node off from all, and heal it.
//!
//! [`Group::add_node`] starts one more node, outside the group until a `cluster add` (to
//! any member) names it; with [`GroupOptions::metrics`] every node serves its exporter
//! (`--metrics-addr`), read with [`Group::scrape`]. With `-Z` among
//! [`GroupOptions::args`] the peer protocol is TLS, the client port plain (`notls:`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::relay::Relay;
use crate::server::{TestServer, free_port, is_root};
use crate::tempdir::TempDir;
use crate::wire::{BlockingWire, Until};

/// How a [`Group`] starts.
#[derive(Debug, Clone)]
pub struct GroupOptions {
    /// How many nodes (ids 1..=n).
    pub nodes: usize,
    /// Peers reach each other through relays the test can cut.
    pub relays: bool,
    /// More flags for every node.
    pub args: Vec<String>,
    /// Nodes whose `--persist` directory is elsewhere (a small disk that fills).
    pub dirs: BTreeMap<u64, PathBuf>,
    /// Every node serves Prometheus metrics on a port of its own ([`Group::metrics_port`]).
    pub metrics: bool,
}

impl Default for GroupOptions {
    fn default() -> Self {
        GroupOptions {
            nodes: 3,
            relays: false,
            args: Vec::new(),
            dirs: BTreeMap::new(),
            metrics: false,
        }
    }
}

struct Member {
    port: u16,
    raft_port: u16,
    metrics_port: Option<u16>,
    server: Option<TestServer>,
}

impl Member {
    fn new(metrics: bool) -> Member {
        Member {
            port: free_port(),
            raft_port: free_port(),
            metrics_port: metrics.then(free_port),
            server: None,
        }
    }
}

/// A replicated group of memkitd processes; each is killed when the group drops.
pub struct Group {
    members: Vec<Member>,
    /// `relays[i][j]`: node `i + 1`'s way to node `j + 1`.
    relays: Vec<Vec<Option<Relay>>>,
    dir: TempDir,
    args: Vec<String>,
    dirs: BTreeMap<u64, PathBuf>,
    /// Whether nodes reach each other through relays (nodes added later too).
    relayed: bool,
    /// Whether nodes serve metrics (nodes added later too).
    metrics: bool,
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group")
            .field("nodes", &self.members.len())
            .finish_non_exhaustive()
    }
}

impl Group {
    /// `nodes` nodes, without relays, once each serves (not yet with a leader: see
    /// [`Group::leader`]).
    pub fn start(nodes: usize) -> Group {
        Group::start_with(GroupOptions {
            nodes,
            ..Default::default()
        })
    }

    /// A group as `opts` asks.
    pub fn start_with(opts: GroupOptions) -> Group {
        let members: Vec<Member> = (0..opts.nodes).map(|_| Member::new(opts.metrics)).collect();
        let relays = (0..opts.nodes)
            .map(|i| {
                (0..opts.nodes)
                    .map(|j| {
                        (opts.relays && i != j)
                            .then(|| Relay::start(([127, 0, 0, 1], members[j].raft_port).into()))
                    })
                    .collect()
            })
            .collect();
        let mut g = Group {
            members,
            relays,
            dir: crate::tempdir::tempdir("group"),
            args: opts.args,
            dirs: opts.dirs,
            relayed: opts.relays,
            metrics: opts.metrics,
        };
        for id in g.ids() {
            g.start_node(id);
        }
        g
    }

    /// The nodes' ids.
    pub fn ids(&self) -> Vec<u64> {
        (1..=self.members.len() as u64).collect()
    }

    fn member(&self, id: u64) -> &Member {
        &self.members[id as usize - 1]
    }

    /// Node `id`'s `--persist` directory.
    pub fn dir(&self, id: u64) -> PathBuf {
        match self.dirs.get(&id) {
            Some(d) => d.clone(),
            None => self.dir.path().join(format!("node{id}")),
        }
    }

    /// Node `id`'s client port.
    pub fn port(&self, id: u64) -> u16 {
        self.member(id).port
    }

    /// Node `id`'s peer address (`127.0.0.1:PORT`), the one `cluster add` names.
    pub fn raft_addr(&self, id: u64) -> String {
        format!("127.0.0.1:{}", self.member(id).raft_port)
    }

    /// Node `id`'s metrics port. Panics unless the group started with
    /// [`GroupOptions::metrics`].
    pub fn metrics_port(&self, id: u64) -> u16 {
        self.member(id)
            .metrics_port
            .expect("a group started with metrics")
    }

    /// Node `id`'s `GET /metrics` body.
    pub fn scrape(&self, id: u64) -> String {
        let mut w = BlockingWire::tcp(("127.0.0.1", self.metrics_port(id)))
            .expect("connect to the metrics port")
            .with_timeout(Duration::from_secs(20));
        let reply = w.ask(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", Until::Closed);
        match reply.split_once("\r\n\r\n") {
            Some((head, body)) if head.starts_with("HTTP/1.1 200") => body.to_string(),
            _ => panic!("node {id}: GET /metrics: {reply}"),
        }
    }

    /// Starts one more node (the next id, its own directory and ports, the group's flags),
    /// once it serves; its id. Its `--raft-peers` lists every node so far and itself, as a
    /// node joining a group is started. It is no member (and names no leader, so
    /// [`Group::leader`] waits for it too) until a `cluster add ID` of its id and
    /// [`Group::raft_addr`] reaches the group.
    pub fn add_node(&mut self) -> u64 {
        self.members.push(Member::new(self.metrics));
        let n = self.members.len();
        let id = n as u64;
        // Each earlier node's way to the new one, then the new one's to every node.
        let to_new = ([127, 0, 0, 1], self.members[n - 1].raft_port).into();
        for row in &mut self.relays {
            row.push(self.relayed.then(|| Relay::start(to_new)));
        }
        let row = (0..n)
            .map(|j| {
                let to = ([127, 0, 0, 1], self.members[j].raft_port).into();
                (self.relayed && j != n - 1).then(|| Relay::start(to))
            })
            .collect();
        self.relays.push(row);
        self.start_node(id);
        id
    }

    /// Node `id`'s server. Panics if it is down.
    pub fn server(&self, id: u64) -> &TestServer {
        self.member(id).server.as_ref().expect("the node is up")
    }

    /// Whether node `id` runs.
    pub fn is_up(&self, id: u64) -> bool {
        self.member(id).server.is_some()
    }

    /// A connection to node `id`'s client port.
    pub fn wire(&self, id: u64) -> BlockingWire {
        BlockingWire::tcp(("127.0.0.1", self.port(id)))
            .expect("connect to the node")
            .with_timeout(Duration::from_secs(20))
    }

    /// The `--raft-peers` node `id` is given: itself at its port, the others at their
    /// ports or at its relays to them.
    fn peers_of(&self, id: u64) -> String {
        self.ids()
            .into_iter()
            .map(|j| {
                let addr = match &self.relays[id as usize - 1][j as usize - 1] {
                    Some(r) => r.addr(),
                    None => ([127, 0, 0, 1], self.member(j).raft_port).into(),
                };
                format!("{j}={addr}")
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Starts node `id` (again) on its directory and ports, once it serves.
    pub fn start_node(&mut self, id: u64) {
        let m = self.member(id);
        // With `-Z` in the options the peers speak TLS; the client port stays plain
        // (`notls:`), so that the group's own helpers (`wire`, `stats`, `leader`) still work.
        let tls = self.args.iter().any(|a| a == "-Z" || a == "--enable-ssl");
        let listen = if tls { "notls:127.0.0.1" } else { "127.0.0.1" };
        let mut args: Vec<String> = vec![
            "-p".into(),
            m.port.to_string(),
            "-l".into(),
            listen.into(),
            "--persist".into(),
            self.dir(id).display().to_string(),
            "--raft-node".into(),
            id.to_string(),
            "--raft-listen".into(),
            format!("127.0.0.1:{}", m.raft_port),
            "--raft-peers".into(),
            self.peers_of(id),
            "--raft-heartbeat-ms".into(),
            "100".into(),
            "--raft-timeout-ms".into(),
            "3000".into(),
        ];
        if let Some(p) = m.metrics_port {
            args.extend(["--metrics-addr".into(), format!("127.0.0.1:{p}")]);
        }
        if is_root() {
            args.extend(["-u".into(), "root".into()]);
        }
        args.extend(self.args.iter().cloned());
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let server = TestServer::launch(&argv).start();
        self.members[id as usize - 1].server = Some(server);
    }

    /// SIGKILLs node `id` (if up).
    pub fn kill(&mut self, id: u64) {
        if let Some(mut s) = self.members[id as usize - 1].server.take() {
            s.kill();
        }
    }

    /// Removes node `id`'s directory: it must be down.
    pub fn wipe(&mut self, id: u64) {
        assert!(!self.is_up(id), "wipe a node that is down");
        let _ = std::fs::remove_dir_all(self.dir(id));
    }

    /// Node `id`'s `stats`, by name.
    pub fn stats(&self, id: u64) -> BTreeMap<String, String> {
        let reply = self.wire(id).ask(b"stats\r\n", Until::END);
        reply
            .lines()
            .filter_map(|l| l.strip_prefix("STAT "))
            .filter_map(|l| l.split_once(' '))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// One of node `id`'s `raft_*` stats as a number.
    pub fn raft_stat(&self, id: u64, name: &str) -> u64 {
        self.stats(id)
            .get(name)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("node {id}: no {name}"))
    }

    /// Waits (up to `within`) until one running node leads and every running node names
    /// it; its id. Panics otherwise.
    pub fn leader(&self, within: Duration) -> u64 {
        let deadline = Instant::now() + within;
        loop {
            let up: Vec<u64> = self.ids().into_iter().filter(|&i| self.is_up(i)).collect();
            let named: Vec<u64> = up
                .iter()
                .map(|&i| self.raft_stat(i, "raft_leader"))
                .collect();
            if let Some(&l) = named.first()
                && l != 0
                && named.iter().all(|&n| n == l)
                && self.is_up(l)
                && self.stats(l).get("raft_role").map(String::as_str) == Some("leader")
            {
                return l;
            }
            assert!(
                Instant::now() < deadline,
                "no leader agreed on within {within:?}: {named:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Cuts node `id` off from every other node, both ways (it keeps its clients).
    pub fn isolate(&self, id: u64) {
        self.each_way(id, |r| r.cut());
    }

    /// Undoes [`Group::isolate`].
    pub fn heal(&self, id: u64) {
        self.each_way(id, |r| r.heal());
    }

    fn each_way(&self, id: u64, f: impl Fn(&Relay)) {
        let i = id as usize - 1;
        for j in 0..self.members.len() {
            for r in [&self.relays[i][j], &self.relays[j][i]]
                .into_iter()
                .flatten()
            {
                f(r);
            }
        }
        assert!(
            self.relays.iter().flatten().any(Option::is_some),
            "a group started without relays cannot cut a node off"
        );
    }
}
