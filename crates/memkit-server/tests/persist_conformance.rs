//! The conformance suite through the network client against memkitd in persistent mode
//! (`--persist DIR`, `sync` durability): same protocol, same semantics.

use std::time::Duration;

use memkit_client::{Client, ClientConfig, ServerSpec};
use memkit_server::{Args, Settings, Shared};
use memkit_testkit::suite::{self, WallClock};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suite_through_the_client_against_persistent_memkitd() {
    let dir = std::env::temp_dir().join(format!("memkit-persist-suite-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let argv = ["memkitd", "--persist", dir.to_str().unwrap()];
    let (settings, _) = Settings::from_args(<Args as clap::Parser>::parse_from(argv));
    let (engine, persist) = memkit_server::backend_for(&settings).unwrap();
    let shared = Shared::with_persist(engine, persist.map(|p| p.store), settings);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(memkit_server::run(listener, shared.clone(), async move {
        let _ = rx.await;
    }));
    let cfg = ClientConfig {
        connect_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_secs(5),
        ..ClientConfig::default()
    };
    let c = Client::new(ServerSpec::new("127.0.0.1", port), cfg);
    let report = suite::run(&c, &WallClock).await;
    eprintln!("memkitd --persist: {report}");
    let _ = tx.send(());
    let _ = server.await;
    assert!(shared.persist.as_ref().unwrap().stats().writes > 0);
    drop((c, shared));
    let _ = std::fs::remove_dir_all(&dir);
    report.assert_all_passed();
}
