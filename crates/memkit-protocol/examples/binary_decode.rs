//! A decode-only loop over a mix of binary request frames, for counting the decoder's
//! instructions under callgrind:
//!
//! ```text
//! cargo build --release -p memkit-protocol --example binary_decode
//! valgrind --tool=callgrind target/release/examples/binary_decode 200000
//! ```
//!
//! The mix: the common commands (GET, GETKQ, SET, APPEND, INCR, DELETE, TOUCH, NOOP,
//! VERSION, FLUSH, STAT) and the refusals (a too-large SET, bad extras, an unknown opcode),
//! each decoded once per round. Prints a checksum of what was decoded so nothing is optimised
//! away.

use memkit_protocol::Limits;
use memkit_protocol::binary::{Auth, DecodeError, decode_request, op};

fn frame(opcode: u8, extras: &[u8], key: &[u8], value: &[u8]) -> Vec<u8> {
    let body = extras.len() + key.len() + value.len();
    let mut f = vec![0x80, opcode];
    f.extend_from_slice(&(key.len() as u16).to_be_bytes());
    f.extend_from_slice(&[extras.len() as u8, 0, 0, 0]);
    f.extend_from_slice(&(body as u32).to_be_bytes());
    f.extend_from_slice(&[0; 12]);
    f.extend_from_slice(extras);
    f.extend_from_slice(key);
    f.extend_from_slice(value);
    f
}

fn frames() -> Vec<Vec<u8>> {
    let key = b"user:1234567";
    let mut too_large = frame(op::SET, &[0; 8], key, &[]);
    too_large[8..12].copy_from_slice(&(8 + key.len() as u32 + (2 << 20)).to_be_bytes());
    vec![
        frame(op::GET, &[], key, &[]),
        frame(op::GETKQ, &[], key, &[]),
        frame(op::SET, &[0, 0, 0, 1, 0, 0, 0, 60], key, &[b'v'; 100]),
        frame(op::APPEND, &[], key, b"tail"),
        frame(op::INCREMENT, &[0; 20], key, &[]),
        frame(op::DELETE, &[], key, &[]),
        frame(op::TOUCH, &[0, 0, 0, 9], key, &[]),
        frame(op::NOOP, &[], &[], &[]),
        frame(op::VERSION, &[], &[], &[]),
        frame(op::FLUSH, &[0, 0, 0, 5], &[], &[]),
        frame(op::STAT, &[], b"items", &[]),
        too_large,
        frame(op::GET, &[0; 4], key, &[]),
        frame(0x7e, &[], key, b"xyz"),
    ]
}

fn main() {
    let rounds: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let frames = frames();
    let limits = Limits::default();
    let mut sum = 0u64;
    for _ in 0..rounds {
        for f in &frames {
            let f = std::hint::black_box(f.as_slice());
            sum += match decode_request(f, &limits, Auth::default()) {
                Ok((req, used)) => used as u64 + u64::from(req.opcode),
                Err(DecodeError::Reject(r)) => r.consumed as u64 + r.swallow,
                Err(_) => 1,
            };
        }
    }
    println!("{sum}");
}
