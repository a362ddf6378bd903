//! JSON output through serde: ordered objects of stat/metadump fields, and stat values typed
//! as JSON numbers when they are numbers.

use serde::Serialize;
use serde::ser::SerializeMap;
use serde_json::{Number, Value};

/// A JSON object whose members keep the given order (stats and metadump fields read best
/// in the server's order).
#[derive(Debug, Clone, PartialEq)]
pub struct Object<V = Value>(pub Vec<(String, V)>);

impl<V> Default for Object<V> {
    fn default() -> Self {
        Object(Vec::new())
    }
}

impl<V> Object<V> {
    /// Adds a member.
    pub fn push(&mut self, name: impl Into<String>, value: impl Into<V>) {
        self.0.push((name.into(), value.into()));
    }
}

impl<V: Serialize> Serialize for Object<V> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// A stat value: a JSON number when it reads as one (`12`, `-3`, `0.500000`), else the
/// string (`1.6.18`, `007`, `yes`).
pub fn value(v: &str) -> Value {
    let t = v.trim();
    let leading_zero = t.len() > 1 && t.starts_with('0') && !t.starts_with("0.");
    let plain = !t.is_empty()
        && t.bytes()
            .all(|b| b.is_ascii_digit() || b == b'.' || b == b'-')
        && !t.starts_with('.')
        && !t.ends_with('.')
        && !leading_zero
        && !t.starts_with("-0")
        && t.matches('-').count() <= 1
        && !t[1..].contains('-')
        && t.matches('.').count() <= 1;
    if plain {
        if let Ok(n) = t.parse::<u64>() {
            return Value::Number(n.into());
        }
        if let Ok(n) = t.parse::<i64>() {
            return Value::Number(n.into());
        }
        if let Some(n) = t.parse::<f64>().ok().and_then(Number::from_f64) {
            return Value::Number(n);
        }
    }
    Value::String(v.to_owned())
}

/// `t` as one line of JSON.
pub fn line<T: Serialize>(t: &T) -> String {
    serde_json::to_string(t).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// Standard base64 with padding (RFC 4648), for values that are not UTF-8.
pub fn base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_values() {
        assert_eq!(value("12"), Value::from(12u64));
        assert_eq!(value("-3"), Value::from(-3i64));
        assert_eq!(value("0.500000"), Value::from(0.5));
        assert_eq!(value("0"), Value::from(0u64));
        for s in ["007", "1.6.18", "tokio", "", "-", "1-2", "-0", ".5"] {
            assert_eq!(value(s), Value::String(s.into()), "{s:?}");
        }
    }

    #[test]
    fn objects_keep_order_and_escape() {
        let mut o: Object = Object::default();
        o.push("z", "a\"b\n");
        o.push("a", 1u64);
        assert_eq!(line(&o), r#"{"z":"a\"b\n","a":1}"#);
    }

    #[test]
    fn base64_of_rfc4648_vectors() {
        for (i, o) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(i.as_bytes()), o);
        }
    }
}
