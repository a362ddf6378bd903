//! Command lines and tokens, as memcached's `try_read_command_ascii` and `tokenize_command`
//! see them.
//!
//! Wire format: a command line ends at the first `\n`; one `\r` right before it is dropped.
//! A NUL byte ends the line early (memcached runs `strlen` over it), tokens are separated by
//! runs of spaces only (a tab is part of a token), and at most [`MAX_TOKENS`]` - 1` tokens are
//! split off: the remainder stays unsplit, which is what makes a 30-token `set` an `ERROR`
//! while a multi-get goes on splitting keys.

/// memcached's `MAX_TOKENS`: 23 real tokens plus the terminal one.
pub const MAX_TOKENS: usize = 24;

/// Where the next command line is in a buffer.
pub(crate) struct Line<'a> {
    /// The line without its terminator, cut at the first NUL.
    pub text: &'a [u8],
    /// Bytes up to and including the `\n`.
    pub consumed: usize,
}

/// Finds the first complete line of `buf`.
pub(crate) fn find_line(buf: &[u8]) -> Option<Line<'_>> {
    let nl = memchr::memchr(b'\n', buf)?;
    let mut end = nl;
    if end > 1 && buf[end - 1] == b'\r' {
        end -= 1;
    }
    let mut text = &buf[..end];
    if let Some(nul) = memchr::memchr(0, text) {
        text = &text[..nul];
    }
    Some(Line {
        text,
        consumed: nl + 1,
    })
}

/// The tokens of one line, split the way `tokenize_command` splits them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tokens<'a> {
    toks: [&'a [u8]; MAX_TOKENS],
    /// Number of real tokens (at most `MAX_TOKENS - 1`); the unsplit remainder is reached
    /// through the line itself (see `Words`).
    n: usize,
}

impl<'a> Tokens<'a> {
    pub fn split(line: &'a [u8]) -> Self {
        let mut toks: [&'a [u8]; MAX_TOKENS] = [&[]; MAX_TOKENS];
        let mut n = 0;
        let mut i = 0;
        while i < line.len() {
            if line[i] == b' ' {
                i += 1;
                continue;
            }
            let start = i;
            i = memchr::memchr(b' ', &line[i..]).map_or(line.len(), |e| i + e);
            toks[n] = &line[start..i];
            n += 1;
            if n == MAX_TOKENS - 1 {
                // memcached stops here and leaves the rest of the line unsplit.
                return Tokens { toks, n };
            }
        }
        Tokens { toks, n }
    }

    /// memcached's `ntokens`: the real tokens plus the terminal token.
    pub fn ntokens(&self) -> usize {
        self.n + 1
    }

    /// Token `i`, empty when absent (memcached's terminal token has length 0).
    pub fn get(&self, i: usize) -> &'a [u8] {
        if i < self.n { self.toks[i] } else { &[] }
    }

    /// The real tokens.
    pub fn all(&self) -> &[&'a [u8]] {
        &self.toks[..self.n]
    }

    /// `set_noreply_maybe`: the last real token is exactly `noreply`.
    pub fn noreply(&self) -> bool {
        self.n > 0 && self.toks[self.n - 1] == b"noreply"
    }
}

/// A run of space-separated words borrowed from the request line: the keys of a multi-get or
/// the arguments of `stats`. Compared and iterated word by word, so that `a  b` and `a b` are
/// the same list; encoding writes single spaces.
#[derive(Clone, Copy, Default)]
pub struct Words<'a> {
    raw: &'a [u8],
    /// Known to be one word (the tokenizer-free `get`, which checked): iterated without
    /// scanning it for spaces again.
    one: bool,
}

impl<'a> Words<'a> {
    /// Words over `raw` (split on spaces).
    pub const fn new(raw: &'a [u8]) -> Self {
        Words { raw, one: false }
    }

    /// `word`, which the caller checked is not empty and holds no space.
    pub(crate) const fn one(word: &'a [u8]) -> Self {
        Words {
            raw: word,
            one: true,
        }
    }

    /// Iterates over the words.
    pub fn iter(&self) -> WordsIter<'a> {
        WordsIter {
            rest: self.raw,
            one: self.one,
        }
    }

    /// Number of words.
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// Whether there are no words.
    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }

    /// The raw span, as received.
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }
}

/// The words of a [`Words`], in order.
#[derive(Debug, Clone)]
pub struct WordsIter<'a> {
    rest: &'a [u8],
    one: bool,
}

impl<'a> Iterator for WordsIter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let rest = std::mem::take(&mut self.rest);
        if std::mem::take(&mut self.one) {
            return Some(rest);
        }
        let start = rest.iter().position(|&b| b != b' ')?;
        let rest = &rest[start..];
        let end = memchr::memchr(b' ', rest).unwrap_or(rest.len());
        let (word, tail) = rest.split_at(end);
        self.rest = tail;
        Some(word)
    }
}

impl PartialEq for Words<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}
impl Eq for Words<'_> {}

impl std::fmt::Debug for Words<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.iter().map(|w| String::from_utf8_lossy(w)))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines() {
        let l = find_line(b"get a\r\nrest").unwrap();
        assert_eq!((l.text, l.consumed), (&b"get a"[..], 7));
        let l = find_line(b"get a\n").unwrap();
        assert_eq!(l.text, b"get a");
        let l = find_line(b"get a\0junk\r\n").unwrap();
        assert_eq!(l.text, b"get a");
        let l = find_line(b"\r\n").unwrap();
        assert_eq!(
            l.text, b"\r",
            "a lone CR is kept: memcached needs el - rcurr > 1"
        );
        assert!(find_line(b"get a\r").is_none());
    }

    #[test]
    fn token_cap() {
        let line: Vec<u8> = (0..30)
            .flat_map(|i| format!("t{i} ").into_bytes())
            .collect();
        let t = Tokens::split(&line);
        assert_eq!(t.ntokens(), MAX_TOKENS);
        assert_eq!(t.get(22), b"t22");
        let t = Tokens::split(b"  set  k ");
        assert_eq!(t.all(), &[&b"set"[..], b"k"]);
    }
}
