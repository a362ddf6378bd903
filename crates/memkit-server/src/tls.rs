//! TLS (`-Z`, `-o ssl_chain_cert=...,ssl_key=...,ssl_ca_cert=...,ssl_verify_mode=N`), on
//! rustls with the ring provider.
//!
//! memcached's options keep their meaning: `ssl_chain_cert` is the server's PEM chain,
//! `ssl_key` its PEM key (default: looked for in the chain file), `ssl_ca_cert` the CAs
//! client certificates are checked against, `ssl_verify_mode` 0 (no client certificate),
//! 1 (request one, verify it if sent), 2 (require one), 3 (require once: the same as 2,
//! rustls never renegotiates), `ssl_min_version` 2 (TLS 1.2) or 3 (TLS 1.3). Differences,
//! all refusals at start-up rather than surprises later: verify modes 1-3 need
//! `ssl_ca_cert` (OpenSSL would fall back to its system store), keys are PEM only, and
//! TLS 1.0/1.1 are not offered.
//!
//! A replicated node (`--raft-*`) speaks TLS to its peers too ([`peer_tls`]): the same
//! certificate, key and CA, client certificates always required whatever
//! `ssl_verify_mode` says (so `ssl_ca_cert` is required), TLS 1.3 only
//! (`memkit_raft::tls`).
//!
//! The handshake runs in the connection's own task under a deadline ([`crate::task`]), so a
//! client that opens a socket and never speaks holds one connection slot for
//! [`HANDSHAKE_TIMEOUT`], not forever, and never blocks the accept loop.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::config::SslSettings;

/// How long a client has to complete the TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The server's TLS state.
pub struct Tls {
    acceptor: tokio_rustls::TlsAcceptor,
    /// Handshakes that failed or timed out (`stats`: `ssl_handshake_errors`).
    pub handshake_errors: AtomicU64,
    /// When the certificates were loaded (`time_since_server_cert_refresh`).
    pub loaded: Instant,
}

// Not derived: the acceptor holds the private key, which has no business in a debug dump.
impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("handshake_errors", &self.handshake_errors)
            .finish_non_exhaustive()
    }
}

impl Tls {
    /// The acceptor that runs the handshake.
    pub fn acceptor(&self) -> &tokio_rustls::TlsAcceptor {
        &self.acceptor
    }

    /// Loads the certificates `ssl` names; the error is memcached's message.
    pub fn load(ssl: &SslSettings) -> Result<Tls, String> {
        Ok(Tls {
            acceptor: tokio_rustls::TlsAcceptor::from(server_config(ssl)?),
            handshake_errors: AtomicU64::new(0),
            loaded: Instant::now(),
        })
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The certificates of a PEM file.
pub fn load_certs(path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| e.to_string())?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    if certs.is_empty() {
        return Err("no certificate in the file".into());
    }
    Ok(certs)
}

/// The server's certificate chain and key, as `ssl` names them.
fn load_identity(
    ssl: &SslSettings,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let chain_path = ssl.chain_cert.as_deref().unwrap_or("(null)");
    let chain = load_certs(chain_path)
        .map_err(|e| format!("Error loading the certificate chain: {chain_path} : {e}"))?;
    let key_path = ssl.key.as_deref().unwrap_or(chain_path);
    let key = PrivateKeyDer::from_pem_file(key_path)
        .map_err(|e| format!("Error loading the key: {key_path} : {e}"))?;
    Ok((chain, key))
}

/// The CA certificates of `path`.
fn load_ca(path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    load_certs(path).map_err(|e| format!("Error loading the CA certificate: {path} : {e}"))
}

/// The rustls server configuration for `ssl`.
pub fn server_config(ssl: &SslSettings) -> Result<Arc<ServerConfig>, String> {
    let (chain, key) = load_identity(ssl)?;
    let ca = match &ssl.ca_cert {
        Some(path) => {
            let mut roots = RootCertStore::empty();
            for c in load_ca(path)? {
                roots
                    .add(c)
                    .map_err(|e| format!("Error loading the CA certificate: {path} : {e}"))?;
            }
            Some(Arc::new(roots))
        }
        None => None,
    };
    let versions: &[&rustls::SupportedProtocolVersion] = if ssl.min_version >= 3 {
        &[&rustls::version::TLS13]
    } else {
        &[&rustls::version::TLS13, &rustls::version::TLS12]
    };
    let builder = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(versions)
        .map_err(|e| format!("Error setting up TLS: {e}"))?;
    let builder = match (ssl.verify_mode, ca) {
        (0, _) => builder.with_no_client_auth(),
        (mode, Some(roots)) => {
            let v = WebPkiClientVerifier::builder_with_provider(roots, provider());
            let v = if mode == 1 {
                v.allow_unauthenticated()
            } else {
                v
            };
            builder.with_client_cert_verifier(
                v.build()
                    .map_err(|e| format!("Error setting up client verification: {e}"))?,
            )
        }
        (mode, None) => {
            return Err(format!(
                "ssl_verify_mode={mode} needs ssl_ca_cert: the CAs client certificates are \
                 checked against"
            ));
        }
    };
    let config = builder
        .with_single_cert(chain, key)
        .map_err(|e| format!("Error validating the certificate: {e}"))?;
    Ok(Arc::new(config))
}

/// The peer protocol's TLS for a replicated node: `ssl`'s certificate and key, presented
/// both as server and as client, peers' certificates checked against `ssl_ca_cert`.
pub fn peer_tls(ssl: &SslSettings) -> Result<memkit_raft::PeerTls, String> {
    let (chain, key) = load_identity(ssl)?;
    let Some(ca_path) = &ssl.ca_cert else {
        return Err(PEER_CA_REQUIRED.into());
    };
    memkit_raft::PeerTls::new(chain, key, load_ca(ca_path)?)
        .map_err(|e| format!("Error setting up TLS for the raft peers: {e}"))
}

/// Why `-Z` with `--raft-node` needs `ssl_ca_cert`.
pub const PEER_CA_REQUIRED: &str = "ERROR: -Z with --raft-node needs ssl_ca_cert: the raft \
     peers present certificates to each other and check them against it";
