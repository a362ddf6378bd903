//! [`Credentials`], and ASCII authentication for servers started with `-Y` (memcached 1.6
//! and memkitd): the first request on every new text connection is `set <key> 0 -1 <n>`
//! carrying `user password`. Binary connections use the same credentials for SASL PLAIN
//! (servers started with `-S`), see [`crate::sasl`].
//!
//! The server answers `STORED` (in) or `CLIENT_ERROR authentication failure`; the latter
//! fails the connect with [`Error::Client`], which a cluster does *not* take for an
//! unreachable server: a wrong password is a configuration error to surface, not a miss.
//!
//! The exptime is -1 on purpose: an auth server ignores it, and a server *without* `-Y`
//! stores the item already expired, so the password is never kept in its cache where any
//! client could read it. The password still crosses the network in plain text unless the
//! connection is TLS.

use std::fmt;

use memkit_protocol::{Limits, Response, decode_response};
use memkit_types::{Error, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::conn::Stream;

/// The key of the authentication `set` (servers ignore it).
pub const AUTH_KEY: &str = "_memkit_auth";

/// A username and password: ASCII authentication for `-Y` servers over text, SASL PLAIN for
/// `-S` servers over binary.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    username: String,
    password: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

impl Credentials {
    /// Credentials for either protocol; neither part may be empty or hold spaces, control
    /// bytes or NUL (the `-Y` server splits the data on spaces and ends it at a NUL or line
    /// break).
    pub fn new(username: impl Into<String>, password: impl Into<String>) -> Result<Credentials> {
        let c = Credentials {
            username: username.into(),
            password: password.into(),
        };
        c.check_ascii()?;
        Ok(c)
    }

    /// Credentials for SASL PLAIN only (binary connections): any bytes but NUL, which ends
    /// each part of a PLAIN message; the username not empty. A text connection refuses
    /// them unless they would also pass [`Credentials::new`].
    pub fn sasl(username: impl Into<String>, password: impl Into<String>) -> Result<Credentials> {
        let c = Credentials {
            username: username.into(),
            password: password.into(),
        };
        if c.username.is_empty() || c.username.contains('\0') || c.password.contains('\0') {
            return Err(Error::Protocol(
                "SASL username must be non-empty, and neither part may hold NUL".into(),
            ));
        }
        Ok(c)
    }

    fn check_ascii(&self) -> Result<()> {
        for part in [&self.username, &self.password] {
            if part.is_empty() || part.bytes().any(|b| b == b' ' || b.is_ascii_control()) {
                return Err(Error::Protocol(
                    "auth username and password must be non-empty, without spaces or control \
                     characters"
                        .into(),
                ));
            }
        }
        Ok(())
    }

    /// The username.
    pub fn username(&self) -> &str {
        &self.username
    }

    /// SASL PLAIN's message (RFC 4616): an empty authorization identity, the user, the
    /// password, NUL-separated.
    pub(crate) fn plain_message(&self) -> Vec<u8> {
        let mut m = Vec::with_capacity(2 + self.username.len() + self.password.len());
        m.push(0);
        m.extend_from_slice(self.username.as_bytes());
        m.push(0);
        m.extend_from_slice(self.password.as_bytes());
        m
    }

    /// The request that logs in.
    fn request(&self) -> Vec<u8> {
        let data = format!("{} {}", self.username, self.password);
        format!("set {AUTH_KEY} 0 -1 {}\r\n{data}\r\n", data.len()).into_bytes()
    }
}

/// Logs in on a fresh stream, before it carries anything else. The caller bounds the time.
pub(crate) async fn login(stream: &mut Box<dyn Stream>, creds: &Credentials) -> Result<()> {
    creds.check_ascii()?;
    let io = |e: std::io::Error| Error::Io(format!("authentication: {e}"));
    stream.write_all(&creds.request()).await.map_err(io)?;
    stream.flush().await.map_err(io)?;
    // Exactly one reply line is due and nothing else was sent, so reading up to its end
    // takes nothing that belongs to a later request.
    let mut line = Vec::with_capacity(64);
    let mut chunk = [0u8; 256];
    while !line.ends_with(b"\n") {
        let n = stream.read(&mut chunk).await.map_err(io)?;
        if n == 0 {
            return Err(Error::Io("authentication: connection closed".into()));
        }
        line.extend_from_slice(&chunk[..n]);
        if line.len() > 1024 {
            return Err(Error::Protocol("authentication: reply too long".into()));
        }
    }
    let text = |b: &[u8]| String::from_utf8_lossy(b).trim_end().to_string();
    match decode_response(&line, &Limits::default()) {
        Ok((Response::Stored, _)) => Ok(()),
        Ok((Response::ClientError(msg), _)) => Err(Error::Client(text(msg))),
        _ => Err(Error::Protocol(format!(
            "authentication: unexpected reply {:?}",
            text(&line)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_checked_and_never_printed() {
        let c = Credentials::new("alice", "s3cr3t").unwrap();
        assert_eq!(c.request(), b"set _memkit_auth 0 -1 12\r\nalice s3cr3t\r\n");
        assert!(!format!("{c:?}").contains("s3cr3t"));
        for (u, p) in [("", "x"), ("a b", "x"), ("a", "x\r\n"), ("a", "")] {
            assert!(Credentials::new(u, p).is_err(), "{u:?} {p:?}");
        }
        // SASL takes spaces (PLAIN separates with NUL), not NUL.
        let s = Credentials::sasl("a b", "p w").unwrap();
        assert_eq!(s.plain_message(), b"\0a b\0p w");
        assert!(s.check_ascii().is_err());
        for (u, p) in [("", "x"), ("a\0", "x"), ("a", "x\0")] {
            assert!(Credentials::sasl(u, p).is_err(), "{u:?} {p:?}");
        }
    }
}
