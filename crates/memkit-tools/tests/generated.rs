//! `packaging/man/memkit.1` and `packaging/completions/{memkit.bash,_memkit,memkit.fish}` are
//! what the `memkit` command line generates (regenerate with
//! `MEMKIT_UPDATE_GENERATED=1 cargo test -p memkit-tools --test generated`).

#[test]
fn man_page_and_completions_are_current() {
    let cmd = <memkit_tools::cli::Args as clap::CommandFactory>::command();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    memkit_testkit::generated::check(&cmd, &root, "cargo test -p memkit-tools --test generated");
}
