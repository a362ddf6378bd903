//! The little terminal handling `memkit top` needs, on termios directly: raw mode, the
//! alternate screen, the window size. A full TUI framework would bring a dozen crates for
//! what is here one screen of text redrawn once a second.

use std::io::{self, Write};

/// Whether stdin and stdout are both terminals.
pub fn interactive() -> bool {
    // SAFETY: isatty only inspects the descriptor.
    unsafe { libc::isatty(0) == 1 && libc::isatty(1) == 1 }
}

/// The terminal's size (columns, rows), from stdout; `None` if it is not a terminal.
pub fn size() -> Option<(u16, u16)> {
    // SAFETY: a winsize is integers only: all zeroes is a valid value.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ writes a `winsize` into the struct we pass.
    let r = unsafe { libc::ioctl(1, libc::TIOCGWINSZ, &mut ws) };
    (r == 0 && ws.ws_col > 0 && ws.ws_row > 0).then_some((ws.ws_col, ws.ws_row))
}

/// Raw mode and the alternate screen while alive; restores both when dropped (also when
/// unwinding from a panic).
#[derive(Debug)]
pub struct Screen {
    orig: libc::termios,
}

impl Screen {
    /// Enters raw mode (no echo, no line buffering, no signal keys: Ctrl-C arrives as a
    /// byte) and the alternate screen, and hides the cursor.
    pub fn enter() -> io::Result<Screen> {
        // SAFETY: tcgetattr fills the termios we pass; cfmakeraw and tcsetattr read it.
        let orig = unsafe {
            let mut t: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(0, &mut t) != 0 {
                return Err(io::Error::last_os_error());
            }
            let orig = t;
            libc::cfmakeraw(&mut t);
            t.c_cc[libc::VMIN] = 1;
            t.c_cc[libc::VTIME] = 0;
            if libc::tcsetattr(0, libc::TCSANOW, &t) != 0 {
                return Err(io::Error::last_os_error());
            }
            orig
        };
        let mut out = io::stdout().lock();
        out.write_all(b"\x1b[?1049h\x1b[?25l\x1b[2J")?;
        out.flush()?;
        Ok(Screen { orig })
    }

    /// Draws `lines` from the top-left corner, clearing what is left of each line and of
    /// the screen, in one write.
    pub fn draw(&self, lines: &[String]) -> io::Result<()> {
        let mut buf = Vec::with_capacity(8192);
        buf.extend_from_slice(b"\x1b[H");
        for (i, l) in lines.iter().enumerate() {
            if i > 0 {
                buf.extend_from_slice(b"\r\n");
            }
            buf.extend_from_slice(l.as_bytes());
            buf.extend_from_slice(b"\x1b[K");
        }
        buf.extend_from_slice(b"\x1b[J");
        let mut out = io::stdout().lock();
        out.write_all(&buf)?;
        out.flush()
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let mut out = io::stdout().lock();
        let _ = out.write_all(b"\x1b[0m\x1b[?25h\x1b[?1049l");
        let _ = out.flush();
        // SAFETY: restores the attributes read in `enter`.
        unsafe {
            libc::tcsetattr(0, libc::TCSANOW, &self.orig);
        }
    }
}

/// A key `memkit top` acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// q, Q, Ctrl-C, Ctrl-D, Esc alone.
    Quit,
    /// Tab, right arrow, `l`, `n`.
    Next,
    /// Shift-Tab, left arrow, `h`, `p`.
    Prev,
    /// `r` or Ctrl-L: redraw now.
    Redraw,
}

/// The keys in a chunk of terminal input.
pub fn keys(bytes: &[u8]) -> Vec<Key> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == 0x1b {
            match (bytes.get(i + 1), bytes.get(i + 2)) {
                (Some(b'['), Some(b'Z')) => out.push(Key::Prev),
                (Some(b'['), Some(b'C')) => out.push(Key::Next),
                (Some(b'['), Some(b'D')) => out.push(Key::Prev),
                (None, _) => out.push(Key::Quit),
                _ => {}
            }
            i += if bytes.get(i + 1) == Some(&b'[') {
                3
            } else {
                1
            };
            continue;
        }
        match b {
            b'q' | b'Q' | 3 | 4 => out.push(Key::Quit),
            b'\t' | b'l' | b'n' => out.push(Key::Next),
            b'h' | b'p' => out.push(Key::Prev),
            b'r' | 12 => out.push(Key::Redraw),
            _ => {}
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_parsing() {
        assert_eq!(keys(b"\t"), [Key::Next]);
        assert_eq!(keys(b"\x1b[Zq"), [Key::Prev, Key::Quit]);
        assert_eq!(keys(b"\x1b[C\x1b[D"), [Key::Next, Key::Prev]);
        assert_eq!(keys(b"\x1b"), [Key::Quit]);
        assert_eq!(keys(b"x\x03"), [Key::Quit]);
    }
}
