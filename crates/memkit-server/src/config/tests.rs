//! The flags as memcached reads them: accepted, applied, refused with its messages.

use super::*;

#[test]
fn memcached_command_lines_parse() {
    let a = Args::parse_from([
        "memkitd",
        "-p",
        "12345",
        "-U",
        "0",
        "-m",
        "128",
        "-c",
        "10",
        "-t",
        "2",
        "-I",
        "2m",
        "-M",
        "-A",
        "-vv",
        "-o",
        "idle_timeout=30,modern",
        "-B",
        "ascii",
        "-R",
        "5",
    ]);
    let (s, warn) = Settings::from_args(a);
    assert_eq!(
        (s.port, s.memory_limit, s.conn_limit, s.threads),
        (12345, 128 << 20, 10, 2)
    );
    assert_eq!(
        (s.item_size_max, s.evict, s.enable_shutdown, s.verbose),
        (2 << 20, false, true, 2)
    );
    assert_eq!(s.idle_timeout, 30);
    assert_eq!(s.listen, vec!["127.0.0.1"]);
    assert_eq!(warn.len(), 1, "{warn:?}");
    assert!(s.check().is_ok());
}

fn refusal(argv: &[&str]) -> Refusal {
    let argv = std::iter::once("memkitd").chain(argv.iter().copied());
    Settings::from_args(Args::parse_from(argv))
        .0
        .check()
        .unwrap_err()
}

#[test]
fn values_memcached_refuses_are_refused_with_its_message_and_status() {
    for (argv, code, msg) in [
        (
            &["-o", "frobnicate=1"][..],
            1,
            "Illegal suboption \"frobnicate=1\"",
        ),
        (
            &["-c", "0"],
            1,
            "Maximum connections must be greater than 0",
        ),
        (
            &["-c", "abc"],
            1,
            "Maximum connections must be greater than 0",
        ),
        (&["-t", "0"], 1, "Number of threads must be greater than 0"),
        (
            &["-R", "0"],
            1,
            "Number of requests per event must be greater than 0",
        ),
        (&["-f", "1"], 1, "Factor must be greater than 1"),
        (&["-n", "0"], 1, "Chunk size must be greater than 0"),
        (&["-D", ""], 1, "No delimiter specified"),
        (
            &["-o", "hashpower=5"],
            1,
            "Initial hashtable multiplier of 5 is too low",
        ),
        (
            &["-o", "idle_timeout"],
            1,
            "Missing numeric argument for idle_timeout",
        ),
        (
            &["-I", "512"],
            64,
            "Item max size cannot be less than 1024 bytes.",
        ),
        (
            &["-I", "lots"],
            64,
            "Item max size cannot be less than 1024 bytes.",
        ),
        (
            &["-I", "1k"],
            64,
            "slab_chunk_max (bytes: 524288) cannot be larger than -I (item_size_max 1024)",
        ),
        (
            &["-I", "1000k"],
            64,
            "-I (item_size_max: 1024000) must be evenly divisible by slab_chunk_max (bytes: 524288)",
        ),
        (
            &["-m", "1", "-I", "1m"],
            64,
            "Cannot set item size limit higher than 1/2 of memory max.",
        ),
        (
            &["-m", "0"],
            64,
            "Cannot set item size limit higher than 1/2 of memory max.",
        ),
        (
            &["-m", "5000", "-I", "2000m"],
            64,
            "Cannot set item size limit higher than a gigabyte.",
        ),
        (
            &["-B", "foo"],
            64,
            "Invalid value for binding protocol: foo\n -- should be one of auto, binary, or ascii",
        ),
        (&["-p", "70000"], 64, "ERROR: Invalid port number 70000."),
        (
            &["-N", "8"],
            64,
            "Number of napi_ids(8) cannot be greater than number of threads(4)",
        ),
        (
            &["-o", "hot_lru_pct=50,warm_lru_pct=40"],
            64,
            "hot_lru_pct + warm_lru_pct cannot be more than 80% combined",
        ),
        (
            &["-o", "temporary_ttl=5,no_lru_maintainer"],
            64,
            "temporary_ttl requires lru_maintainer to be enabled",
        ),
    ] {
        assert_eq!(refusal(argv), Refusal::new(code, msg), "{argv:?}");
    }
}

