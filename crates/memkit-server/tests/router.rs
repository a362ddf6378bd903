//! Router mode (`memkitd --route FILE`) end to end: a router process in front of memkitd
//! backends (in this process, or child processes where a test kills one with SIGKILL).
//! What must hold: every protocol's commands answer through the router as one server
//! answers them, each key on the server memkit-client's placement names; each route kind
//! does what `docs/router.md` says; a dead backend costs the client only what the route's
//! policy says (and is marked down, probed, and taken back); a reload under load loses no
//! request, and a bad file keeps the routes in force.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[path = "support/http.rs"]
mod http;

use memkit_client::{Distribution, Placement, ServerSpec};
use memkit_testkit::server::TestServer;
use memkit_testkit::server::router::{Router, pool};
use memkit_testkit::wire::{BlockingWire, Until};

fn backends(n: usize) -> Vec<TestServer> {
    (0..n)
        .map(|_| TestServer::start(&["-m", "16", "-t", "1"]))
        .collect()
}

fn addrs(bs: &[TestServer]) -> Vec<String> {
    bs.iter().map(|b| b.tcp_addr().to_string()).collect()
}

fn ask(w: &mut BlockingWire, req: &str) -> String {
    w.ask(req.as_bytes(), Until::LINE).trim_end().to_string()
}

/// `get key` on one backend directly: its value, if it holds the key.
fn held(b: &TestServer, key: &str) -> Option<String> {
    let mut w = BlockingWire::tcp(b.tcp_addr()).unwrap();
    let r = w.ask(format!("get {key}\r\n").as_bytes(), Until::END);
    r.lines()
        .nth(1)
        .filter(|_| r.starts_with("VALUE"))
        .map(str::to_string)
}

/// The next reply bytes up to `until`, as text without the last line's end.
fn read(w: &mut BlockingWire, until: Until<'_>) -> String {
    String::from_utf8_lossy(&w.read(until))
        .trim_end()
        .to_string()
}

fn hash_route(pool: &str) -> String {
    format!("[[route]]\ntype = \"hash\"\npool = \"{pool}\"\n")
}

/// Waits until `f` holds (a background fill, a probe), for at most 10 s.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "{what}: not within 10 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn text_and_meta_commands_answer_as_one_server_does() {
    let bs = backends(3);
    let r = Router::start(&(pool("main", &addrs(&bs), "") + &hash_route("main")), &[]);
    let mut w = r.wire();
    assert_eq!(ask(&mut w, "set a 5 0 1\r\nx\r\n"), "STORED");
    assert_eq!(ask(&mut w, "add a 0 0 1\r\ny\r\n"), "NOT_STORED");
    assert_eq!(ask(&mut w, "append a 0 0 2\r\nyz\r\n"), "STORED");
    assert_eq!(ask(&mut w, "prepend a 0 0 1\r\nw\r\n"), "STORED");
    let g = w.ask(b"gets a\r\n", Until::END);
    let head = g.lines().next().unwrap();
    assert!(head.starts_with("VALUE a 5 4 "), "{g}");
    let cas: u64 = head.rsplit(' ').next().unwrap().parse().unwrap();
    assert_eq!(
        ask(&mut w, &format!("cas a 5 0 1 {}\r\nq\r\n", cas + 1)),
        "EXISTS"
    );
    assert_eq!(
        ask(&mut w, &format!("cas a 5 0 1 {cas}\r\nq\r\n")),
        "STORED"
    );
    assert_eq!(ask(&mut w, "incr n 1\r\n"), "NOT_FOUND");
    assert_eq!(ask(&mut w, "set n 0 0 2\r\n10\r\n"), "STORED");
    assert_eq!(ask(&mut w, "incr n 5\r\n"), "15");
    assert_eq!(ask(&mut w, "decr n 20\r\n"), "0");
    assert_eq!(
        ask(&mut w, "incr a 1\r\n"),
        "CLIENT_ERROR cannot increment or decrement non-numeric value"
    );
    assert_eq!(ask(&mut w, "touch a 100\r\n"), "TOUCHED");
    assert_eq!(ask(&mut w, "touch zz 100\r\n"), "NOT_FOUND");
    // A multi-get over every server, merged in the client's order, misses left out.
    for k in 0..20 {
        assert_eq!(
            ask(&mut w, &format!("set k{k} 0 0 2\r\nv{}\r\n", k % 10)),
            "STORED"
        );
    }
    let keys: Vec<String> = (0..20).rev().map(|k| format!("k{k}")).collect();
    let reply = w.ask(
        format!("get {} nope\r\n", keys.join(" ")).as_bytes(),
        Until::END,
    );
    let got: Vec<&str> = reply
        .lines()
        .filter_map(|l| l.strip_prefix("VALUE "))
        .collect();
    let want: Vec<String> = (0..20).rev().map(|k| format!("k{k} 0 2")).collect();
    assert_eq!(got, want);
    // noreply: nothing comes back, and the write happened.
    w.send(b"set q 0 0 1 noreply\r\nz\r\ndelete a noreply\r\n");
    assert_eq!(ask(&mut w, "get q\r\n"), "VALUE q 0 1");
    assert_eq!(read(&mut w, Until::END), "z\r\nEND");
    assert_eq!(ask(&mut w, "get a\r\n"), "END");
    // Meta: flags the backend answers (f, c, t, v, s), flags the router renders (k, O, q).
    assert_eq!(
        ask(&mut w, "ms m 3 F7 T100 c\r\nabc\r\n").split(' ').next(),
        Some("HD")
    );
    let mg = w.ask(b"mg m v f t s k Oxy\r\n", Until::LINE);
    assert!(
        mg.starts_with("VA 3 f7 t") && mg.contains(" s3 km Oxy"),
        "{mg}"
    );
    assert_eq!(read(&mut w, Until::LINE), "abc");
    assert_eq!(ask(&mut w, "mg missing v q\r\nmn\r\n"), "MN");
    assert_eq!(ask(&mut w, "ma n MI D7 v\r\n"), "VA 1");
    assert_eq!(read(&mut w, Until::LINE), "7");
}

