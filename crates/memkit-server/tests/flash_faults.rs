//! The flash tier's faults, with the memkitd binary: a graceful stop with `-e` brings every
//! value on flash back; a SIGKILL starts empty and healthy; bytes flipped in the flash file
//! are misses and `badcrc_from_extstore`, never wrong bytes; a full file system (a small
//! tmpfs this test mounts) degrades to RAM only without a client error.

#[path = "support/daemon.rs"]
mod daemon;

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Duration;

use daemon::{Daemon, spawn, wait_ready};
use memkit_testkit::tempdir;
use memkit_testkit::wire::{BlockingWire, Until};

const LEN: usize = 4000;

fn value(i: usize) -> Vec<u8> {
    (0..LEN).map(|j| b'a' + ((i * 7 + j) % 26) as u8).collect()
}

/// memkitd with 2 MiB of RAM over a flash file at `flash` of `size`, with `extra` flags.
fn start(flash: &Path, size: &str, extra: &[&str]) -> (Daemon, BlockingWire) {
    let ext = format!(
        "ext_page_size=2,ext_wbuf_size=2,ext_path={}:{size}",
        flash.display()
    );
    let mut args = vec!["-m", "2", "-o", &ext];
    args.extend_from_slice(extra);
    let d = spawn(&args);
    let port = d.port();
    let w = wait_ready(|| BlockingWire::tcp(("127.0.0.1", port)));
    (d, w.with_timeout(Duration::from_secs(30)))
}

/// Stores `n` values of 4 KB, each acknowledged.
fn fill(c: &mut BlockingWire, n: usize) {
    for batch in (0..n).collect::<Vec<_>>().chunks(100) {
        let mut req = Vec::new();
        for &i in batch {
            req.extend_from_slice(format!("set k{i} {i} 0 {LEN}\r\n").as_bytes());
            req.extend_from_slice(&value(i));
            req.extend_from_slice(b"\r\n");
        }
        c.send(&req);
        let replies = c.read(Until::Lines(batch.len()));
        assert_eq!(replies, "STORED\r\n".repeat(batch.len()).as_bytes());
    }
}

/// Reads every key back: (intact hits, wrong values).
fn read_back(c: &mut BlockingWire, n: usize) -> (usize, usize) {
    let (mut hits, mut wrong) = (0, 0);
    for i in 0..n {
        let got = c.ask(format!("get k{i}\r\n").as_bytes(), Until::END);
        if got == "END\r\n" {
            continue;
        }
        let want = format!(
            "VALUE k{i} {i} {LEN}\r\n{}\r\nEND\r\n",
            String::from_utf8(value(i)).unwrap()
        );
        if got == want {
            hits += 1;
        } else {
            wrong += 1;
        }
    }
    (hits, wrong)
}

fn stat(c: &mut BlockingWire, name: &str) -> u64 {
    let stats = c.ask(b"stats\r\n", Until::END);
    let line = (stats.lines())
        .find(|l| l.starts_with(&format!("STAT {name} ")))
        .unwrap_or_else(|| panic!("no {name}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[test]
fn a_graceful_restart_brings_every_value_on_flash_back_and_a_sigkill_starts_empty() {
    let dir = tempdir("flash-restart");
    let flash = dir.path().join("flash");
    let file = dir.path().join("memory");
    let e = ["-e", file.to_str().unwrap()];
    let n = 3000;
    let (mut d, mut c) = start(&flash, "64m", &e);
    fill(&mut c, n);
    let on_flash = stat(&mut c, "memkit_extstore_items");
    assert!(on_flash as usize >= n / 2, "{on_flash} on flash");
    let (before, wrong) = read_back(&mut c, n);
    assert_eq!(wrong, 0);
    let (status, err) = d.stop_with(libc::SIGUSR1);
    assert!(status.success(), "{status}: {err}");

    let (mut d, mut c) = start(&flash, "64m", &e);
    let (after, wrong) = read_back(&mut c, n);
    assert_eq!(wrong, 0);
    assert!(
        after >= before,
        "{after} back of {before} before the restart"
    );
    assert!(stat(&mut c, "get_extstore") as usize >= n / 2);

    // A SIGKILL leaves no saved state: the next start is empty, and works.
    let (status, _) = d.stop_with(libc::SIGKILL);
    assert!(!status.success());
    let (_d, mut c) = start(&flash, "64m", &e);
    assert_eq!(stat(&mut c, "curr_items"), 0);
    fill(&mut c, 500);
    let (hits, wrong) = read_back(&mut c, 500);
    assert_eq!((hits, wrong), (500, 0));
}

#[test]
fn flipped_bytes_in_the_flash_file_are_misses_never_wrong_bytes() {
    let dir = tempdir("flash-badcrc");
    let flash = dir.path().join("flash");
    let (_d, mut c) = start(&flash, "64m", &[]);
    let n = 3000;
    fill(&mut c, n);
    // More sets push the last write buffer out to the file.
    fill(&mut c, 600);
    std::thread::sleep(Duration::from_millis(300));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&flash)
        .unwrap();
    for off in (0..6u64 << 20).step_by(997) {
        let mut b = [0u8; 1];
        f.read_exact_at(&mut b, off).unwrap();
        f.write_all_at(&[b[0] ^ 0x20], off).unwrap();
    }
    let (_, wrong) = read_back(&mut c, n);
    assert_eq!(wrong, 0, "a corrupted value was served");
    let bad = stat(&mut c, "badcrc_from_extstore");
    assert!(bad > 0, "no bad checksum counted");
    assert!(stat(&mut c, "miss_from_extstore") >= bad);
}

#[test]
fn a_full_disk_degrades_to_ram_only_without_a_client_error() {
    let dir = tempdir("flash-full");
    let mount = memkit_testkit::tempdir::Tmpfs::mount(&dir.path().join("small"), 4);
    // A 64 MiB file on 4 MiB of tmpfs: it is sparse, and the writes past 4 MiB fail.
    let (d, mut c) = start(&mount.path().join("flash"), "64m", &[]);
    let n = 6000;
    fill(&mut c, n);
    let (hits, wrong) = read_back(&mut c, n);
    assert_eq!(wrong, 0);
    assert!(hits > 0);
    let errors = stat(&mut c, "memkit_extstore_write_errors");
    assert!(errors > 0, "the full disk was never hit");
    // The server goes on: stores answer STORED, reads answer.
    fill(&mut c, 100);
    assert_eq!(read_back(&mut c, 100).1, 0);
    drop(d);
}
