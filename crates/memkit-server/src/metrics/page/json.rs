//! A JSON writer for the page's small documents: objects, arrays, numbers and strings
//! appended to one `String`, commas placed by the writer.

use std::fmt::Write;

/// A JSON document being written.
#[derive(Debug, Default)]
pub struct Json {
    out: String,
    /// Whether the next value needs a comma before it.
    comma: bool,
}

impl Json {
    /// An empty document.
    pub fn new() -> Json {
        Json::default()
    }

    /// The text written.
    pub fn finish(self) -> String {
        self.out
    }

    fn sep(&mut self) {
        if self.comma {
            self.out.push(',');
        }
        self.comma = true;
    }

    /// `"name":`, before a value inside an object.
    pub fn key(&mut self, name: &str) -> &mut Json {
        self.sep();
        string(&mut self.out, name);
        self.out.push(':');
        self.comma = false;
        self
    }

    /// Opens an object.
    pub fn open(&mut self) -> &mut Json {
        self.sep();
        self.out.push('{');
        self.comma = false;
        self
    }

    /// Closes an object.
    pub fn close(&mut self) -> &mut Json {
        self.out.push('}');
        self.comma = true;
        self
    }

    /// Opens an array.
    pub fn open_array(&mut self) -> &mut Json {
        self.sep();
        self.out.push('[');
        self.comma = false;
        self
    }

    /// Closes an array.
    pub fn close_array(&mut self) -> &mut Json {
        self.out.push(']');
        self.comma = true;
        self
    }

    /// An unsigned integer.
    pub fn u(&mut self, v: u64) -> &mut Json {
        self.sep();
        let _ = write!(self.out, "{v}");
        self
    }

    /// A signed integer.
    pub fn i(&mut self, v: i64) -> &mut Json {
        self.sep();
        let _ = write!(self.out, "{v}");
        self
    }

    /// A number; `null` when it is not finite (or `None`).
    pub fn f(&mut self, v: Option<f64>) -> &mut Json {
        self.sep();
        match v.filter(|v| v.is_finite()) {
            Some(v) => {
                let _ = write!(self.out, "{v}");
            }
            None => self.out.push_str("null"),
        }
        self
    }

    /// A boolean.
    pub fn b(&mut self, v: bool) -> &mut Json {
        self.sep();
        self.out.push_str(if v { "true" } else { "false" });
        self
    }

    /// A string.
    pub fn s(&mut self, v: &str) -> &mut Json {
        self.sep();
        string(&mut self.out, v);
        self
    }

    /// `"name": n` in an object.
    pub fn field_u(&mut self, name: &str, v: u64) -> &mut Json {
        self.key(name).u(v)
    }

    /// `"name": "v"` in an object.
    pub fn field_s(&mut self, name: &str, v: &str) -> &mut Json {
        self.key(name).s(v)
    }
}

/// `v` as a JSON string. Every character below U+0020 and `<`, `>`, `&` are escaped, so a
/// key holding markup stays text wherever the page puts it.
fn string(out: &mut String, v: &str) {
    out.push('"');
    for c in v.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 || matches!(c, '<' | '>' | '&' | '\u{2028}' | '\u{2029}') => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_nested_documents_with_escapes() {
        let mut j = Json::new();
        j.open().field_u("a", 1).key("b").open_array();
        j.s("x\"<y>\n").f(Some(0.5)).f(Some(f64::NAN)).i(-3).b(true);
        j.close_array().key("c").open().close().close();
        assert_eq!(
            j.finish(),
            r#"{"a":1,"b":["x\"\u003cy\u003e\u000a",0.5,null,-3,true],"c":{}}"#
        );
    }
}