#[test]
fn binary_requests_quiet_ones_included_go_through() {
    use memkit_protocol::binary::{Status, decode_response, encode_request, op};
    let bs = backends(2);
    let r = Router::start(&(pool("main", &addrs(&bs), "") + &hash_route("main")), &[]);
    let mut w = r.wire();
    let mut req = Vec::new();
    let extras = [0, 0, 0, 9, 0, 0, 0, 0];
    encode_request(&mut req, op::SETQ, 1, 0, &extras, b"bk", b"bv");
    encode_request(&mut req, op::GETK, 2, 0, &[], b"bk", &[]);
    encode_request(&mut req, op::GETQ, 3, 0, &[], b"nothing", &[]);
    encode_request(&mut req, op::NOOP, 4, 0, &[], &[], &[]);
    w.send(&req);
    let mut replies: Vec<(u32, u16, Vec<u8>, Vec<u8>)> = Vec::new();
    while replies.last().is_none_or(|&(o, ..)| o != 4) {
        let frame = w.read(Until::Frame);
        let Ok(Some((r, _))) = decode_response(&frame) else {
            panic!("not a response frame: {frame:?}");
        };
        let h = r.header;
        replies.push((h.opaque, h.status, r.key.to_vec(), r.value.to_vec()));
    }
    // SETQ's success and GETQ's miss are silent: only the GETK hit and the NOOP answer.
    let ok = Status::Ok as u16;
    assert_eq!(
        replies,
        vec![
            (2, ok, b"bk".to_vec(), b"bv".to_vec()),
            (4, ok, Vec::new(), Vec::new())
        ]
    );
    // The text side sees the binary store, flags and all.
    assert_eq!(ask(&mut r.wire(), "get bk\r\n"), "VALUE bk 9 2");
}

#[test]
fn keys_land_where_memkit_clients_placements_put_them() {
    let bs = backends(3);
    let specs: Vec<ServerSpec> = addrs(&bs).iter().map(|a| a.parse().unwrap()).collect();
    for name in ["ketama", "modula", "php-consistent", "php-standard"] {
        let cfg = pool("main", &addrs(&bs), &format!("placement = {name:?}")) + &hash_route("main");
        let r = Router::start(&cfg, &[]);
        let mut w = r.wire();
        let placement = Placement::build(name.parse::<Distribution>().unwrap(), &specs, &[]);
        for i in 0..300 {
            let key = format!("{name}:{i}");
            assert_eq!(ask(&mut w, &format!("set {key} 0 0 1\r\nv\r\n")), "STORED");
            let home = placement.server_for(key.as_bytes()).unwrap();
            for (j, b) in bs.iter().enumerate() {
                assert_eq!(held(b, &key).is_some(), j == home, "{key} under {name}");
            }
        }
    }
}

