//! The server's reply writers.

use super::*;

/// Appends a response header with `status`, `opaque` and `cas` for these lengths.
#[allow(clippy::too_many_arguments)]
pub fn write_header(
    out: &mut Vec<u8>,
    opcode: u8,
    status: Status,
    extras_len: u8,
    key_len: u16,
    body_len: u32,
    opaque: u32,
    cas: u64,
) {
    Header {
        magic: RESPONSE_MAGIC,
        opcode,
        key_len,
        extras_len,
        data_type: 0,
        status: status as u16,
        body_len,
        opaque,
        cas,
    }
    .write(out);
}

/// A success reply carrying `body` (no extras, no key).
pub fn write_ok(out: &mut Vec<u8>, opcode: u8, opaque: u32, cas: u64, body: &[u8]) {
    write_header(
        out,
        opcode,
        Status::Ok,
        0,
        0,
        body.len() as u32,
        opaque,
        cas,
    );
    out.extend_from_slice(body);
}

/// An error reply with memcached's message for `status`.
pub fn write_error(out: &mut Vec<u8>, opcode: u8, opaque: u32, status: Status) {
    write_error_message(out, opcode, opaque, status, status.message());
}

/// An error reply with a message of its own (memcached's `out_of_memory` texts).
pub fn write_error_message(out: &mut Vec<u8>, opcode: u8, opaque: u32, status: Status, msg: &[u8]) {
    write_header(out, opcode, status, 0, 0, msg.len() as u32, opaque, 0);
    out.extend_from_slice(msg);
}

/// A get-family hit: flags in the extras, the key if asked, the value unless `TOUCH`.
pub fn write_hit(
    out: &mut Vec<u8>,
    req: &Request<'_>,
    flags: u32,
    cas: u64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) {
    let klen = key.map_or(0, <[u8]>::len);
    let vlen = value.map_or(0, <[u8]>::len);
    let body = (4 + klen + vlen) as u32;
    write_header(
        out,
        req.opcode,
        Status::Ok,
        4,
        klen as u16,
        body,
        req.opaque,
        cas,
    );
    out.extend_from_slice(&flags.to_be_bytes());
    out.extend_from_slice(key.unwrap_or_default());
    out.extend_from_slice(value.unwrap_or_default());
}

/// A `GETK`/`GATK` miss: `KEY_ENOENT` with the key and no message.
pub fn write_miss_with_key(out: &mut Vec<u8>, opcode: u8, opaque: u32, key: &[u8]) {
    let klen = key.len() as u16;
    write_header(
        out,
        opcode,
        Status::KeyNotFound,
        0,
        klen,
        klen.into(),
        opaque,
        0,
    );
    out.extend_from_slice(key);
}

/// One `STAT` packet; an empty name and value end the list.
pub fn write_stat(out: &mut Vec<u8>, opaque: u32, name: &[u8], value: &[u8]) {
    let body = (name.len() + value.len()) as u32;
    write_header(
        out,
        op::STAT,
        Status::Ok,
        0,
        name.len() as u16,
        body,
        opaque,
        0,
    );
    out.extend_from_slice(name);
    out.extend_from_slice(value);
}