#[test]
fn every_memcached_flag_is_accepted() {
    let argv = [
        "memkitd",
        "-a",
        "777",
        "-A",
        "-p",
        "1",
        "-U",
        "0",
        "-m",
        "64m",
        "-M",
        "-c",
        "10x",
        "-k",
        "-r",
        "-v",
        "-d",
        "-l",
        "127.0.0.1",
        "-l",
        "::1",
        "-u",
        "nobody",
        "-P",
        "p",
        "-f",
        "1.5",
        "-n",
        "40",
        "-t",
        "2",
        "-D",
        "/",
        "-L",
        "-R",
        "5",
        "-C",
        "-b",
        "10",
        "-B",
        "auto",
        "-I",
        "2m",
        "-F",
        "-X",
        "-W",
        "-e",
        "f",
        "-N",
        "1",
        "-o",
        "modern,no_lru_crawler,ext_path=/x:1G,slab_chunk_max=16384,sock_cookie_id=1",
        "--verbose",
        "--enable-coredumps",
        "--unix-mask=700",
        "--disable-flush-all",
    ];
    let (s, warn) = Settings::from_args(Args::parse_from(argv));
    assert_eq!(s.check(), Ok(()));
    assert_eq!(
        (s.unix_mask, s.flush_enabled, s.conn_limit),
        (0o700, false, 10) // the last -a wins, as with getopt
    );
    assert_eq!(s.listen, vec!["127.0.0.1", "::1"]);
    assert_eq!(
        (s.user.as_deref(), s.verbose, s.prefix_delimiter),
        (Some("nobody"), 2, b'/')
    );
    // -e is warm restart now: taken, not warned about.
    assert_eq!(s.memory_file.as_deref(), Some(std::path::Path::new("f")));
    assert!(!warn.iter().any(|w| w.starts_with("-e")), "{warn:?}");
    // memcached does not add an -l its list already contains.
    let (s, _) = Settings::from_args(Args::parse_from([
        "memkitd",
        "-l",
        "127.0.0.1:7",
        "-l",
        "127.0.0.1",
    ]));
    assert_eq!(s.listen, vec!["127.0.0.1:7"]);
    // -U alone moves the TCP port too, as in memcached.
    let (s, _) = Settings::from_args(Args::parse_from(["memkitd", "-U", "7"]));
    assert_eq!(s.port, 7);
}

#[test]
fn security_flags_parse_like_memcached() {
    let (s, warn) = Settings::from_args(Args::parse_from([
        "memkitd",
        "-Y",
        "users",
        "-Z",
        "-o",
        "ssl_chain_cert=c.pem,ssl_key=k.pem,ssl_ca_cert=ca.pem,ssl_verify_mode=2",
        "-o",
        "ssl_min_version=1,ssl_ciphers=HIGH",
    ]));
    assert_eq!(s.auth_file.as_deref(), Some("users"));
    assert_eq!(
        s.ssl,
        SslSettings {
            enabled: true,
            chain_cert: Some("c.pem".into()),
            key: Some("k.pem".into()),
            ca_cert: Some("ca.pem".into()),
            verify_mode: 2,
            min_version: 2,
        }
    );
    assert_eq!(warn.len(), 2, "{warn:?}");
    assert!(s.check().is_ok());
    let refused = |o: &str| {
        Settings::from_args(Args::parse_from(["memkitd", "-o", o]))
            .0
            .check()
            .unwrap_err()
            .message
    };
    assert_eq!(refused("ssl_chain_cert"), "Missing ssl_chain_cert argument");
    assert_eq!(
        refused("ssl_verify_mode=4"),
        "Invalid ssl_verify_mode. Use help to see valid options."
    );
    assert_eq!(
        refused("ssl_min_version=x"),
        "could not parse argument to ssl_min_version"
    );
}