/// Pools `main` (three servers) and `spare` (one), the route `kind` over them.
fn two_pools(main: &[String], spare: &[String], route: &str) -> String {
    pool(
        "main",
        main,
        "tko_after = 2\nprobe_ms = 100\ntimeout_ms = 500",
    ) + &pool("spare", spare, "")
        + route
}

#[test]
fn a_dead_backend_costs_what_the_route_says_and_comes_back() {
    // Children, so that one can die by SIGKILL.
    let mut bs: Vec<TestServer> = (0..3).map(|_| TestServer::process(&["-m", "16"])).collect();
    let spare = backends(1);
    let failover =
        "[[route]]\nprefix = \"f:\"\ntype = \"failover\"\npools = [\"main\", \"spare\"]\n";
    let cfg = two_pools(
        &addrs(&bs),
        &addrs(&spare),
        &(failover.to_string() + &hash_route("main")),
    );
    let r = Router::start(&cfg, &[]);
    let specs: Vec<ServerSpec> = addrs(&bs).iter().map(|a| a.parse().unwrap()).collect();
    let placement = Placement::build(Distribution::Ketama, &specs, &[]);
    let victim = 1;
    let on_victim = |k: &str| placement.server_for(k.as_bytes()) == Some(victim);
    let stop = Arc::new(AtomicBool::new(false));
    let (errors, done) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let load: Vec<_> = (0..2)
        .map(|t| {
            let (stop, errors, done) = (stop.clone(), errors.clone(), done.clone());
            let mut w = r.wire();
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let key = format!("f:{t}:{}", i % 200);
                    let set = ask(&mut w, &format!("set {key} 0 0 1\r\nv\r\n"));
                    let get = w.ask(format!("get {key}\r\n").as_bytes(), Until::END);
                    // Through failover: every store is taken somewhere, every read answers.
                    if set != "STORED" || !get.ends_with("END\r\n") {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
            })
        })
        .collect();
    eventually("load running", || done.load(Ordering::Relaxed) > 200);
    let port = bs[victim].port();
    bs[victim].kill();
    let before = done.load(Ordering::Relaxed);
    eventually("load going on after the kill", || {
        done.load(Ordering::Relaxed) > before + 500
    });
    eventually("the dead server marked down", || {
        r.stat("pool:main:1:down") == 1
    });
    // The hash route answers as its policy says: a read is a miss, a store an error.
    let k = (0..)
        .map(|i| format!("h{i}"))
        .find(|k| on_victim(k))
        .unwrap();
    let mut w = r.wire();
    assert_eq!(ask(&mut w, &format!("get {k}\r\n")), "END");
    assert!(ask(&mut w, &format!("set {k} 0 0 1\r\nv\r\n")).starts_with("SERVER_ERROR "));
    // Back on its port: probed, marked up, and its keys are its own again.
    let port = port.to_string();
    let mut args = vec!["-m", "16", "-p", &port, "-l", "127.0.0.1"];
    if memkit_testkit::server::is_root() {
        args.extend(["-u", "root"]);
    }
    bs[victim] = TestServer::process(&args);
    eventually("the server marked up again", || {
        r.stat("pool:main:1:down") == 0
    });
    assert_eq!(ask(&mut w, &format!("set {k} 0 0 1\r\nv\r\n")), "STORED");
    assert_eq!(held(&bs[victim], &k).as_deref(), Some("v"));
    stop.store(true, Ordering::Relaxed);
    for t in load {
        t.join().unwrap();
    }
    assert_eq!(
        errors.load(Ordering::Relaxed),
        0,
        "client-visible errors through failover"
    );
    assert!(r.stat("failovers") > 0);
    assert!(r.stat("pool:main:1:tko_events") >= 1);
    assert!(r.stat("pool:main:1:errors") > 0);
}

