//! Files generated from a binary's clap definition and checked into `packaging/`: its man
//! page (`clap_mangen`, `packaging/man/NAME.1`) and its shell completions (`clap_complete`:
//! `packaging/completions/NAME.bash`, `_NAME` for zsh, `NAME.fish`).
//!
//! A test per binary calls [`check`]: the files must be what the current flags generate, so
//! a flag added without regenerating fails CI. `MEMKIT_UPDATE_GENERATED=1` makes the same
//! test write them instead. Generated in a test rather than a build script, so that
//! building the binaries never writes into the source tree.

use std::path::{Path, PathBuf};

use clap_complete::Shell;

/// The files `cmd` generates, as (path under the workspace root, contents).
pub fn files(cmd: &clap::Command) -> Vec<(PathBuf, Vec<u8>)> {
    let name = cmd.get_name().to_string();
    let mut out = Vec::new();
    let mut man = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .render(&mut man)
        .expect("render the man page");
    out.push((PathBuf::from(format!("packaging/man/{name}.1")), man));
    for (shell, file) in [
        (Shell::Bash, format!("{name}.bash")),
        (Shell::Zsh, format!("_{name}")),
        (Shell::Fish, format!("{name}.fish")),
    ] {
        let mut buf = Vec::new();
        clap_complete::generate(shell, &mut cmd.clone(), &name, &mut buf);
        out.push((PathBuf::from(format!("packaging/completions/{file}")), buf));
    }
    out
}

/// Fails when a checked-in file under `root` differs from what `cmd` generates (or writes
/// them all with `MEMKIT_UPDATE_GENERATED=1`). `how` is the command that regenerates them.
pub fn check(cmd: &clap::Command, root: &Path, how: &str) {
    let update = std::env::var("MEMKIT_UPDATE_GENERATED").is_ok_and(|v| v == "1");
    let mut stale = Vec::new();
    for (rel, want) in files(cmd) {
        let path = root.join(&rel);
        if update {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &want).unwrap();
        } else if std::fs::read(&path).ok().as_deref() != Some(&want[..]) {
            stale.push(rel.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "not current with the flags: {stale:?}; regenerate with MEMKIT_UPDATE_GENERATED=1 {how}"
    );
}
