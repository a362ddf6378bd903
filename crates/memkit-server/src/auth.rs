//! ASCII authentication (`-Y FILE`), as memcached 1.6 does it.
//!
//! With an auth file, a new connection is unauthenticated: its first command must be
//! `set <any key> <flags> <exptime> <bytes>` whose data block is `username password`. The
//! key, flags and exptime are ignored and nothing is stored. Until it succeeds, every
//! command line gets `CLIENT_ERROR unauthenticated`; a wrong password gets
//! `CLIENT_ERROR authentication failure` and the connection stays open, still
//! unauthenticated, so the client may try again. These rules and replies are memcached
//! 1.6.18's `try_read_command_asciiauth`, byte for byte, compared side by side in tests.
//!
//! The phase runs before [`crate::connection::serve`] and hands it whatever the client
//! pipelined behind its credentials through [`Prefixed`], so the request loop itself does
//! not know authentication exists and costs nothing extra when it is off.
//!
//! One deliberate difference: memcached 1.6.18 answers only the last of several
//! unauthenticated commands that arrive in one read (each reply overwrites the previous
//! one); memkitd answers every command, so a pipelining client never loses count.

use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use parking_lot::RwLock;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

use crate::state::Shared;

/// memcached closes a connection whose first line has no newline within 2048 bytes.
const MAX_LINE: usize = 2048;
/// The largest credentials block accepted. memcached reads it into its 16 KiB read buffer
/// and drops the connection when it does not fit; memkitd closes as soon as it is announced.
const MAX_DATA: u64 = 16 * 1024;

/// The `user:password` entries of an auth file.
#[derive(Clone, Default)]
pub struct AuthFile {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
}

impl std::fmt::Debug for AuthFile {
    // Never print passwords, not even in a debug dump of the server state.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthFile")
            .field("entries", &self.entries.len())
            .finish()
    }
}

impl AuthFile {
    /// Parses memcached's format: one `user:password` per line, the user up to the first
    /// `:`, the password up to the end of the line (`\r`, `\n` or NUL). A line without `:`
    /// (a blank line included) makes the whole file malformed, as in memcached. memcached
    /// silently keeps only the first 8 entries; memkitd keeps them all.
    pub fn parse(text: &[u8]) -> Option<AuthFile> {
        let mut entries = Vec::new();
        for line in text.split_inclusive(|&b| b == b'\n') {
            let colon = line
                .iter()
                .position(|&b| b == b':' || b == 0 || b == b'\n')?;
            if line[colon] != b':' {
                return None;
            }
            let rest = &line[colon + 1..];
            let end = rest
                .iter()
                .position(|&b| matches!(b, b'\r' | b'\n' | 0))
                .unwrap_or(rest.len());
            entries.push((line[..colon].to_vec(), rest[..end].to_vec()));
        }
        Some(AuthFile { entries })
    }

    /// Reads and parses `path`; the error is memcached's start-up message.
    pub fn load(path: &Path) -> Result<AuthFile, String> {
        let text = std::fs::read(path).map_err(|e| {
            format!(
                "Could not open authfile [{}] for reading, error {e}",
                path.display()
            )
        })?;
        AuthFile::parse(&text).ok_or_else(|| {
            format!(
                "Authfile [{}] has a malformed entry. Should be 'user:password'",
                path.display()
            )
        })
    }

    /// Whether `user` / `pass` is an entry. Every entry is compared in full, in time that
    /// depends on the lengths only, so the reply time does not tell how much of a guess
    /// was right (memcached's `safe_memcmp`).
    pub fn check(&self, user: &[u8], pass: &[u8]) -> bool {
        let mut found = false;
        for (u, p) in &self.entries {
            found |= ct_eq(u, user) & ct_eq(p, pass);
        }
        found
    }

    /// How many entries the file has.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the file has no entries (then nobody can authenticate).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The server's authentication state: the file (reloaded on SIGHUP) and the counters
/// `stats` reports as `auth_cmds` and `auth_errors`.
#[derive(Debug)]
pub struct Auth {
    path: String,
    file: RwLock<Arc<AuthFile>>,
    pub cmds: AtomicU64,
    pub errors: AtomicU64,
}

impl Auth {
    /// Loads `path`; the error is memcached's message.
    pub fn load(path: &str) -> Result<Auth, String> {
        Ok(Auth {
            file: RwLock::new(Arc::new(AuthFile::load(Path::new(path))?)),
            path: path.to_string(),
            cmds: AtomicU64::new(0),
            errors: AtomicU64::new(0),
        })
    }

