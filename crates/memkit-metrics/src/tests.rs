use super::*;

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn families_once_with_every_server() {
    let g = pairs(&[
        ("version", "1.6.18"),
        ("uptime", "5"),
        ("cmd_set", "10"),
        ("cas_hits", "1"),
        ("cas_misses", "1"),
        ("cas_badval", "1"),
        ("get_hits", "3"),
        ("get_misses", "4"),
        ("rusage_user", "0.012000"),
        ("auth_cmds", "3"),
        ("auth_errors", "1"),
        ("libevent", "tokio"),
    ]);
    let items = pairs(&[("items:1:number", "2"), ("items:1:mem_requested", "100")]);
    let slabs = pairs(&[("1:chunk_size", "96"), ("active_slabs", "1")]);
    let a = [("server", "a:1")];
    let b = [("server", "b\"2")];
    let text = render(&[
        ServerStats {
            labels: &a,
            up: true,
            general: &g,
            items: &items,
            slabs: &slabs,
            ..Default::default()
        },
        ServerStats {
            labels: &b,
            up: false,
            ..Default::default()
        },
    ]);
    assert_eq!(text.matches("# TYPE memcached_up gauge").count(), 1);
    assert!(text.contains("memcached_up{server=\"a:1\"} 1\n"));
    assert!(text.contains("memcached_up{server=\"b\\\"2\"} 0\n"));
    assert!(
        text.contains(
            "memcached_commands_total{server=\"a:1\",command=\"set\",status=\"hit\"} 7\n"
        )
    );
    assert!(
        text.contains(
            "memcached_commands_total{server=\"a:1\",command=\"get\",status=\"miss\"} 4\n"
        )
    );
    assert!(text.contains("memcached_slab_mem_requested_bytes{server=\"a:1\",slab=\"1\"} 100\n"));
    assert!(text.contains("memcached_slab_chunk_size_bytes{server=\"a:1\",slab=\"1\"} 96\n"));
    assert!(text.contains("memcached_process_user_cpu_seconds_total{server=\"a:1\"} 0.012000\n"));
    assert!(text.contains("memcached_auth_commands_total{server=\"a:1\"} 3\n"));
    assert!(text.contains("memcached_auth_errors_total{server=\"a:1\"} 1\n"));
    assert!(!text.contains("libevent"));
    // Nothing of a process: a pool's rendering has none to show.
    assert!(!text.contains("process_open_fds"));
}

#[test]
fn persist_and_tls_figures() {
    let g = pairs(&[
        ("ssl_handshake_errors", "2"),
        ("persist_durability", "periodic:100"),
        ("persist_writes", "12"),
        ("persist_bytes_written", "3400"),
        ("persist_last_flush_unix", "1700000000"),
        ("persist_disk_low", "1"),
        ("persist_failed", "0"),
    ]);
    let text = render(&[ServerStats {
        up: true,
        general: &g,
        ..Default::default()
    }]);
    for line in [
        "# TYPE memcached_ssl_handshake_errors_total counter\n",
        "memcached_ssl_handshake_errors_total 2\n",
        "memkit_persist_durability_info{durability=\"periodic:100\"} 1\n",
        "# TYPE memkit_persist_writes_total counter\n",
        "memkit_persist_writes_total 12\n",
        "memkit_persist_written_bytes_total 3400\n",
        "memkit_persist_last_flush_timestamp_seconds 1700000000\n",
        "# TYPE memkit_persist_disk_low gauge\n",
        "memkit_persist_disk_low 1\n",
        "memkit_persist_failed 0\n",
    ] {
        assert!(text.contains(line), "{line:?} missing from\n{text}");
    }
    // Absent stats stay absent (memcached mode has no persist_* at all).
    assert!(!text.contains("memkit_persist_loads_total"));
}

#[test]
fn own_endpoint_adds_the_process() {
    let g = pairs(&[("uptime", "5")]);
    let p = ProcessFigures {
        cpu_seconds: Some(1.25),
        resident_bytes: Some(4096),
        open_fds: Some(7),
        start_time_seconds: Some(1_700_000_000.5),
        ..Default::default()
    };
    let text = render_own(
        &ServerStats {
            up: true,
            general: &g,
            ..Default::default()
        },
        &p,
    );
    for line in [
        "# TYPE process_cpu_seconds_total counter\n",
        "process_cpu_seconds_total 1.25\n",
        "# TYPE process_resident_memory_bytes gauge\n",
        "process_resident_memory_bytes 4096\n",
        "process_open_fds 7\n",
        "process_start_time_seconds 1700000000.5\n",
        "memcached_uptime_seconds 5\n",
    ] {
        assert!(text.contains(line), "{line:?} missing from\n{text}");
    }
    assert!(!text.contains("process_max_fds"));
    assert!(!text.contains("process_virtual_memory_bytes"));
}

