//! ASCII authentication's unauthenticated phase (`-Y FILE`), as memcached 1.6 runs it: a
//! connection's state until its first successful login.
//!
//! The first command must be `set <any key> <flags> <exptime> <bytes>` whose data block is
//! `username password`. The key, flags and exptime are ignored and nothing is stored. Until
//! it succeeds, every command line gets `CLIENT_ERROR unauthenticated`; a wrong password
//! gets `CLIENT_ERROR authentication failure` and the connection stays open, still
//! unauthenticated, so the client may try again. These rules and replies are memcached
//! 1.6.18's `try_read_command_asciiauth`, byte for byte, compared side by side in tests.
//!
//! One deliberate difference: memcached 1.6.18 answers only the last of several
//! unauthenticated commands that arrive in one read (each reply overwrites the previous
//! one); memkitd answers every command, so a pipelining client never loses count.

use bytes::BytesMut;

use crate::auth::Auth;

/// memcached closes a connection whose first line has no newline within 2048 bytes.
const MAX_LINE: usize = 2048;
/// The largest credentials block accepted. memcached reads it into its 16 KiB read buffer
/// and drops the connection when it does not fit; memkitd closes as soon as it is announced.
const MAX_DATA: u64 = 16 * 1024;

/// What the bytes read so far lead to.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Step {
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
pub(super) struct Phase {
    data: Option<usize>,
}

impl Phase {
    /// Consumes at most one command from `buf`.
    pub(super) fn step(&mut self, buf: &mut BytesMut, auth: &Auth) -> Step {
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering::Relaxed;

    use crate::auth::AuthFile;

    use super::*;

    fn auth() -> Auth {
        Auth::from_file(AuthFile::parse(b"alice:secret\nbob:hunter2\r\n").unwrap())
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