#[test]
fn a_reload_under_load_loses_no_request() {
    let bs = backends(3);
    let spare = backends(1);
    // Two files that route the same keys to the same servers, differently written (a
    // shadow added, a prefix route), and one that is bad.
    let a = two_pools(&addrs(&bs), &addrs(&spare), &hash_route("main"));
    let b = two_pools(
        &addrs(&bs),
        &addrs(&spare),
        &format!(
            "[[route]]\nprefix = \"x\"\ntype = \"hash\"\npool = \"main\"\nshadow = \"spare\"\n\n{}",
            hash_route("main")
        ),
    );
    let mut r = Router::start(&a, &[]);
    let stop = Arc::new(AtomicBool::new(false));
    let wrong = Arc::new(AtomicU64::new(0));
    let load: Vec<_> = (0..3)
        .map(|t| {
            let (stop, wrong) = (stop.clone(), wrong.clone());
            let mut w = r.wire();
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    // Pipelined: a store and a read of every key, checked one by one.
                    let mut req = String::new();
                    for k in 0..8 {
                        req += &format!(
                            "set x{t}:{k} 0 0 {}\r\n{n}\r\nget x{t}:{k}\r\n",
                            n.to_string().len()
                        );
                    }
                    w.send(req.as_bytes());
                    for _ in 0..8 {
                        let set = read(&mut w, Until::LINE);
                        let get = read(&mut w, Until::END);
                        if set != "STORED" || !get.contains(&format!("\r\n{n}\r\nEND")) {
                            wrong.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    n += 1;
                }
                n
            })
        })
        .collect();
    for i in 0..10 {
        r.reload(if i % 2 == 0 { &b } else { &a });
    }
    r.reload("[[route]]\ntype = \"hash\"\npool = \"gone\"\n");
    stop.store(true, Ordering::Relaxed);
    let rounds: u64 = load.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(rounds > 0);
    assert_eq!(
        wrong.load(Ordering::Relaxed),
        0,
        "wrong or lost replies in {rounds} rounds"
    );
    assert_eq!(r.stat("reloads"), 10);
    assert_eq!(r.stat("reload_failures"), 1);
    // The bad file changed nothing: the last good one (a) is in force.
    assert_eq!(r.stat("routes"), 1);
    assert!(r.stat("shadowed") > 0, "file b's shadow mirrored something");
}

#[test]
fn replicated_routes_write_everywhere_and_wait_as_they_say() {
    let mut bs = backends(3);
    let mut cfg = pool("all", &addrs(&bs), "tko_after = 1\ntimeout_ms = 300");
    for (prefix, kind) in [
        ("s:", "all-sync"),
        ("m:", "all-majority"),
        ("f:", "all-fastest"),
        ("a:", "all-async"),
    ] {
        cfg += &format!("[[route]]\nprefix = {prefix:?}\ntype = {kind:?}\npool = \"all\"\n\n");
    }
    let r = Router::start(&cfg, &[]);
    let mut w = r.wire();
    for p in ["s", "m", "f", "a"] {
        assert_eq!(ask(&mut w, &format!("set {p}:k 0 0 2\r\nv1\r\n")), "STORED");
        eventually("every server holds it", || {
            bs.iter().all(|b| held(b, &format!("{p}:k")).is_some())
        });
        assert_eq!(
            ask(&mut w, &format!("get {p}:k\r\n")),
            format!("VALUE {p}:k 0 2")
        );
        assert_eq!(read(&mut w, Until::END), "v1\r\nEND");
        assert_eq!(ask(&mut w, &format!("incr {p}:n 1\r\n")), "NOT_FOUND");
    }
    // One of three down: sync fails, majority and the rest still store.
    bs[2].kill();
    assert!(ask(&mut w, "set s:k 0 0 2\r\nv2\r\n").starts_with("SERVER_ERROR "));
    for p in ["m", "f"] {
        assert_eq!(ask(&mut w, &format!("set {p}:k 0 0 2\r\nv2\r\n")), "STORED");
    }
    // Reads go on: a key whose own server is dead is read from the next one.
    for p in ["m", "f"] {
        assert_eq!(
            ask(&mut w, &format!("get {p}:k\r\n")),
            format!("VALUE {p}:k 0 2")
        );
        assert_eq!(read(&mut w, Until::END), "v2\r\nEND");
    }
    // Two of three down: no majority.
    bs[1].kill();
    let no_majority = ask(&mut w, "set m:k 0 0 2\r\nv3\r\n");
    assert!(
        no_majority.starts_with("SERVER_ERROR fewer than 2 of 3"),
        "{no_majority}"
    );
    assert_eq!(ask(&mut w, "set f:k 0 0 2\r\nv3\r\n"), "STORED");
}