    /// The file's path (`stats settings` shows it as `auth_enabled_ascii`).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Re-reads the file (memcached does this on SIGHUP). On error the old entries stay,
    /// so a half-written file cannot lock everybody out.
    pub fn reload(&self) -> Result<usize, String> {
        let f = AuthFile::load(Path::new(&self.path))?;
        let n = f.len();
        *self.file.write() = Arc::new(f);
        Ok(n)
    }

    fn check(&self, user: &[u8], pass: &[u8]) -> bool {
        let ok = self.file.read().check(user, pass);
        self.cmds.fetch_add(1, Relaxed);
        if !ok {
            self.errors.fetch_add(1, Relaxed);
        }
        ok
    }
}

/// What the bytes read so far lead to.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    /// Wait for more input.
    More,
    /// Send this reply; still unauthenticated.
    Reply(&'static [u8]),
    /// Send `STORED`; authenticated.
    Authed,
    /// Drop the connection without a reply.
    Close,
}

/// The unauthenticated parser's state between reads: the size of the data block the
/// `set` line announced, once that line is consumed.
#[derive(Debug, Default)]
struct Phase {
    data: Option<usize>,
}

impl Phase {
    /// Consumes at most one command from `buf`.
    fn step(&mut self, buf: &mut BytesMut, auth: &Auth) -> Step {
        let need = match self.data {
            Some(n) => n,
            None => {
                // memcached looks for a command only once it has 2 bytes.
                if buf.len() < 2 {
                    return Step::More;
                }
                let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
                    return if buf.len() > MAX_LINE {
                        Step::Close
                    } else {
                        Step::More
                    };
                };
                let line = buf.split_to(nl + 1);
                let t = tokens(&line[..nl]);
                let size = match t.as_slice() {
                    [b"set", _, _, _, size, ..] => strtoul(size),
                    _ => None,
                };
                let Some(size) = size else {
                    return Step::Reply(b"CLIENT_ERROR unauthenticated\r\n");
                };
                // memcached keeps the size in a uint32_t: larger numbers wrap.
                let need = u64::from(size as u32) + 2;
                if need > MAX_DATA {
                    return Step::Close;
                }
                self.data = Some(need as usize);
                need as usize
            }
        };
        if buf.len() < need {
            return Step::More;
        }
        self.data = None;
        let data = buf.split_to(need);
        if !data.ends_with(b"\r\n") {
            return Step::Reply(b"CLIENT_ERROR bad command line termination\r\n");
        }
        match tokens(&data[..need - 2]).as_slice() {
            [user, pass, ..] => {
                if auth.check(user, pass) {
                    Step::Authed
                } else {
                    Step::Reply(b"CLIENT_ERROR authentication failure\r\n")
                }
            }
            _ => Step::Reply(b"CLIENT_ERROR bad authentication token format\r\n"),
        }
    }
}

/// memcached's `tokenize_command`: the text up to the first NUL, split on single spaces,
/// empty tokens skipped. Nothing else (not `\r`, not tabs) separates tokens.
fn tokens(line: &[u8]) -> Vec<&[u8]> {
    let end = line.iter().position(|&b| b == 0).unwrap_or(line.len());
    line[..end]
        .split(|&b| b == b' ')
        .filter(|t| !t.is_empty())
        .collect()
}

/// memcached's `safe_strtoul`: C `strtoul` (leading whitespace, a sign), the number
/// followed by whitespace or the end, no negative numbers, no overflow of 64 bits.
fn strtoul(tok: &[u8]) -> Option<u64> {
    let is_space = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c);
    let start = tok.iter().position(|b| !is_space(b))?;
    let mut s = &tok[start..];
    let neg = s.first() == Some(&b'-');
    if matches!(s.first(), Some(b'+' | b'-')) {
        s = &s[1..];
    }
    let digits = s.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || !(digits == s.len() || is_space(&s[digits])) {
        return None;
    }
    let mut v: u64 = 0;
    for &d in &s[..digits] {
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    if neg {
        // strtoul negates; memcached refuses the result when it looks negative as signed.
        let v = v.wrapping_neg();
        return ((v as i64) >= 0).then_some(v);
    }
    Some(v)
}

