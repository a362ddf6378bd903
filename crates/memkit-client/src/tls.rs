//! TLS to memcached `-Z` / memkitd `-Z`: a [`Connector`] over rustls (ring provider).
//!
//! ```no_run
//! # fn main() -> memkit_types::Result<()> {
//! use memkit_client::{ClientConfig, TlsOptions};
//! let tls = TlsOptions::new()
//!     .ca_pem_file("/etc/memkit/ca.pem")                        // whom to trust
//!     .client_cert_pem_files("/etc/memkit/app.pem", "/etc/memkit/app.key") // if required
//!     .server_name("cache.internal")                            // else the configured host
//!     .connector()?;
//! let config = ClientConfig::default().with_tls(tls);
//! # Ok(()) }
//! ```
//!
//! The certificate is checked against the CA roots given (no system store: a cache's
//! certificates normally come from a private CA) and against the server name: the one set
//! with [`TlsOptions::server_name`], or else the host of the [`ServerSpec`] (a DNS name, or
//! an IP address, which the certificate must then list as an IP SAN). A failed handshake
//! is an I/O error of the connect, like a refused connection.

use std::fmt;
use std::io;
use std::sync::Arc;

use memkit_types::{Error, Result};
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use crate::conn::{BoxFuture, Connector, Stream};
use crate::distribution::ServerSpec;

/// Opens TLS connections with one rustls configuration.
#[derive(Clone)]
pub struct TlsConnector {
    config: Arc<rustls::ClientConfig>,
    server_name: Option<ServerName<'static>>,
}

impl fmt::Debug for TlsConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConnector")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl TlsConnector {
    /// TLS with a ready rustls configuration (its roots, client certificate, versions).
    /// The name checked is each server's host unless [`TlsConnector::server_name`] says.
    pub fn new(config: Arc<rustls::ClientConfig>) -> TlsConnector {
        TlsConnector {
            config,
            server_name: None,
        }
    }

    /// Checks every server's certificate against `name` instead of its host (e.g. servers
    /// configured by IP that present a certificate for a DNS name).
    pub fn server_name(mut self, name: &str) -> Result<TlsConnector> {
        let n = ServerName::try_from(name.to_string())
            .map_err(|e| Error::Protocol(format!("bad TLS server name {name:?}: {e}")))?;
        self.server_name = Some(n);
        Ok(self)
    }
}

impl Connector for TlsConnector {
    fn connect<'a>(&'a self, server: &'a ServerSpec) -> BoxFuture<'a, io::Result<Box<dyn Stream>>> {
        Box::pin(async move {
            let name = match &self.server_name {
                Some(n) => n.clone(),
                None => ServerName::try_from(server.host.clone())
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?,
            };
            let tcp = tokio::net::TcpStream::connect((server.host.as_str(), server.port)).await?;
            tcp.set_nodelay(true)?;
            let s = tokio_rustls::TlsConnector::from(self.config.clone())
                .connect(name, tcp)
                .await?;
            Ok(Box::new(s) as Box<dyn Stream>)
        })
    }
}

/// Builds a [`TlsConnector`] from PEM files or text.
#[derive(Default)]
pub struct TlsOptions {
    roots: Vec<Source>,
    client: Option<(Source, Source)>,
    server_name: Option<String>,
    insecure: bool,
}

enum Source {
    File(String),
    Pem(Vec<u8>),
}

impl fmt::Debug for TlsOptions {
    // Sources only by kind: PEM text may be a private key.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsOptions")
            .field("roots", &self.roots.len())
            .field("client_cert", &self.client.is_some())
            .field("server_name", &self.server_name)
            .field("insecure", &self.insecure)
            .finish()
    }
}

impl TlsOptions {
    /// No roots yet: add at least one CA.
    pub fn new() -> TlsOptions {
        TlsOptions::default()
    }

    /// Trusts the CA certificates in this PEM file.
    pub fn ca_pem_file(mut self, path: impl Into<String>) -> Self {
        self.roots.push(Source::File(path.into()));
        self
    }

