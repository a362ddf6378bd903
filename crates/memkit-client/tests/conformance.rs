//! The conformance suite through the client: against memkitd (in-process), against real
//! memcached 1.6.18 (cases needing newer meta flags skipped), and through a three-server
//! cluster of memkitd.

mod common;

use common::{Memcached, Memkitd, config};
use memkit_client::{Client, Cluster, ClusterConfig, Distribution};
use memkit_testkit::suite::{self, Needs, SuiteOptions, WallClock};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suite_against_memkitd() {
    let d = Memkitd::start();
    let c = Client::new(d.spec(), config());
    let report = suite::run(&c, &WallClock).await;
    eprintln!("memkitd: {report}");
    report.assert_all_passed();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suite_against_real_memcached() {
    let Some(m) = Memcached::start() else { return };
    let c = Client::new(m.spec(), config());
    let opts = SuiteOptions {
        max_needs: Needs::Base,
        ..Default::default()
    };
    let report = suite::run_with(&c, &WallClock, &opts).await;
    eprintln!("memcached 1.6.18: {report}");
    report.assert_all_passed();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suite_through_a_cluster_of_memkitd() {
    let servers: Vec<Memkitd> = (0..3).map(|_| Memkitd::start()).collect();
    let cfg = ClusterConfig {
        client: config(),
        ..ClusterConfig::new(Distribution::Ketama)
    };
    let cluster = Cluster::new(servers.iter().map(Memkitd::spec).collect(), cfg);
    let report = suite::run(&cluster, &WallClock).await;
    eprintln!("cluster of 3 memkitd: {report}");
    report.assert_all_passed();
}