/// Serves a connection: authentication first when `-Y` is on, then the request loop.
pub async fn serve<S: crate::connection::Transport>(mut stream: S, sh: Arc<Shared>, id: u64) {
    let Some(auth) = sh.auth.clone() else {
        return crate::connection::serve(stream, sh, id).await;
    };
    if let Some(rest) = authenticate(&mut stream, &sh, &auth).await {
        crate::connection::serve(Prefixed::new(rest, stream), sh, id).await;
    }
}

/// Runs the unauthenticated phase. `Some(bytes read past the credentials)` once the client
/// authenticated; `None` when the connection is to close.
async fn authenticate<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    sh: &Shared,
    auth: &Auth,
) -> Option<BytesMut> {
    let idle =
        (sh.settings.idle_timeout > 0).then(|| Duration::from_secs(sh.settings.idle_timeout));
    let mut buf = BytesMut::with_capacity(1024);
    let mut phase = Phase::default();
    let mut out = Vec::new();
    loop {
        loop {
            match phase.step(&mut buf, auth) {
                Step::More => break,
                Step::Close => return None,
                Step::Reply(r) => out.extend_from_slice(r),
                Step::Authed => {
                    out.extend_from_slice(b"STORED\r\n");
                    write(stream, sh, &out).await.ok()?;
                    return Some(buf);
                }
            }
        }
        write(stream, sh, &out).await.ok()?;
        out.clear();
        // A stopping server shuts the socket's reading side, which ends a waiting read.
        if sh.stopping() {
            return None;
        }
        let n = match idle {
            Some(d) => tokio::time::timeout(d, stream.read_buf(&mut buf))
                .await
                .unwrap_or(Ok(0)),
            None => stream.read_buf(&mut buf).await,
        }
        .ok()?;
        if n == 0 {
            return None;
        }
        sh.counters.bytes_read.fetch_add(n as u64, Relaxed);
    }
}

async fn write<S: AsyncWrite + Unpin>(stream: &mut S, sh: &Shared, out: &[u8]) -> io::Result<()> {
    if out.is_empty() {
        return Ok(());
    }
    stream.write_all(out).await?;
    stream.flush().await?;
    sh.counters
        .bytes_written
        .fetch_add(out.len() as u64, Relaxed);
    Ok(())
}

/// A stream that first yields bytes already read from it (what a client pipelined behind
/// its credentials), then reads on. Writes pass straight through.
#[derive(Debug)]
pub struct Prefixed<S> {
    prefix: BytesMut,
    inner: S,
}

impl<S> Prefixed<S> {
    /// `inner`, with `prefix` to be read first.
    pub fn new(prefix: BytesMut, inner: S) -> Self {
        Prefixed { prefix, inner }
    }

    /// Whether bytes of the prefix are still to be read.
    pub fn has_prefix(&self) -> bool {
        !self.prefix.is_empty()
    }

    /// The rest of the prefix, once.
    pub fn take_prefix(&mut self) -> Option<BytesMut> {
        (!self.prefix.is_empty()).then(|| std::mem::take(&mut self.prefix))
    }

