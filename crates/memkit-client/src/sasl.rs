//! SASL PLAIN over the binary protocol, for servers started with `-S` (memcached and
//! memkitd): the first frames on every new connection, before its first request.
//!
//! The exchange is libmemcached's (`memcached_sasl_authenticate_connection`), with Cyrus's
//! PLAIN client:
//! 1. `SASL_LIST_MECHS`. A server without SASL answers `UNKNOWN_COMMAND`: there is nothing
//!    to log in to, and the connection is used as it is (libmemcached does the same; a
//!    server without `-Y` likewise ignores the ASCII login). A list without `PLAIN` fails.
//! 2. `SASL_AUTH` with key `PLAIN` and the initial response `authzid NUL user NUL password`
//!    (RFC 4616; the authorization identity empty, as Cyrus sends it).
//! 3. `AUTH_CONTINUE` (a server that wants the response in a step) is answered with
//!    `SASL_STEP` carrying the same PLAIN message, as Cyrus's client step does, at most a few
//!    times. Success is status 0 (`Authenticated`).
//!
//! `AUTH_ERROR` fails the connect with [`Error::Client`], which a cluster does *not* take for
//! an unreachable server: a wrong password is a configuration error to surface, not a miss
//! (as in [`crate::auth`]). PLAIN sends the password in clear: use TLS on any network you do
//! not control.

