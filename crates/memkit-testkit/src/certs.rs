//! A throwaway PKI for TLS tests: a CA, a server certificate for `localhost` and
//! `127.0.0.1` (good as a client certificate too, as a replicated node's is: it dials its
//! peers with it), a client certificate from the same CA, and a client certificate from an
//! unrelated CA (which a server must refuse). Generated with rcgen (ring) on every run,
//! written as PEM files to a fresh temp directory that is removed on drop, so real
//! memcached (`-Z -o ssl_chain_cert=...`) can read them as well as memkitd.

use std::path::Path;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use crate::tempdir::{TempDir, tempdir};

/// The PEM texts and the files they were written to.
#[derive(Debug)]
pub struct TestPki {
    dir: TempDir,
    /// The CA certificate (PEM) that signed the server and the good client certificate.
    pub ca_pem: String,
    /// Server certificate and key (PEM); its certificate serves as a client one too.
    pub server_cert_pem: String,
    pub server_key_pem: String,
    /// Client certificate and key from the same CA (PEM).
    pub client_cert_pem: String,
    pub client_key_pem: String,
    /// Client certificate and key from another CA (PEM).
    pub rogue_cert_pem: String,
    pub rogue_key_pem: String,
}

fn ca(name: &str) -> (CertificateParams, KeyPair, String) {
    let key = KeyPair::generate().expect("CA key");
    let mut p = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, name);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let pem = p.self_signed(&key).expect("CA cert").pem();
    (p, key, pem)
}

fn leaf(
    issuer: &Issuer<'_, KeyPair>,
    names: &[&str],
    cn: &str,
    usage: &[ExtendedKeyUsagePurpose],
) -> (String, String) {
    let key = KeyPair::generate().expect("leaf key");
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let mut p = CertificateParams::new(names).expect("leaf params");
    p.distinguished_name.push(DnType::CommonName, cn);
    p.extended_key_usages = usage.to_vec();
    let cert = p.signed_by(&key, issuer).expect("leaf cert");
    (cert.pem(), key.serialize_pem())
}

impl TestPki {
    /// A new PKI in a new temp directory.
    pub fn generate() -> TestPki {
        let dir = tempdir("pki");
        let (ca_params, ca_key, ca_pem) = ca("memkit test CA");
        let issuer = Issuer::new(ca_params, ca_key);
        let (server_cert_pem, server_key_pem) = leaf(
            &issuer,
            &["localhost", "127.0.0.1"],
            "memkit test server",
            &[
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        );
        let (client_cert_pem, client_key_pem) = leaf(
            &issuer,
            &["client.memkit.test"],
            "memkit test client",
            &[ExtendedKeyUsagePurpose::ClientAuth],
        );
        let (rogue_params, rogue_key, _) = ca("some other CA");
        let rogue = Issuer::new(rogue_params, rogue_key);
        let (rogue_cert_pem, rogue_key_pem) = leaf(
            &rogue,
            &["rogue.memkit.test"],
            "rogue client",
            &[ExtendedKeyUsagePurpose::ClientAuth],
        );
        let pki = TestPki {
            dir,
            ca_pem,
            server_cert_pem,
            server_key_pem,
            client_cert_pem,
            client_key_pem,
            rogue_cert_pem,
            rogue_key_pem,
        };
        for (name, body) in [
            ("ca.pem", &pki.ca_pem),
            ("server.pem", &pki.server_cert_pem),
            ("server.key", &pki.server_key_pem),
            ("client.pem", &pki.client_cert_pem),
            ("client.key", &pki.client_key_pem),
            ("rogue.pem", &pki.rogue_cert_pem),
            ("rogue.key", &pki.rogue_key_pem),
        ] {
            std::fs::write(pki.dir().join(name), body).expect("write a PEM file");
        }
        pki
    }

    /// The directory holding the files.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The path of one of `ca.pem`, `server.pem`, `server.key`, `client.pem`, `client.key`,
    /// `rogue.pem`, `rogue.key`, as a string (for command lines).
    pub fn path(&self, name: &str) -> String {
        self.dir().join(name).to_string_lossy().into_owned()
    }

    /// memcached/memkitd `-o` value for TLS with this PKI's server certificate and
    /// `verify_mode` (0: no client certificates; 2: required, checked against the CA).
    pub fn server_opts(&self, verify_mode: u8) -> String {
        format!(
            "ssl_chain_cert={},ssl_key={},ssl_ca_cert={},ssl_verify_mode={verify_mode}",
            self.path("server.pem"),
            self.path("server.key"),
            self.path("ca.pem")
        )
    }
}
