//! [`PeerTls`]: the peer protocol over TLS 1.3 with mutual certificates (rustls, ring).
//!
//! Both ends present a certificate and check the other's chain against the group's CA:
//! the server refuses a peer without one or with one from another CA during the
//! handshake, before a frame is read; the client refuses a server the CA did not sign.
//!
//! Host names are not checked, on purpose: a node dials a peer at whatever address its own
//! list gives (an IP, a relay, a NAT), and a name in a certificate would say nothing about
//! which node id answers anyway. What the certificate proves is that the peer holds a key
//! the group's CA signed; the server's id check (`server.rs`) then admits only the group's
//! members. So any holder of a certificate from that CA can speak the peer protocol under a
//! member's id: give the peers a CA of their own, or one no untrusted party gets certificates
//! from. A certificate used both ways needs both extended key usages (serverAuth and
//! clientAuth), or none.
//!
//! TLS 1.3 only: both ends are memkit, so there is no older peer to accommodate.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{WebPkiServerVerifier, verify_server_cert_signed_by_trust_anchor};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::{ParsedCertificate, WebPkiClientVerifier};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};

/// The name a node sends as SNI. Never checked (see the module's docs); a fixed one rather
/// than the peer's host, which may be an address no certificate names.
pub const PEER_SERVER_NAME: &str = "memkit-peer";

/// A node's TLS for the peer protocol: what its server accepts and what its client dials.
#[derive(Clone)]
pub struct PeerTls {
    /// The server side: this node's certificate, client certificates required and checked
    /// against the CA.
    pub server: Arc<ServerConfig>,
    /// The client side: this node's certificate as client certificate, the server's chain
    /// checked against the CA (not its name).
    pub client: Arc<ClientConfig>,
}

// Not derived: the configurations hold the private key.
impl std::fmt::Debug for PeerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerTls").finish_non_exhaustive()
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A trust store of `ca`'s certificates.
pub fn roots(ca: Vec<CertificateDer<'static>>) -> Result<Arc<RootCertStore>, rustls::Error> {
    let mut roots = RootCertStore::empty();
    for c in ca {
        roots.add(c)?;
    }
    Ok(Arc::new(roots))
}

impl PeerTls {
    /// TLS for a node with certificate `chain` (its own first) and `key`, whose peers'
    /// certificates the CAs `ca` signed.
    pub fn new(
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
        ca: Vec<CertificateDer<'static>>,
    ) -> Result<PeerTls, rustls::Error> {
        let roots = roots(ca)?;
        let verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider())
            .build()
            .map_err(|e| rustls::Error::General(e.to_string()))?;
        let server = ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain.clone(), key.clone_key())?;
        let client = client_config(roots, Some((chain, key)))?;
        Ok(PeerTls {
            server: Arc::new(server),
            client,
        })
    }
}

/// The client side alone: servers' chains checked against `roots`, `identity` (a chain and
/// its key) presented as client certificate. `None` presents none, which every peer
/// refuses: for tests of exactly that.
pub fn client_config(
    roots: Arc<RootCertStore>,
    identity: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
) -> Result<Arc<ClientConfig>, rustls::Error> {
    let p = provider();
    let verifier = ChainOnly {
        inner: WebPkiServerVerifier::builder_with_provider(roots.clone(), p.clone())
            .build()
            .map_err(|e| rustls::Error::General(e.to_string()))?,
        algs: p.signature_verification_algorithms,
        roots,
    };
    let b = ClientConfig::builder_with_provider(p)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier));
    Ok(Arc::new(match identity {
        Some((chain, key)) => b.with_client_auth_cert(chain, key)?,
        None => b.with_no_client_auth(),
    }))
}

/// A server verifier that checks the chain (signatures up to the CA, validity dates, the
/// serverAuth usage) and not the name: rustls's own chain check, then its own handshake
/// signature checks.
#[derive(Debug)]
struct ChainOnly {
    roots: Arc<RootCertStore>,
    algs: WebPkiSupportedAlgorithms,
    /// For the handshake signatures, which do not involve the name.
    inner: Arc<WebPkiServerVerifier>,
}

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let cert = ParsedCertificate::try_from(end_entity)?;
        verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.algs.all,
        )?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}
