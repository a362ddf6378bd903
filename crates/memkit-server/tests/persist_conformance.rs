//! The conformance suite through the network client against memkitd in persistent mode
//! (`--persist DIR`, `sync` durability: every reply to a write waits for its fsync, parked
//! on the worker loop), through each worker loop: same protocol, same semantics.

use std::time::Duration;

use memkit_client::{Client, ClientConfig, ServerSpec};
use memkit_testkit::suite::{self, WallClock};
use memkit_testkit::{TestServer, tempdir};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suite_through_the_client_against_persistent_memkitd() {
    suite_under(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suite_through_the_client_against_persistent_memkitd_on_epoll() {
    suite_under(&["--io", "epoll"]).await;
}

async fn suite_under(flags: &[&str]) {
    let dir = tempdir("persist-suite");
    let store = dir.path().join("store");
    let mut args = vec!["--persist", store.to_str().unwrap()];
    args.extend_from_slice(flags);
    let server = TestServer::start(&args);
    let (port, shared) = (server.port(), server.shared().clone());
    let cfg = ClientConfig {
        connect_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_secs(5),
        ..ClientConfig::default()
    };
    let c = Client::new(ServerSpec::new("127.0.0.1", port), cfg);
    let report = suite::run(&c, &WallClock).await;
    eprintln!("memkitd --persist {flags:?}: {report}");
    server.stop().await;
    assert!(shared.persist.as_ref().unwrap().stats().writes > 0);
    drop((c, shared));
    report.assert_all_passed();
}
