//! The `memkit` binary against in-process memkitd servers on free loopback ports.

mod common;

use common::{Memkitd, memkit, stdout};
use memkit_client::{Cluster, ClusterConfig, Distribution, ServerSpec};

#[test]
fn everyday_verbs_over_a_pool() {
    let memkitds: Vec<Memkitd> = (0..3).map(|_| Memkitd::start(&[])).collect();
    let ports: Vec<u16> = memkitds.iter().map(|m| m.port).collect();
    let servers = format!(
        "127.0.0.1:{},127.0.0.1:{}:2,127.0.0.1:{}",
        ports[0], ports[1], ports[2]
    );

    assert!(
        memkit(&servers, &["set", "greeting", "hello"], None)
            .status
            .success()
    );
    assert!(
        memkit(&servers, &["set", "piped"], Some(b"from stdin"))
            .status
            .success()
    );
    let got = memkit(&servers, &["get", "greeting", "piped"], None);
    assert!(got.status.success());
    assert_eq!(stdout(&got), "hello\nfrom stdin\n");
    let miss = memkit(&servers, &["get", "greeting", "nope"], None);
    assert_eq!(miss.status.code(), Some(1));
    assert_eq!(stdout(&miss), "hello\n");

    // --which agrees with the library's placement, and the key is really there.
    let which = memkit(&servers, &["--which", "greeting"], None);
    let specs = ServerSpec::parse_list(&servers).unwrap();
    let cluster = Cluster::new(specs.clone(), ClusterConfig::new(Distribution::Ketama));
    let i = cluster.server_for(b"greeting").unwrap();
    assert_eq!(stdout(&which).trim(), specs[i].to_string());
    let direct = memkit(&specs[i].to_string(), &["get", "greeting"], None);
    assert_eq!(stdout(&direct), "hello\n");
    // The same with modula, for keys that do not all sit where ketama puts them.
    let modula = Cluster::new(specs.clone(), ClusterConfig::new(Distribution::MODULA));
    let mut differ = 0;
    // (Ports change from run to run and ketama hashes them: 16 keys, so that all 16 agreeing
    // by chance is a 1 in 43 million event.)
    let keys: Vec<String> = (0..16).map(|i| format!("which:{i}")).collect();
    for key in keys.iter().map(String::as_str).chain(["greeting"]) {
        let out = memkit(&servers, &["-d", "modula", "--which", key], None);
        assert!(out.status.success());
        let i = modula.server_for(key.as_bytes()).unwrap();
        assert_eq!(stdout(&out).trim(), specs[i].to_string(), "modula, {key}");
        differ += usize::from(cluster.server_for(key.as_bytes()) != Some(i));
    }
    assert!(differ > 0, "modula and ketama placed every key alike");

    assert!(memkit(&servers, &["set", "n", "41"], None).status.success());
    assert_eq!(stdout(&memkit(&servers, &["incr", "n"], None)), "42\n");
    assert_eq!(stdout(&memkit(&servers, &["decr", "n", "50"], None)), "0\n");
    assert!(memkit(&servers, &["delete", "n"], None).status.success());
    assert_eq!(
        memkit(&servers, &["delete", "n"], None).status.code(),
        Some(1)
    );

    let ping = memkit(&servers, &["ping"], None);
    assert!(ping.status.success());
    assert_eq!(stdout(&ping).lines().count(), 3);
    let stats = stdout(&memkit(&servers, &["stats"], None));
    assert_eq!(stats.matches("Server: ").count(), 3);
    assert!(stats.contains("curr_items"));
    assert!(memkit(&servers, &["flush"], None).status.success());
    assert_eq!(
        memkit(&servers, &["get", "greeting"], None).status.code(),
        Some(1)
    );

    // A dead server: a clear error and status 2 (network), not a hang.
    let dead = common::dead_addr();
    let o = memkit(&dead, &["set", "k", "v"], None);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        memkit(&servers, &["-d", "bogus", "ping"], None)
            .status
            .code(),
        Some(2)
    );
}
