//! `-l`: memcached's listener list. Items are separated by `,` or `;`; each is
//! `[notls:][proto[NAME]:][tag[NAME]:]HOST[:PORT]`, where HOST is a name, an IPv4 address,
//! `[IPv6]`, a bare IPv6 address (then with no port), or `*` for every interface.

use super::Protocol;

/// One listening address as `-l` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenSpec {
    /// `None`: every interface (`*`).
    pub host: Option<String>,
    pub port: u16,
    /// `false` for a `notls:` listener when `-Z` is on.
    pub tls: bool,
    /// `proto[...]`: the protocol this listener speaks, when it differs from `-B`.
    pub protocol: Option<Protocol>,
}

/// Parses `inter` (every `-l`, joined by commas). `Err` is memcached's message for the item
/// it refuses (it then fails to listen: exit 71).
pub fn parse(inter: &str, port: u16, ssl: bool) -> Result<Vec<ListenSpec>, String> {
    let mut out = Vec::new();
    for item in inter.split([',', ';']).filter(|p| !p.is_empty()) {
        let mut p = item;
        let mut tls = ssl;
        if let Some(rest) = p.strip_prefix("notls") {
            if !ssl {
                return Err("'notls' option is valid only when SSL is enabled".into());
            }
            tls = false;
            p = rest.get(1..).unwrap_or("");
        }
        let mut protocol = None;
        if let Some(rest) = p.strip_prefix("proto") {
            let (name, rest) =
                bracketed(rest).ok_or_else(|| format!("Invalid protocol spec: \"{rest}\""))?;
            protocol = match name {
                "ascii" => Some(Protocol::Ascii),
                "binary" => Some(Protocol::Binary),
                "negotiating" => Some(Protocol::Auto),
                "proxy" => return Err(format!("Server not built with proxy: \"{inter}\"")),
                _ => None,
            };
            p = rest;
        }
        if let Some(rest) = p.strip_prefix("tag") {
            let (name, rest) = bracketed(rest)
                .ok_or_else(|| format!("Invalid tag in socket config: \"{rest}\""))?;
            if name.is_empty() || name.len() > 8 {
                return Err(format!(
                    "Listener tags must be between 1 and 8 characters: \"{name}\""
                ));
            }
            p = rest;
        }
        let mut host: Option<&str> = None;
        if let Some(rest) = p.strip_prefix('[') {
            let end = rest
                .find(']')
                .ok_or_else(|| format!("Invalid IPV6 address: \"{p}\""))?;
            host = Some(&rest[..end]);
            p = &rest[end + 1..];
        }
        let mut the_port = i64::from(port);
        if let Some(colon) = p.find(':') {
            // One colon is a port; more, with no bracketed host, is a bare IPv6 address.
            if !p[colon + 1..].contains(':') || host.is_some() {
                let s = &p[colon + 1..];
                the_port = s
                    .trim()
                    .parse()
                    .map_err(|_| format!("Invalid port number: \"{s}\""))?;
                p = &p[..colon];
            }
        }
        let name = host.unwrap_or(p);
        let port = u16::try_from(the_port)
            .map_err(|_| "getaddrinfo(): Servname not supported for ai_socktype".to_string())?;
        out.push(ListenSpec {
            host: (name != "*").then(|| name.to_string()),
            port,
            tls,
            protocol,
        });
    }
    Ok(out)
}

/// `[NAME]:rest` → `(NAME, rest)` (memcached skips one character after the `]`).
fn bracketed(s: &str) -> Option<(&str, &str)> {
    let rest = s.strip_prefix('[')?;
    let end = rest.find(']')?;
    Some((&rest[..end], rest.get(end + 2..).unwrap_or("")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(host: Option<&str>, port: u16) -> ListenSpec {
        ListenSpec {
            host: host.map(String::from),
            port,
            tls: false,
            protocol: None,
        }
    }

    #[test]
    fn memcached_listen_syntax() {
        assert_eq!(
            parse("127.0.0.1,::1;[::1]:11300,*:5,localhost", 11211, false).unwrap(),
            vec![
                spec(Some("127.0.0.1"), 11211),
                spec(Some("::1"), 11211),
                spec(Some("::1"), 11300),
                spec(None, 5),
                spec(Some("localhost"), 11211),
            ]
        );
        assert_eq!(
            parse("127.0.0.1:x", 1, false).unwrap_err(),
            "Invalid port number: \"x\""
        );
        assert_eq!(
            parse("notls:127.0.0.1", 1, false).unwrap_err(),
            "'notls' option is valid only when SSL is enabled"
        );
        let l = parse("notls:127.0.0.1:7,proto[ascii]:tag[a]:127.0.0.1", 1, true).unwrap();
        assert!(!l[0].tls && l[0].port == 7);
        assert!(l[1].tls && l[1].protocol == Some(Protocol::Ascii));
        assert!(
            parse("[::1", 1, false)
                .unwrap_err()
                .starts_with("Invalid IPV6 address")
        );
    }
}
