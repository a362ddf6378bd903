//! Replies, compared with what memcached 1.6.18 sent for the same requests.

use memkit_protocol::render::{
    self, DebugInfo, ItemMeta, MetaCmd, MetaStatus, meta_code, suppressed, write_meta,
};
use memkit_protocol::response::ReturnFlags;
use memkit_protocol::{
    DecodeError, Limits, MetaCode, Request, Response, decode_request, decode_response,
};

fn flags_of(line: &[u8]) -> (Vec<u8>, Request<'_>) {
    let (req, _) = decode_request(line, &Limits::default()).unwrap();
    let key = match req {
        Request::MetaGet { key, .. }
        | Request::MetaSet { key, .. }
        | Request::MetaDelete { key, .. }
        | Request::MetaArith { key, .. } => key.to_vec(),
        _ => unreachable!(),
    };
    (key, req)
}

fn meta(line: &[u8], cmd: MetaCmd, status: MetaStatus, item: Option<ItemMeta>) -> String {
    let (key, req) = flags_of(line);
    let flags = match req {
        Request::MetaGet { flags, .. }
        | Request::MetaSet { flags, .. }
        | Request::MetaDelete { flags, .. }
        | Request::MetaArith { flags, .. } => flags,
        _ => unreachable!(),
    };
    let code = meta_code(cmd, status, flags.value);
    let mut out = Vec::new();
    write_meta(&mut out, cmd, code, &key, &flags, item.as_ref());
    String::from_utf8(out).unwrap()
}

#[test]
fn meta_lines_like_memcached() {
    let item = ItemMeta {
        value_len: 2,
        client_flags: 5,
        cas: 8,
        ttl: -1,
        ..Default::default()
    };
    // memcached: "VA 2 s2 f5 t-1 c8 kk O2 h0 l0"
    assert_eq!(
        meta(
            b"mg k s v f t c k O2 h l\r\n",
            MetaCmd::Get,
            MetaStatus::Ok,
            Some(item)
        ),
        "VA 2 s2 f5 t-1 c8 kk O2 h0 l0\r\n"
    );
    // memcached: "HD c8 kk O1"
    assert_eq!(
        meta(
            b"ms k 2 T0 c k O1 F5\r\nab\r\n",
            MetaCmd::Set,
            MetaStatus::Ok,
            Some(item)
        ),
        "HD c8 kk O1\r\n"
    );
    // memcached: "EN kbmV3 b", "HD kbmV3 b"
    assert_eq!(
        meta(b"mg bmV3 b k v\r\n", MetaCmd::Get, MetaStatus::Miss, None),
        "EN kbmV3 b\r\n"
    );
    assert_eq!(
        meta(
            b"ms bmV3 1 b k\r\nz\r\n",
            MetaCmd::Set,
            MetaStatus::Ok,
            Some(item)
        ),
        "HD kbmV3 b\r\n"
    );
    // memcached: "NF kk O9"; quiet md miss still answers, quiet hit does not.
    assert_eq!(
        meta(b"md k k O9\r\n", MetaCmd::Delete, MetaStatus::Miss, None),
        "NF kk O9\r\n"
    );
    assert_eq!(
        meta(b"md k q\r\n", MetaCmd::Delete, MetaStatus::Miss, None),
        "NF\r\n"
    );
    assert_eq!(
        meta(b"md k q\r\n", MetaCmd::Delete, MetaStatus::Ok, None),
        ""
    );
    // memcached: "EN O1234567890123456789012345678901"
    assert_eq!(
        meta(
            b"mg k v O1234567890123456789012345678901\r\n",
            MetaCmd::Get,
            MetaStatus::Miss,
            None
        ),
        "EN O1234567890123456789012345678901\r\n"
    );
    // memcached: mg q hit -> "HD", "HD kk"; mg q miss -> nothing.
    assert_eq!(
        meta(b"mg k q k\r\n", MetaCmd::Get, MetaStatus::Ok, Some(item)),
        "HD kk\r\n"
    );
    assert_eq!(
        meta(b"mg k q k\r\n", MetaCmd::Get, MetaStatus::Miss, None),
        ""
    );
    // Z X W come last, in that order.
    let stale = ItemMeta {
        stale: true,
        win: true,
        win_taken: false,
        ..item
    };
    assert_eq!(
        meta(b"mg k c\r\n", MetaCmd::Get, MetaStatus::Ok, Some(stale)),
        "HD c8 X W\r\n"
    );
    // ma: VA with the number; c t O k in order; NF echoes only O k.
    let mut out = Vec::new();
    let (key, req) = flags_of(b"ma k v c t O1\r\n");
    if let Request::MetaArith { flags, .. } = req {
        render::write_meta_value(
            &mut out,
            MetaCmd::Arith,
            &key,
            &flags,
            &ItemMeta {
                cas: 3,
                ttl: -1,
                ..Default::default()
            },
            b"12",
        );
    }
    assert_eq!(out, b"VA 2 c3 t-1 O1\r\n12\r\n");
    assert_eq!(
        meta(b"ma k c t O1\r\n", MetaCmd::Arith, MetaStatus::Miss, None),
        "NF O1\r\n"
    );
    assert!(suppressed(MetaCmd::Arith, MetaCode::Va, true));
    assert!(!suppressed(MetaCmd::Arith, MetaCode::Nf, true));
}