#[test]
fn warm_up_reads_the_warm_pool_and_fills_the_cold_one() {
    let cold = backends(1);
    let warm = backends(1);
    let cfg = pool("cold", &addrs(&cold), "")
        + &pool("warm", &addrs(&warm), "")
        + "[[route]]\ntype = \"warm-up\"\ncold = \"cold\"\nwarm = \"warm\"\nwarm_exptime = 60\n";
    let r = Router::start(&cfg, &[]);
    let mut direct = BlockingWire::tcp(warm[0].tcp_addr()).unwrap();
    assert_eq!(ask(&mut direct, "set old 3 0 3\r\nabc\r\n"), "STORED");
    let mut w = r.wire();
    assert_eq!(ask(&mut w, "get old\r\n"), "VALUE old 3 3");
    assert_eq!(read(&mut w, Until::END), "abc\r\nEND");
    eventually("the cold pool filled", || {
        held(&cold[0], "old").as_deref() == Some("abc")
    });
    let mut c = BlockingWire::tcp(cold[0].tcp_addr()).unwrap();
    let mg = ask(&mut c, "mg old f t\r\n");
    assert!(
        mg.starts_with("HD f3 t") && mg[7..].parse::<u32>().is_ok_and(|t| t <= 60),
        "{mg}"
    );
    // Writes go to the cold pool; deletes to both.
    assert_eq!(ask(&mut w, "set new 0 0 1\r\nn\r\n"), "STORED");
    assert_eq!(held(&cold[0], "new").as_deref(), Some("n"));
    assert_eq!(held(&warm[0], "new"), None);
    assert_eq!(ask(&mut w, "delete old\r\n"), "DELETED");
    assert_eq!((held(&cold[0], "old"), held(&warm[0], "old")), (None, None));
    assert_eq!(r.stat("warmed"), 1);
}

#[test]
fn shadow_mirrors_and_gutter_takes_a_dead_servers_keys() {
    let main = backends(1);
    let (shadow, gutter) = (backends(1), backends(1));
    let dead = format!("127.0.0.1:{}", memkit_testkit::server::free_port());
    let cfg = pool("main", &addrs(&main), "")
        + &pool("dead", &[dead], "tko_after = 1\nprobe_ms = 60000")
        + &pool("shadow", &addrs(&shadow), "")
        + &pool("gutter", &addrs(&gutter), "")
        + "[[route]]\nprefix = \"d:\"\ntype = \"hash\"\npool = \"dead\"\ngutter = \"gutter\"\ngutter_ttl = 5\n\n"
        + "[[route]]\ntype = \"hash\"\npool = \"main\"\nshadow = \"shadow\"\nshadow_fraction = 1.0\n";
    let r = Router::start(&cfg, &[]);
    let mut w = r.wire();
    assert_eq!(ask(&mut w, "set k 0 0 1\r\nv\r\n"), "STORED");
    eventually("the shadow got the store", || {
        held(&shadow[0], "k").as_deref() == Some("v")
    });
    assert_eq!(held(&main[0], "k").as_deref(), Some("v"));
    // The dead pool's keys go to the gutter, for at most its TTL.
    assert_eq!(ask(&mut w, "set d:k 0 0 1\r\ng\r\n"), "STORED");
    assert_eq!(ask(&mut w, "get d:k\r\n"), "VALUE d:k 0 1");
    assert_eq!(read(&mut w, Until::END), "g\r\nEND");
    let mut g = BlockingWire::tcp(gutter[0].tcp_addr()).unwrap();
    let mg = ask(&mut g, "mg d:k t\r\n");
    assert!(mg[4..].parse::<u32>().is_ok_and(|t| t <= 5), "{mg}");
    assert!(r.stat("gutter") >= 2 && r.stat("shadowed") >= 1);
}

#[test]
fn a_bad_file_refuses_to_start_and_says_where() {
    let dir = memkit_testkit::tempdir::tempdir("route-bad");
    let path = dir.path().join("r.toml");
    std::fs::write(
        &path,
        "[pools.a]\nservers = [\"127.0.0.1:1\"]\n\n[[route]]\ntype = \"hash\"\npool = \"b\"\n",
    )
    .unwrap();
    let mut s = TestServer::launch(&["--route", path.to_str().unwrap()])
        .no_wait()
        .start();
    let (status, err) = s.wait_exit();
    assert_eq!(status.code(), Some(78), "{err}");
    assert!(err.contains("r.toml:4: pool \"b\" is not a pool"), "{err}");
}

#[test]
fn a_backend_connection_that_died_unseen_does_not_fail_the_next_request() {
    use memkit_testkit::relay::Relay;
    // A backend connection that looks open but dies under the next request (a server that
    // closed it while idle, a NAT that forgot it): through a relay, cut while the request
    // goes out and reset before any reply.
    let b = TestServer::start(&["-m", "16"]);
    let relay = Relay::start(b.tcp_addr());
    let via = [relay.addr().to_string()];
    let r = Router::start(
        &(pool("main", &via, "timeout_ms = 3000") + &hash_route("main")),
        &[],
    );
    let mut w = r.wire();
    assert_eq!(ask(&mut w, "set k 0 0 1\r\nv\r\n"), "STORED");
    relay.cut();
    w.send(b"get k\r\n");
    std::thread::sleep(Duration::from_millis(300));
    relay.heal();
    // Read again on a new connection: a hit, not the miss a failed read would answer.
    assert_eq!(read(&mut w, Until::END), "VALUE k 0 1\r\nv\r\nEND");
    assert_eq!(r.stat("pool:main:0:errors"), 0);
}