    /// The stream behind the prefix.
    pub fn inner_mut(&mut self) -> &mut S {
        &mut self.inner
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Prefixed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.prefix.is_empty() {
            let n = self.prefix.len().min(buf.remaining());
            buf.put_slice(&self.prefix[..n]);
            self.prefix.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Prefixed<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth() -> Auth {
        Auth {
            path: String::new(),
            file: RwLock::new(Arc::new(
                AuthFile::parse(b"alice:secret\nbob:hunter2\r\n").unwrap(),
            )),
            cmds: AtomicU64::new(0),
            errors: AtomicU64::new(0),
        }
    }

    fn run(input: &[u8]) -> (Vec<u8>, bool, usize) {
        let a = auth();
        let mut buf = BytesMut::from(input);
        let mut p = Phase::default();
        let mut out = Vec::new();
        loop {
            match p.step(&mut buf, &a) {
                Step::More => return (out, false, buf.len()),
                Step::Close => {
                    out.extend_from_slice(b"<close>");
                    return (out, false, buf.len());
                }
                Step::Reply(r) => out.extend_from_slice(r),
                Step::Authed => {
                    out.extend_from_slice(b"STORED\r\n");
                    return (out, true, buf.len());
                }
            }
        }
    }

    #[test]
    fn file_format_is_memcacheds() {
        let f = AuthFile::parse(b"a:b:c\nuser:\r\n:pw").unwrap();
        assert!(f.check(b"a", b"b:c"));
        assert!(f.check(b"user", b""));
        assert!(f.check(b"", b"pw"));
        assert!(!f.check(b"a", b"b"));
        assert!(AuthFile::parse(b"nocolon\n").is_none());
        assert!(AuthFile::parse(b"a:b\n\nc:d\n").is_none(), "blank line");
        assert!(AuthFile::parse(b"").unwrap().is_empty());
    }

    #[test]
    fn replies_match_memcached() {
        assert_eq!(run(b"get foo\r\n").0, b"CLIENT_ERROR unauthenticated\r\n");
        assert_eq!(
            run(b"set k 0 0 12\r\nalice secret\r\n"),
            (b"STORED\r\n".to_vec(), true, 0)
        );
        assert_eq!(
            run(b"set k 0 0 11\r\nalice wrong\r\n").0,
            b"CLIENT_ERROR authentication failure\r\n"
        );
        assert_eq!(
            run(b"set k 0 0 5\r\nalice\r\n").0,
            b"CLIENT_ERROR bad authentication token format\r\n"
        );
        assert_eq!(
            run(b"set k 0 0 12\r\nalice secretXX").0,
            b"CLIENT_ERROR bad command line termination\r\n"
        );
        // Extra tokens and doubled spaces are ignored; a huge size wraps at 32 bits.
        assert!(run(b"set k 0 0 18\r\nalice secret extra\r\n").1);
        assert!(run(b"set  k 0 0 13\r\nalice  secret\r\n").1);
        assert!(run(b"set k 0 0 4294967308\r\nalice secret\r\n").1);
        assert!(run(b"set k 0 0 +12 noreply\nalice secret\r\n").1);
        // Case, missing size, bad size, tabs.
        for bad in [
            &b"SET k 0 0 12\r\n"[..],
            b"set k 0 0\r\n",
            b"set k 0 0 abc\r\n",
            b"set k 0 0 -1\r\n",
            b"\r\n",
        ] {
            assert_eq!(run(bad).0, b"CLIENT_ERROR unauthenticated\r\n", "{bad:?}");
        }
        assert_eq!(
            run(b"set k 0 0 12\r\nalice\tsecret\r\n").0,
            b"CLIENT_ERROR bad authentication token format\r\n"
        );
    }

    #[test]
    fn partial_input_waits_and_junk_closes() {
        assert_eq!(run(b"s"), (Vec::new(), false, 1));
        assert_eq!(run(b"set k 0 0 12\r\nalice"), (Vec::new(), false, 5));
        assert_eq!(run(&[b'x'; 2049]).0, b"<close>");
        assert_eq!(run(b"set k 0 0 100000\r\n").0, b"<close>");
        // Pipelined behind the credentials: left for the request loop.
        let (out, ok, rest) = run(b"set k 0 0 12\r\nalice secret\r\nversion\r\n");
        assert!(ok);
        assert_eq!((out.as_slice(), rest), (&b"STORED\r\n"[..], 9));
    }

    #[test]
    fn counters_count_attempts_and_failures() {
        let a = auth();
        let mut p = Phase::default();
        let mut buf =
            BytesMut::from(&b"set k 0 0 5\r\nbob h\r\nset k 0 0 11\r\nbob hunter2\r\n"[..]);
        assert!(matches!(p.step(&mut buf, &a), Step::Reply(_)));
        assert_eq!(p.step(&mut buf, &a), Step::Authed);
        assert_eq!((a.cmds.load(Relaxed), a.errors.load(Relaxed)), (2, 1));
    }
}