    /// Trusts the CA certificates in this PEM text.
    pub fn ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.roots.push(Source::Pem(pem.into()));
        self
    }

    /// Presents this client certificate chain and key (PEM files), for servers started with
    /// `ssl_verify_mode` 1-3.
    pub fn client_cert_pem_files(
        mut self,
        cert: impl Into<String>,
        key: impl Into<String>,
    ) -> Self {
        self.client = Some((Source::File(cert.into()), Source::File(key.into())));
        self
    }

    /// Presents this client certificate chain and key (PEM text).
    pub fn client_cert_pem(mut self, cert: impl Into<Vec<u8>>, key: impl Into<Vec<u8>>) -> Self {
        self.client = Some((Source::Pem(cert.into()), Source::Pem(key.into())));
        self
    }

    /// The name server certificates must carry (default: each server's host).
    pub fn server_name(mut self, name: impl Into<String>) -> Self {
        self.server_name = Some(name.into());
        self
    }

    /// **For tests only**: accepts any server certificate (the handshake signature is still
    /// checked, the chain and the name are not), so anyone in the path can read and change
    /// the traffic. `memkit --tls-insecure`.
    pub fn danger_accept_any_server_certificate(mut self) -> Self {
        self.insecure = true;
        self
    }

    /// The rustls configuration (TLS 1.2 and 1.3, ring).
    pub fn client_config(&self) -> Result<Arc<rustls::ClientConfig>> {
        let bad = |what: &str, e: &dyn fmt::Display| Error::Protocol(format!("TLS {what}: {e}"));
        let mut roots = RootCertStore::empty();
        for src in &self.roots {
            for c in certs(src).map_err(|e| bad("CA certificates", &e))? {
                roots.add(c).map_err(|e| bad("CA certificate", &e))?;
            }
        }
        if roots.is_empty() && !self.insecure {
            return Err(Error::Protocol("TLS: no CA certificate to trust".into()));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let b = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| bad("versions", &e))?;
        let b = if self.insecure {
            b.dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
        } else {
            b.with_root_certificates(roots)
        };
        let config = match &self.client {
            None => b.with_no_client_auth(),
            Some((cert, key)) => {
                let chain = certs(cert).map_err(|e| bad("client certificate", &e))?;
                let key = match key {
                    Source::File(p) => PrivateKeyDer::from_pem_file(p),
                    Source::Pem(t) => PrivateKeyDer::from_pem_slice(t),
                }
                .map_err(|e| bad("client key", &e))?;
                let mut c = b
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| bad("client certificate", &e))?;
                // memcached 1.6 with ssl_verify_mode >= 1 sets no session id context, so
                // OpenSSL answers a resumed session with an internal_error alert: every
                // connection after the first would fail. A full handshake per connection
                // costs little next to a pool's lifetime.
                c.resumption = rustls::client::Resumption::disabled();
                c
            }
        };
        Ok(Arc::new(config))
    }

    /// The connector, for [`crate::ClientConfig::with_tls`].
    pub fn connector(&self) -> Result<TlsConnector> {
        let c = TlsConnector::new(self.client_config()?);
        match &self.server_name {
            Some(n) => c.server_name(n),
            None => Ok(c),
        }
    }
}

/// The verifier of [`TlsOptions::danger_accept_any_server_certificate`].
#[derive(Debug)]
struct AnyCert(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls_pki_types::UnixTime,
    ) -> std::result::Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> std::result::Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> std::result::Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

fn certs(src: &Source) -> std::result::Result<Vec<CertificateDer<'static>>, String> {
    let v: std::result::Result<Vec<_>, _> = match src {
        Source::File(p) => CertificateDer::pem_file_iter(p)
            .map_err(|e| format!("{p}: {e}"))?
            .collect(),
        Source::Pem(t) => CertificateDer::pem_slice_iter(t).collect(),
    };
    let v = v.map_err(|e| e.to_string())?;
    if v.is_empty() {
        return Err("no certificate found".into());
    }
    Ok(v)
}