#[test]
fn extstore_lines_take_the_exporters_names_only_when_present() {
    let g = pairs(&[
        ("version", "1.6.18"),
        ("get_extstore", "7"),
        ("extstore_objects_written", "12"),
        ("extstore_bytes_used", "4096"),
        ("extstore_limit_maxbytes", "67108864"),
        ("extstore_io_queue", "0"),
        ("memkit_extstore_items", "3"),
    ]);
    let a = [("server", "a:1")];
    let text = render(&[ServerStats {
        labels: &a,
        up: true,
        general: &g,
        ..Default::default()
    }]);
    for line in [
        "memcached_extstore_objects_written_total{server=\"a:1\"} 12",
        "# TYPE memcached_extstore_bytes_used counter",
        "memcached_extstore_bytes_limit{server=\"a:1\"} 67108864",
        "memcached_extstore_io_queue_depth{server=\"a:1\"} 0",
        "memkit_extstore_gets_total{server=\"a:1\"} 7",
        "memkit_extstore_items{server=\"a:1\"} 3",
    ] {
        assert!(text.contains(line), "{line} in\n{text}");
    }
    // Without the tier (no such lines), no such families.
    let g = pairs(&[("version", "1.6.18")]);
    let text = render(&[ServerStats {
        labels: &a,
        up: true,
        general: &g,
        ..Default::default()
    }]);
    assert!(!text.contains("extstore"), "{text}");
}

#[test]
fn raft_families_only_for_a_group_node() {
    let g = pairs(&[
        ("version", "1.6.18"),
        ("raft_node", "1"),
        ("raft_role", "leader"),
        ("raft_leader", "1"),
        ("raft_term", "3"),
        ("raft_last_log_index", "42"),
        ("raft_commit_index", "42"),
        ("raft_applied_index", "41"),
    ]);
    let followers = [
        RaftFollower {
            node: 2,
            matched: Some(40),
            lag: 2,
        },
        RaftFollower {
            node: 4,
            matched: None,
            lag: 43,
        },
    ];
    let text = render(&[ServerStats {
        up: true,
        general: &g,
        followers: &followers,
        ..Default::default()
    }]);
    for line in [
        "# TYPE memkit_raft_role gauge",
        "memkit_raft_role{role=\"leader\"} 1\n",
        "memkit_raft_role{role=\"follower\"} 0\n",
        "memkit_raft_node 1\n",
        "memkit_raft_leader 1\n",
        "memkit_raft_term 3\n",
        "memkit_raft_commit_index 42\n",
        "memkit_raft_applied_index 41\n",
        "memkit_raft_last_log_index 42\n",
        "memkit_raft_follower_lag{node=\"2\"} 2\n",
        "memkit_raft_follower_lag{node=\"4\"} 43\n",
        "memkit_raft_follower_matched_index{node=\"2\"} 40\n",
    ] {
        assert!(text.contains(line), "{line} in\n{text}");
    }
    assert!(!text.contains("matched_index{node=\"4\"}"), "{text}");
    assert_eq!(text.matches("# TYPE memkit_raft_follower_lag").count(), 1);
    // A plain server: no raft_* lines, no families (followers alone do not make any).
    let g = pairs(&[("version", "1.6.18")]);
    let text = render(&[ServerStats {
        up: true,
        general: &g,
        followers: &followers,
        ..Default::default()
    }]);
    assert!(!text.contains("memkit_raft"), "{text}");
}

#[test]
fn a_routers_lines_become_router_families_per_server() {
    let g = pairs(&[("uptime", "5")]);
    let router = pairs(&[
        ("requests", "40"),
        ("failovers", "3"),
        ("pool:main:0:addr", "10.0.0.1:11211"),
        ("pool:main:0:requests", "25"),
        ("pool:main:0:down", "1"),
        ("pool:main:0:latency_p50_us", "256"),
        ("pool:b:c:1:addr", "10.0.0.2:11211"),
        ("pool:b:c:1:errors", "2"),
    ]);
    let text = render(&[ServerStats {
        up: true,
        general: &g,
        router: &router,
        ..Default::default()
    }]);
    assert!(text.contains("# TYPE memkit_router_requests_total counter\n"));
    assert!(text.contains("memkit_router_requests_total 40\n"));
    assert!(text.contains("memkit_router_failovers_total 3\n"));
    assert!(text.contains(
        "memkit_router_server_requests_total{pool=\"main\",server=\"10.0.0.1:11211\"} 25\n"
    ));
    assert!(
        text.contains("memkit_router_server_down{pool=\"main\",server=\"10.0.0.1:11211\"} 1\n")
    );
    assert!(text.contains(
        "memkit_router_server_latency_p50_microseconds{pool=\"main\",server=\"10.0.0.1:11211\"} 256\n"
    ));
    // A pool name with a colon in it keeps it: only the index is split off the end.
    assert!(
        text.contains(
            "memkit_router_server_errors_total{pool=\"b:c\",server=\"10.0.0.2:11211\"} 2\n"
        )
    );
    let plain = render(&[ServerStats {
        up: true,
        general: &g,
        ..Default::default()
    }]);
    assert!(!plain.contains("memkit_router"));
}