#[test]
fn stats_counts_the_routed_commands_and_leaves_out_what_a_router_cannot_know() {
    let bs = backends(1);
    let r = Router::start(&(pool("main", &addrs(&bs), "") + &hash_route("main")), &[]);
    let mut w = r.wire();
    for (req, want) in [
        ("get k\r\n", "END"),
        ("set k 0 0 1\r\n1\r\n", "STORED"),
        ("get k\r\n", "VALUE k 0 1"),
        ("gat 100 k\r\n", "VALUE k 0 1"),
        ("incr nope 1\r\n", "NOT_FOUND"),
        ("incr k 1\r\n", "2"),
        ("cas k 0 0 1 1\r\n3\r\n", "EXISTS"),
        ("delete k\r\n", "DELETED"),
        ("delete k\r\n", "NOT_FOUND"),
    ] {
        let got = w.ask(
            req.as_bytes(),
            if want.starts_with("VALUE") {
                Until::END
            } else {
                Until::LINE
            },
        );
        assert!(got.starts_with(want), "{req:?}: {got:?}");
    }
    let s = r.stats("");
    let n = |k: &str| s[k].parse::<u64>().unwrap();
    let counted = [
        ("cmd_get", 2),
        ("get_hits", 1),
        ("get_misses", 1),
        ("cmd_touch", 1),
        ("touch_hits", 1),
        ("cmd_set", 2),
        ("cas_badval", 1),
        ("incr_hits", 1),
        ("incr_misses", 1),
        ("delete_hits", 1),
        ("delete_misses", 1),
    ];
    for (k, v) in counted {
        assert_eq!(n(k), v, "{k}");
    }
    for k in ["get_expired", "get_flushed", "store_no_memory"] {
        assert!(!s.contains_key(k), "{k} is not the router's to know");
    }
    assert_eq!(ask(&mut w, "stats reset\r\n"), "RESET");
    assert_eq!(r.stats("")["cmd_get"], "0");
}

#[test]
fn the_exporter_shows_each_backend_servers_figures() {
    let bs = backends(2);
    let port = memkit_testkit::server::free_port();
    let addr = format!("127.0.0.1:{port}");
    let cfg = pool("main", &addrs(&bs), "") + &hash_route("main");
    let r = Router::start(&cfg, &["--metrics-addr", &addr]);
    let mut w = r.wire();
    for i in 0..20 {
        assert_eq!(ask(&mut w, &format!("set k{i} 0 0 1\r\nv\r\n")), "STORED");
    }
    let body = http::get(port, "/metrics", "").body;
    let sent: u64 = body
        .lines()
        .filter(|l| l.starts_with("memkit_router_server_requests_total{pool=\"main\""))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(sent, 20, "{body}");
    assert!(body.contains("memkit_router_requests_total 20\n"), "{body}");
    assert!(body.contains("memcached_commands_total{command=\"set\",status=\"hit\"} 20\n"));
}

