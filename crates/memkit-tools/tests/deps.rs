//! The `memkit` CLI is a client tool: neither the server nor its store (fjall) may enter its
//! dependency tree, not even through its tests (`cargo tree` lists dev-dependencies too).
//! The Prometheus renderer it shares with memkitd lives in `memkit-metrics` for that reason.

use std::process::Command;

#[test]
fn the_cli_depends_on_neither_the_server_nor_its_store() {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let o = Command::new(cargo)
        .args(["tree", "-p", "memkit-tools", "--prefix", "none"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo tree");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let tree = String::from_utf8_lossy(&o.stdout);
    assert!(tree.contains("memkit-metrics"), "{tree}");
    let bad: Vec<&str> = tree
        .lines()
        .filter(|l| l.starts_with("memkit-server ") || l.starts_with("fjall "))
        .collect();
    assert!(bad.is_empty(), "memkit-tools depends on {bad:?}");
}