#[test]
fn me_line() {
    let mut out = Vec::new();
    let d = DebugInfo {
        exp: -1,
        la: 0,
        cas: 9,
        fetched: true,
        cls: 1,
        size: 63,
    };
    render::write_meta_debug(&mut out, b"bmV3", true, &d);
    // memcached: "ME bmV3 exp=-1 la=0 cas=9 fetch=yes cls=1 size=63"
    assert_eq!(
        out,
        b"ME bmV3 exp=-1 la=0 cas=9 fetch=yes cls=1 size=63\r\n"
    );
}

#[test]
fn hot_path_writers() {
    let mut out = Vec::new();
    render::write_value(&mut out, b"k", 0, b"a", None);
    render::write_value(&mut out, b"k", 1, b"", Some(7));
    render::write_end(&mut out);
    render::write_number(&mut out, 42);
    render::write_stat_u64(&mut out, "pid", 1);
    render::write_line(&mut out, "STORED");
    assert_eq!(
        out,
        b"VALUE k 0 1\r\na\r\nVALUE k 1 0 7\r\n\r\nEND\r\n42\r\nSTAT pid 1\r\nSTORED\r\n"
    );
}

#[test]
fn client_decodes_replies() {
    let l = Limits::default();
    let buf = b"VALUE k 0 1\r\na\r\nEND\r\nVA 2 s2 c8 kk W\r\nab\r\nHD\r\n42\r\nSTAT version 1.6.18\r\nCLIENT_ERROR bad data chunk\r\nMN\r\nBUSY currently processing\r\n";
    let mut pos = 0;
    let mut got = Vec::new();
    while pos < buf.len() {
        let (r, used) = decode_response(&buf[pos..], &l).unwrap();
        got.push(format!("{r:?}"));
        if let Response::Meta {
            code: MetaCode::Va,
            flags,
            ..
        } = r
        {
            let f = ReturnFlags::parse(flags);
            assert_eq!(
                (f.size, f.cas, f.key, f.win),
                (Some(2), Some(8), Some(&b"k"[..]), true)
            );
        }
        pos += used;
    }
    assert_eq!(got.len(), 9, "{got:?}");
    assert_eq!(
        decode_response(b"VALUE k 0 5\r\nab", &l),
        Err(DecodeError::Incomplete)
    );
    assert_eq!(
        decode_response(b"VALUE k 0 1\r\nabc\r\n", &l),
        Err(DecodeError::Malformed)
    );
    assert_eq!(
        decode_response(b"VALUE k 0 99999999999\r\n", &l),
        Err(DecodeError::Malformed)
    );
}