use memkit_protocol::binary::{self, Command, HEADER_LEN, Header, Status, op};
use memkit_types::{Error, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::auth::Credentials;
use crate::conn::Stream;
use crate::reply::BinaryReply;

/// The one mechanism offered.
const PLAIN: &[u8] = b"PLAIN";
/// `AUTH_CONTINUE` rounds answered before giving up.
const MAX_STEPS: usize = 4;
/// The largest SASL reply read (a mechanism list or a challenge).
const MAX_BODY: usize = 64 * 1024;

/// A reply's value (a mechanism list, an error's message) as text.
fn text(reply: &BinaryReply) -> String {
    String::from_utf8_lossy(&reply.value()).into_owned()
}

fn io(e: std::io::Error) -> Error {
    Error::Io(format!("SASL authentication: {e}"))
}

/// Sends one request and reads its reply. Nothing else is in flight on the stream, so
/// reading exactly one frame takes nothing that belongs to a later request.
async fn call(
    stream: &mut Box<dyn Stream>,
    opcode: u8,
    mech: &[u8],
    data: &[u8],
) -> Result<BinaryReply> {
    let cmd = match opcode {
        op::SASL_LIST_MECHS => Command::SaslListMechs,
        _ => Command::SaslAuth {
            step: opcode == op::SASL_STEP,
            mech,
            data,
        },
    };
    let out = crate::binary::request(opcode, cmd);
    stream.write_all(&out).await.map_err(io)?;
    stream.flush().await.map_err(io)?;
    let mut frame = vec![0u8; HEADER_LEN];
    stream.read_exact(&mut frame).await.map_err(io)?;
    let header = Header::parse(&frame).expect("a whole header");
    if header.magic != binary::RESPONSE_MAGIC {
        return Err(Error::Protocol(
            "SASL authentication: not a binary reply (is this a binary-protocol server?)".into(),
        ));
    }
    let malformed = || Error::Protocol("SASL authentication: malformed reply".into());
    let len = header.body_len as usize;
    if len > MAX_BODY {
        return Err(malformed());
    }
    frame.resize(HEADER_LEN + len, 0);
    stream
        .read_exact(&mut frame[HEADER_LEN..])
        .await
        .map_err(io)?;
    let Ok(Some((reply, _))) = BinaryReply::decode(&frame) else {
        return Err(malformed());
    };
    if reply.opcode() != opcode {
        return Err(Error::Protocol(format!(
            "SASL authentication: reply to opcode 0x{:02x} for 0x{opcode:02x}",
            reply.opcode()
        )));
    }
    Ok(reply)
}

/// Authenticates a fresh binary stream with PLAIN, before it carries anything else. The
/// caller bounds the time.
pub(crate) async fn login(stream: &mut Box<dyn Stream>, creds: &Credentials) -> Result<()> {
    let mechs = call(stream, op::SASL_LIST_MECHS, b"", b"").await?;
    match mechs.status() {
        Some(Status::Ok) => {}
        // No SASL on this server: nothing to log in to (libmemcached's reading too).
        Some(Status::UnknownCommand) => return Ok(()),
        _ => {
            return Err(Error::Protocol(format!(
                "SASL authentication: listing mechanisms: status 0x{:04x} {}",
                mechs.header().status,
                text(&mechs)
            )));
        }
    }
    let list = text(&mechs);
    if !list
        .split_ascii_whitespace()
        .any(|m| m.as_bytes().eq_ignore_ascii_case(PLAIN))
    {
        return Err(Error::Client(format!(
            "SASL authentication: the server offers {list:?}, not PLAIN"
        )));
    }
    let message = creds.plain_message();
    let mut reply = call(stream, op::SASL_AUTH, PLAIN, &message).await?;
    let mut steps = 0;
    loop {
        match reply.status() {
            Some(Status::Ok) => return Ok(()),
            Some(Status::AuthContinue) if steps < MAX_STEPS => {
                steps += 1;
                reply = call(stream, op::SASL_STEP, PLAIN, &message).await?;
            }
            Some(Status::AuthContinue) => {
                return Err(Error::Protocol(
                    "SASL authentication: the server kept asking to continue".into(),
                ));
            }
            Some(Status::AuthError) => {
                return Err(Error::Client(format!(
                    "SASL authentication failed for user {:?}: {}",
                    creds.username(),
                    text(&reply)
                )));
            }
            _ => {
                return Err(Error::Protocol(format!(
                    "SASL authentication: status 0x{:04x} {}",
                    reply.header().status,
                    text(&reply)
                )));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memkit_protocol::Limits;
    use memkit_protocol::binary::{decode_request, write_error, write_header, write_ok};

    /// A scripted server: answers each request it decodes with `answer(opcode, mech, data)`.
    async fn serve(
        mut peer: tokio::io::DuplexStream,
        answer: impl Fn(u8, &[u8], &[u8]) -> Option<Vec<u8>> + Send + 'static,
    ) -> Vec<(u8, Vec<u8>)> {
        let mut seen = Vec::new();
        let mut buf = Vec::new();
        let auth = binary::Auth {
            sasl: true,
            authenticated: false,
        };
        loop {
            let mut chunk = [0u8; 1024];
            let n = peer.read(&mut chunk).await.unwrap();
            if n == 0 {
                return seen;
            }
            buf.extend_from_slice(&chunk[..n]);
            while let Ok((req, used)) = decode_request(&buf, &Limits::default(), auth) {
                let (mech, data): (&[u8], &[u8]) = match req.cmd {
                    Command::SaslAuth { mech, data, .. } => (mech, data),
                    _ => (b"", b""),
                };
                seen.push((req.opcode, data.to_vec()));
                let Some(reply) = answer(req.opcode, mech, data) else {
                    return seen;
                };
                peer.write_all(&reply).await.unwrap();
                buf.drain(..used);
            }
        }
    }

    fn ok(opcode: u8, body: &[u8]) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        write_ok(&mut out, opcode, 0, 0, body);
        Some(out)
    }

    fn status(opcode: u8, s: Status) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        match s {
            Status::AuthContinue => write_header(&mut out, opcode, s, 0, 0, 0, 0, 0),
            _ => write_error(&mut out, opcode, 0, s),
        }
        Some(out)
    }

    async fn run(
        creds: &Credentials,
        answer: impl Fn(u8, &[u8], &[u8]) -> Option<Vec<u8>> + Send + 'static,
    ) -> (Result<()>, Vec<(u8, Vec<u8>)>) {
        let (client, server) = tokio::io::duplex(4096);
        let server = tokio::spawn(serve(server, answer));
        let mut stream: Box<dyn Stream> = Box::new(client);
        let r = login(&mut stream, creds).await;
        drop(stream);
        (r, server.await.unwrap())
    }

    #[tokio::test]
    async fn plain_with_an_initial_response() {
        let c = Credentials::sasl("alice", "pass word").unwrap();
        let (r, seen) = run(&c, |opcode, _, _| match opcode {
            op::SASL_LIST_MECHS => ok(opcode, b"CRAM-MD5 PLAIN"),
            _ => ok(opcode, b"Authenticated"),
        })
        .await;
        r.unwrap();
        assert_eq!(
            seen,
            vec![
                (op::SASL_LIST_MECHS, vec![]),
                (op::SASL_AUTH, b"\0alice\0pass word".to_vec())
            ]
        );
    }

    #[tokio::test]
    async fn auth_continue_is_answered_with_a_step() {
        let c = Credentials::sasl("alice", "pw").unwrap();
        let (r, seen) = run(&c, |opcode, _, _| match opcode {
            op::SASL_LIST_MECHS => ok(opcode, b"PLAIN"),
            op::SASL_AUTH => status(opcode, Status::AuthContinue),
            _ => ok(opcode, b"Authenticated"),
        })
        .await;
        r.unwrap();
        assert_eq!(seen[2], (op::SASL_STEP, b"\0alice\0pw".to_vec()));
        // A server that never stops asking is given up on.
        let (r, seen) = run(&c, |opcode, _, _| match opcode {
            op::SASL_LIST_MECHS => ok(opcode, b"PLAIN"),
            _ => status(opcode, Status::AuthContinue),
        })
        .await;
        assert!(matches!(r, Err(Error::Protocol(_))), "{r:?}");
        assert_eq!(seen.len(), 2 + MAX_STEPS);
    }

    #[tokio::test]
    async fn refusals() {
        let c = Credentials::sasl("alice", "bad").unwrap();
        let (r, _) = run(&c, |opcode, _, _| match opcode {
            op::SASL_LIST_MECHS => ok(opcode, b"PLAIN"),
            _ => status(opcode, Status::AuthError),
        })
        .await;
        let e = r.unwrap_err();
        assert!(
            matches!(&e, Error::Client(m) if m.contains("alice") && m.contains("Auth failure.")),
            "{e:?}"
        );
        assert!(!e.is_unavailable());
        let (r, seen) = run(&c, |opcode, _, _| match opcode {
            op::SASL_LIST_MECHS => ok(opcode, b"CRAM-MD5"),
            _ => ok(opcode, b"Authenticated"),
        })
        .await;
        assert!(matches!(r, Err(Error::Client(_))), "{r:?}");
        assert_eq!(seen.len(), 1, "no password sent to a server without PLAIN");
        // No SASL on the server: nothing to do.
        let (r, seen) = run(&c, |opcode, _, _| status(opcode, Status::UnknownCommand)).await;
        r.unwrap();
        assert_eq!(seen.len(), 1);
    }
}
