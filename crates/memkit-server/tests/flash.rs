//! The flash tier served (`-o ext_path`): with RAM far smaller than the data, values come
//! back from flash through every protocol and every driver, in order behind and ahead of
//! other requests, while the connection waits parked; a multi-get's values on flash are read
//! together; a slow read holds up its own connection only.

use memkit_protocol::binary::{encode_request, op};
use memkit_testkit::wire::{Until, Wire};
use memkit_testkit::{TestServer, tempdir};

const N: usize = 3000;
const LEN: usize = 4000;

fn value(i: usize) -> Vec<u8> {
    (0..LEN).map(|j| b'a' + ((i * 7 + j) % 26) as u8).collect()
}

/// A server of each driver, one worker each, with 2 MiB of RAM over a 64 MiB flash file.
fn servers(dir: &std::path::Path) -> Vec<(&'static str, TestServer)> {
    let ext = format!(
        "ext_page_size=2,ext_wbuf_size=2,ext_path={}:64m",
        dir.join("flash").display()
    );
    vec![
        (
            "io_uring",
            TestServer::start(&["-t", "1", "-m", "2", "-o", &ext]),
        ),
        (
            "epoll",
            TestServer::start(&["-t", "1", "-m", "2", "--io", "epoll", "-o", &ext]),
        ),
        ("task", TestServer::start_tasks(&["-m", "2", "-o", &ext])),
    ]
}

async fn fill(c: &mut Wire<tokio::net::TcpStream>) {
    for chunk in (0..N).collect::<Vec<_>>().chunks(100) {
        let mut req = Vec::new();
        for &i in chunk {
            req.extend_from_slice(format!("set k{i} {i} 0 {LEN} noreply\r\n").as_bytes());
            req.extend_from_slice(&value(i));
            req.extend_from_slice(b"\r\n");
        }
        req.extend_from_slice(b"mn\r\n");
        c.send(&req).await;
        assert_eq!(c.read(Until::End(b"MN\r\n")).await, b"MN\r\n");
    }
}

fn text_value(i: usize) -> Vec<u8> {
    let mut want = format!("VALUE k{i} {i} {LEN}\r\n").into_bytes();
    want.extend_from_slice(&value(i));
    want.extend_from_slice(b"\r\n");
    want
}

async fn stat(c: &mut Wire<tokio::net::TcpStream>, name: &str) -> u64 {
    let stats = c.ask(b"stats\r\n", Until::END).await;
    let line = stats
        .lines()
        .find(|l| l.starts_with(&format!("STAT {name} ")))
        .unwrap_or_else(|| panic!("no {name} in stats"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[tokio::test]
async fn values_on_flash_come_back_through_text_meta_and_binary_under_every_driver() {
    let dir = tempdir("flash-serve");
    for (name, s) in servers(dir.path()) {
        let mut c = s.wire().await;
        fill(&mut c).await;
        assert!(stat(&mut c, "get_extstore").await == 0);
        // One key at a time, pipelined in tens: each batch's flash reads go together.
        let mut hits = 0;
        for batch in (0..N).collect::<Vec<_>>().chunks(10) {
            let mut req = Vec::new();
            for &i in batch {
                req.extend_from_slice(format!("get k{i}\r\n").as_bytes());
            }
            req.extend_from_slice(b"mn\r\n");
            c.send(&req).await;
            let got = c.read(Until::End(b"MN\r\n")).await;
            let mut want_all = Vec::new();
            let mut rest = &got[..];
            for &i in batch {
                let want = text_value(i);
                if rest.starts_with(&want) {
                    hits += 1;
                    rest = &rest[want.len()..];
                    want_all.extend_from_slice(&want);
                }
                assert!(
                    rest.starts_with(b"END\r\n"),
                    "{name}: k{i}: {:?}",
                    &rest[..rest.len().min(80)]
                );
                rest = &rest[5..];
            }
            assert_eq!(rest, b"MN\r\n", "{name}");
        }
        assert!(hits * 100 >= N * 95, "{name}: {hits} of {N}");
        let from_flash = stat(&mut c, "get_extstore").await;
        assert!(
            from_flash as usize >= N / 2,
            "{name}: {from_flash} read from flash"
        );
        // A multi-get of many values on flash, the meta and the binary get.
        let keys: Vec<String> = (0..200).map(|i| format!("k{i}")).collect();
        let got = c
            .ask(
                format!("gets {}\r\n", keys.join(" ")).as_bytes(),
                Until::END,
            )
            .await;
        let values = got.matches("VALUE ").count();
        assert!(values >= 190, "{name}: {values} of 200 in one multi-get");
        for i in [1usize, 17, 1000] {
            let got = c
                .ask(format!("mg k{i} v f s\r\n").as_bytes(), Until::Lines(2))
                .await;
            let mut want = format!("VA {LEN} f{i} s{LEN}\r\n").into_bytes();
            want.extend_from_slice(&value(i));
            want.extend_from_slice(b"\r\n");
            assert_eq!(got.as_bytes(), &want[..], "{name}: mg k{i}");
            // The binary protocol, on a connection of its own (its first byte picks it).
            let mut frame = Vec::new();
            let key = format!("k{i}");
            encode_request(&mut frame, op::GET, 7, 0, &[], key.as_bytes(), &[]);
            let mut b = s.wire().await;
            b.send(&frame).await;
            let reply = b.read(Until::Frame).await;
            assert_eq!(
                &reply[reply.len() - LEN..],
                &value(i)[..],
                "{name}: binary k{i}"
            );
        }
        s.stop().await;
    }
}

#[tokio::test]
async fn a_slow_flash_read_holds_up_its_own_connection_only() {
    let dir = tempdir("flash-slow");
    for (name, s) in servers(dir.path()) {
        let mut c = s.wire().await;
        fill(&mut c).await;
        let store = s.shared().engine.flash_store().unwrap().clone();
        store.slow_reads(600);
        // Keys 0..50 went to flash first; one of them is still there.
        let key = (0..50)
            .find(|&i| {
                s.shared()
                    .engine
                    .flash_value(format!("k{i}").as_bytes())
                    .is_some()
            })
            .expect("a value on flash");
        let start = std::time::Instant::now();
        c.send(format!("get k{key}\r\nmn\r\n").as_bytes()).await;
        // The worker (one per server here) serves another connection meanwhile.
        let mut other = s.wire().await;
        assert_eq!(other.ask(b"mn\r\n", Until::LINE).await, "MN\r\n");
        let conns = other.ask(b"stats conns\r\n", Until::END).await;
        assert!(conns.contains("conn_io_queue"), "{name}: {conns}");
        // ... while this one still waits for its value.
        assert!(
            c.pending(std::time::Duration::from_millis(20))
                .await
                .is_empty(),
            "{name}: replied before its read was done"
        );
        let got = c.read(Until::End(b"MN\r\n")).await;
        let mut want = text_value(key);
        want.extend_from_slice(b"END\r\nMN\r\n");
        assert_eq!(got, want, "{name}");
        assert!(
            start.elapsed() >= std::time::Duration::from_millis(600),
            "{name}"
        );
        store.slow_reads(0);
        s.stop().await;
    }
}
