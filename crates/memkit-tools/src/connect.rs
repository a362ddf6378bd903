//! How `memkit` reaches its servers: the pool (`--servers`, `--distribution`), timeouts,
//! TLS (`--tls`, `--tls-ca`, `--tls-cert`/`--tls-key`, `--tls-server-name`,
//! `--tls-insecure`), the protocol (`--binary`, libmemcached-tools' name) and
//! authentication (`--username`/`--password`): ASCII authentication for `-Y` servers over
//! text, SASL PLAIN for `-S` servers with `--binary`. One [`ClientConfig`] comes out of
//! these and serves every subcommand: the key-value verbs and `stats`/`top` through
//! [`Cluster`], `dump`/`watch`/`verbosity`/`cluster` through [`crate::raw::Raw`], which opens its
//! streams with the same configuration (text only: they have no binary form, see
//! [`ConnArgs::refuse_binary`]).

use std::time::Duration;

use clap::Args as ClapArgs;
use memkit_client::{
    ClientConfig, Cluster, ClusterConfig, Credentials, Distribution, ServerSpec, TlsOptions,
};

/// Connection options, shared by every subcommand.
// The fields' doc comments are their `--help` text, where brackets mark what is optional
// and angle brackets a placeholder.
#[allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]
#[derive(Debug, Clone, ClapArgs)]
pub struct ConnArgs {
    /// Servers: host[:port[:weight]],... (default $MEMCACHED_SERVERS, then 127.0.0.1:11211).
    #[arg(
        long,
        short = 's',
        env = "MEMCACHED_SERVERS",
        default_value = "127.0.0.1:11211",
        global = true
    )]
    pub servers: String,
    /// ketama (libmemcached weighted), ketama-unweighted[:hash], modula, modula:<hash>,
    /// php-consistent[:crc32|fnv], php-standard[:crc32|fnv] (PHP's pecl memcache).
    #[arg(long, short = 'd', default_value = "ketama", global = true)]
    pub distribution: String,
    /// Connect and request timeout in milliseconds.
    #[arg(long, default_value_t = 2000, global = true)]
    pub timeout_ms: u64,
    /// Speak TLS (servers started with -Z). Implied by the other --tls-* options.
    #[arg(long, global = true)]
    pub tls: bool,
    /// CA certificates (PEM) to trust; a public CA: /etc/ssl/certs/ca-certificates.crt.
    #[arg(long, value_name = "PEM", global = true)]
    pub tls_ca: Option<String>,
    /// Client certificate chain (PEM), for servers that verify clients (ssl_verify_mode).
    #[arg(long, value_name = "PEM", requires = "tls_key", global = true)]
    pub tls_cert: Option<String>,
    /// The client certificate's private key (PEM).
    #[arg(long, value_name = "PEM", requires = "tls_cert", global = true)]
    pub tls_key: Option<String>,
    /// The name the server certificates must carry (default: each server's host).
    #[arg(long, value_name = "NAME", global = true)]
    pub tls_server_name: Option<String>,
    /// Accept any server certificate. For tests only: anyone on the path can read and
    /// change the traffic.
    #[arg(long, global = true)]
    pub tls_insecure: bool,
    /// Speak the binary protocol (servers started with -S serve nothing else); with
    /// --username/--password, log in with SASL PLAIN. dump, watch, verbosity and cluster
    /// have no binary form and are refused.
    #[arg(long, global = true)]
    pub binary: bool,
    /// User: ASCII authentication (servers started with -Y), or SASL PLAIN with --binary
    /// (servers started with -S).
    #[arg(long, env = "MEMKIT_USERNAME", requires = "password", global = true)]
    pub username: Option<String>,
    /// Password for --username ($MEMKIT_PASSWORD keeps it out of `ps`).
    #[arg(long, env = "MEMKIT_PASSWORD", hide_env_values = true, global = true)]
    pub password: Option<String>,
}

impl ConnArgs {
    /// The request timeout.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    fn wants_tls(&self) -> bool {
        self.tls
            || self.tls_insecure
            || self.tls_ca.is_some()
            || self.tls_cert.is_some()
            || self.tls_server_name.is_some()
    }

    /// With `--binary`, the error for a subcommand that has no binary form (`what`: why),
    /// which exits with status 2 before any server is contacted.
    pub fn refuse_binary(&self, command: &str, what: &str) -> Result<(), String> {
        if self.binary {
            return Err(format!(
                "{command} cannot run with --binary: {what}; run it without --binary (a server \
                 started with -S serves only binary, so {command} cannot reach it)"
            ));
        }
        Ok(())
    }

    /// The client configuration: timeouts, one connection per server, TLS, protocol, login.
    pub fn client_config(&self) -> Result<ClientConfig, String> {
        let t = self.timeout();
        let mut cfg = ClientConfig {
            connect_timeout: t,
            request_timeout: t,
            pool_size: 1,
            ..ClientConfig::default()
        };
        if self.wants_tls() {
            let mut o = TlsOptions::new();
            match (&self.tls_ca, self.tls_insecure) {
                (Some(ca), _) => o = o.ca_pem_file(ca),
                (None, true) => {}
                (None, false) => {
                    return Err("--tls needs --tls-ca PEM (or --tls-insecure, for tests)".into());
                }
            }
            if self.tls_insecure {
                o = o.danger_accept_any_server_certificate();
            }
            if let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) {
                o = o.client_cert_pem_files(cert, key);
            }
            if let Some(n) = &self.tls_server_name {
                o = o.server_name(n);
            }
            cfg = cfg.with_tls(o.connector().map_err(|e| e.to_string())?);
        }
        if self.binary {
            cfg = cfg.binary();
        }
        match (&self.username, &self.password) {
            (Some(u), Some(p)) => {
                let creds = if self.binary {
                    Credentials::sasl(u, p)
                } else {
                    Credentials::new(u, p)
                };
                cfg = cfg.with_auth(creds.map_err(|e| e.to_string())?);
            }
            (None, None) => {}
            _ => return Err("--username and --password go together".into()),
        }
        Ok(cfg)
    }

    /// The pool.
    pub fn cluster(&self) -> Result<Cluster, String> {
        let servers = ServerSpec::parse_list(&self.servers)?;
        if servers.is_empty() {
            return Err("no servers".into());
        }
        let dist: Distribution = self.distribution.parse()?;
        let cfg = ClusterConfig {
            client: self.client_config()?,
            // A one-shot tool reports failures instead of routing around them.
            remap_on_failure: false,
            ..ClusterConfig::new(dist)
        };
        Ok(Cluster::new(servers, cfg))
    }
}