#[test]
fn big_values_split_across_keys_and_read_back_whole() {
    // Chunks of 1 KiB; a router that takes values up to 2 MiB.
    let bs = backends(3);
    let route = "[[route]]\ntype = \"hash\"\npool = \"main\"\nsplit_above = 1024\n";
    let r = Router::start(&(pool("main", &addrs(&bs), "") + route), &["-I", "2m"]);
    let value: String = (0..300_000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let mut w = r.wire();
    let store = |w: &mut BlockingWire, cmd: &str| {
        ask(w, &format!("{cmd} 7 0 {}\r\n{value}\r\n", value.len()))
    };
    assert_eq!(store(&mut w, "set big"), "STORED");
    let got = read_value(&mut w, "gets big");
    assert_eq!((got.0.as_str(), got.1.as_str()), ("7", value.as_str()));
    // cas with the whole value's token, once; add refused.
    let cas = |w: &mut BlockingWire| {
        let req = format!("cas big 7 0 {} {}\r\n{value}\r\n", value.len(), got.2);
        ask(w, &req)
    };
    assert_eq!(cas(&mut w), "STORED");
    assert_eq!(cas(&mut w), "EXISTS");
    assert_eq!(store(&mut w, "add big"), "NOT_STORED");
    // The key itself holds a small index; the chunks are spread over the servers.
    let holders = bs.iter().filter(|b| held(b, "big").is_some()).count();
    assert_eq!(holders, 1);
    let index = bs.iter().find_map(|b| held(b, "big")).unwrap();
    assert!(index.len() < 100, "{index:?}");
    assert!(ask(&mut w, "append big 0 0 1\r\nx\r\n").starts_with("SERVER_ERROR append"));
    // A chunk lost (evicted, expired) makes the whole a miss, never a wrong value.
    let version = index.split(' ').nth(1).unwrap();
    for b in &bs {
        let mut d = BlockingWire::tcp(b.tcp_addr()).unwrap();
        ask(&mut d, &format!("delete big:memkit-chunk:{version}:17\r\n"));
    }
    assert_eq!(ask(&mut w, "get big\r\n"), "END");
    // Small values are stored as they are.
    assert_eq!(ask(&mut w, "set small 0 0 3\r\nabc\r\n"), "STORED");
    assert_eq!(
        bs.iter().find_map(|b| held(b, "small")).as_deref(),
        Some("abc")
    );
}

/// `CMD` (a `get` or `gets` of one key): its flags, value and CAS (0 for `get`).
fn read_value(w: &mut BlockingWire, cmd: &str) -> (String, String, u64) {
    let reply = w.ask(format!("{cmd}\r\n").as_bytes(), Until::END);
    let mut lines = reply.split("\r\n");
    let head: Vec<&str> = lines.next().unwrap().split(' ').collect();
    assert_eq!(head[0], "VALUE", "{reply:.200}");
    let cas = head.get(4).map_or(0, |c| c.parse().unwrap());
    (head[2].to_string(), lines.next().unwrap().to_string(), cas)
}

#[test]
fn pools_reach_sasl_and_tls_backends() {
    use memkit_testkit::certs::TestPki;
    let dir = memkit_testkit::tempdir::tempdir("route-sasl");
    let pwdb = dir.path().join("pwdb");
    std::fs::write(&pwdb, "app:secret\n").unwrap();
    let sasl = TestServer::start(&["-S", "--sasl-pwdb", pwdb.to_str().unwrap()]);
    let pki = TestPki::generate();
    // Client certificates required (ssl_verify_mode 2): the pool presents one.
    let tls = TestServer::start(&["-Z", "-o", &pki.server_opts(2)]);
    let sasl_pool = "protocol = \"binary\"\nusername = \"app\"\npassword = \"secret\"";
    let tls_pool = format!(
        "tls_ca = {:?}\ntls_cert = {:?}\ntls_key = {:?}\ntls_name = \"localhost\"",
        pki.path("ca.pem"),
        pki.path("client.pem"),
        pki.path("client.key")
    );
    let cfg = pool("sasl", &addrs(std::slice::from_ref(&sasl)), sasl_pool)
        + &pool("tls", &addrs(std::slice::from_ref(&tls)), &tls_pool)
        + "[[route]]\nprefix = \"s:\"\ntype = \"hash\"\npool = \"sasl\"\n\n"
        + &hash_route("tls");
    let r = Router::start(&cfg, &[]);
    let mut w = r.wire();
    for key in ["s:k", "t:k"] {
        assert_eq!(
            ask(&mut w, &format!("set {key} 3 0 2\r\nok\r\n")),
            "STORED",
            "{key}"
        );
        assert_eq!(
            ask(&mut w, &format!("get {key}\r\n")),
            format!("VALUE {key} 3 2")
        );
        assert_eq!(read(&mut w, Until::END), "ok\r\nEND");
    }
    assert_eq!(
        r.stat("pool:sasl:0:errors") + r.stat("pool:tls:0:errors"),
        0
    );
}

#[test]
fn what_a_server_takes_goes_through_as_it_is() {
    use memkit_protocol::binary::{Status, decode_response, encode_request, op};
    let bs = backends(2);
    let r = Router::start(&(pool("main", &addrs(&bs), "") + &hash_route("main")), &[]);
    let mut w = r.wire();
    assert_eq!(ask(&mut w, "stats detail on\r\n"), "OK");
    // Keys the text protocol takes with a tab, and binary keys with a space (sent on to the
    // backends in base64 with meta's `b`).
    assert_eq!(ask(&mut w, "set a\tb 0 0 1\r\nx\r\n"), "STORED");
    assert_eq!(ask(&mut w, "get a\tb\r\n"), "VALUE a\tb 0 1");
    assert_eq!(read(&mut w, Until::END), "x\r\nEND");
    let mut req = Vec::new();
    encode_request(&mut req, op::SET, 1, 0, &[0; 8], b"a b", b"sp");
    encode_request(&mut req, op::GETK, 2, 0, &[], b"a b", &[]);
    let mut bw = r.wire();
    bw.send(&req);
    for want in [1u32, 2] {
        let frame = bw.read(Until::Frame);
        let Ok(Some((resp, _))) = decode_response(&frame) else {
            panic!("{frame:?}")
        };
        assert_eq!(
            (resp.header.opaque, resp.header.status),
            (want, Status::Ok as u16)
        );
        if want == 2 {
            assert_eq!(resp.value, b"sp");
        }
    }
    // Meta flags act in their order: `t` before `T` is the TTL before the touch.
    assert_eq!(ask(&mut w, "ms e 1\r\n1\r\n"), "HD");
    assert_eq!(ask(&mut w, "mg e t T100\r\n"), "HD t-1");
    assert_eq!(ask(&mut w, "mg e T200 t\r\n"), "HD t200");
    assert_eq!(ask(&mut w, "mg f t N30\r\n"), "HD t-1 W");
    // A classic read of a stale item leaves its win token to the next `mg`.
    assert_eq!(ask(&mut w, "ms c 3\r\n100\r\nmd c I\r\n"), "HD");
    assert_eq!(read(&mut w, Until::LINE), "HD");
    assert_eq!(ask(&mut w, "get c\r\n"), "VALUE c 0 3");
    assert_eq!(read(&mut w, Until::END), "100\r\nEND");
    assert_eq!(ask(&mut w, "mg c v\r\n"), "VA 3 X W");
    assert_eq!(read(&mut w, Until::LINE), "100");
    // A missed `mg T` is a get miss; `stats detail` counts routed commands.
    assert_eq!(ask(&mut w, "stats reset\r\n"), "RESET");
    assert_eq!(ask(&mut w, "mg u:1 T30 v\r\n"), "EN");
    let s = r.stats("");
    assert_eq!((s["cmd_get"].as_str(), s["cmd_touch"].as_str()), ("1", "0"));
    let dump = w.ask(b"stats detail dump\r\n", Until::END);
    assert!(dump.contains("PREFIX u get 1 hit 0 set 0 del 0"), "{dump}");
}

#[test]
fn a_set_refused_as_too_large_drops_the_old_value_on_its_backend() {
    let bs = backends(3);
    let r = Router::start(&(pool("main", &addrs(&bs), "") + &hash_route("main")), &[]);
    let mut w = r.wire();
    let keys = ["big:1", "big:2", "big:3", "big:4"];
    for k in keys {
        assert_eq!(ask(&mut w, &format!("set {k} 0 0 3\r\nold\r\n")), "STORED");
    }
    // Text, each refusal pipelined with a read of its key: the read already misses, as
    // memcached's would. The value is over the router's `-I` (1 MiB).
    let big = vec![b'v'; 1_200_000];
    for k in &keys[..2] {
        let mut req = format!("set {k} 0 0 {}\r\n", big.len()).into_bytes();
        req.extend_from_slice(&big);
        req.extend_from_slice(format!("\r\nget {k}\r\n").as_bytes());
        let reply = w.ask(&req, Until::END);
        assert_eq!(reply, "SERVER_ERROR object too large for cache\r\nEND\r\n");
    }
    // Binary: a SET over the limit, then a GETK of its key.
    use memkit_protocol::binary::{Status, decode_response, encode_request, op};
    let mut bw = r.wire();
    for k in &keys[2..] {
        let mut req = Vec::new();
        encode_request(&mut req, op::SET, 1, 0, &[0; 8], k.as_bytes(), &big);
        encode_request(&mut req, op::GETK, 2, 0, &[], k.as_bytes(), &[]);
        bw.send(&req);
        for want in [Status::TooLarge, Status::KeyNotFound] {
            let frame = bw.read(Until::Frame);
            let Ok(Some((resp, _))) = decode_response(&frame) else {
                panic!("{frame:?}")
            };
            assert_eq!(resp.header.status, want as u16, "{k}");
        }
    }
    for k in keys {
        assert!(bs.iter().all(|b| held(b, k).is_none()), "{k} still held");
    }
    assert_eq!(r.stats("")["store_too_large"], "4");
}
