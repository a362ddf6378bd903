//! [`Client`]: one server, a small pool of pipelined connections, timeouts, and the
//! [`Memcache`] implementation.
//!
//! Every call validates its keys first (memcached's text-protocol rules, the same check the
//! embedded store applies), encodes its request with [`crate::command`], sends it on one of
//! the pool's connections and waits at most [`ClientConfig::request_timeout`] (kept by the
//! connection's watchdog, one timer a connection: [`crate::conn`]). A connection whose
//! request timed out is closed (its late reply would be mistaken for the next one's);
//! the pool reconnects lazily, within [`ClientConfig::connect_timeout`].
//!
//! [`ClientConfig::protocol`] picks the wire: text ([`crate::command`], the default) or
//! binary ([`crate::binary`]), where [`ClientConfig::auth`] means SASL PLAIN
//! ([`crate::sasl`]) instead of the ASCII login ([`crate::auth`]).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use memkit_protocol::Limits;
use memkit_types::{
    ArithOptions, ArithOutcome, DeleteOptions, DeleteOutcome, Error, Exptime, GetOptions, Item,
    Memcache, Result, StoreOptions, Stored, validate_key,
};
use tokio::sync::Mutex;

use crate::auth::Credentials;
use crate::binary;
use crate::command::{self, Dialect};
use crate::conn::{Connection, Connector, Job, Protocol, Stream, TcpConnector};
use crate::distribution::ServerSpec;
use crate::reply::Reply;

/// Settings of a connection pool to one server.
#[derive(Clone)]
pub struct ClientConfig {
    /// Deadline for establishing a connection (1 s).
    pub connect_timeout: Duration,
    /// Deadline for one call, from sending to the last reply byte (1 s).
    pub request_timeout: Duration,
    /// Connections per server (2); each one pipelines any number of concurrent calls.
    pub pool_size: usize,
    /// The largest value a reply may carry (128 MiB; memcached's `-I` tops out at 1 GiB).
    pub max_value_size: usize,
    /// Meta or classic commands, over the text protocol; see [`crate::command`].
    pub dialect: Dialect,
    /// Text (the default) or binary ([`ClientConfig::binary`]; servers started with `-S`
    /// serve binary only); see [`crate::binary`] for what binary cannot say.
    pub protocol: Protocol,
    /// Opens streams: plain TCP, or TLS ([`ClientConfig::with_tls`]).
    pub connector: Arc<dyn Connector>,
    /// Log in on every new connection: ASCII authentication over text (servers started
    /// with `-Y`, [`crate::auth`]), SASL PLAIN over binary (`-S`, [`crate::sasl`]).
    pub auth: Option<Credentials>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            connect_timeout: Duration::from_secs(1),
            request_timeout: Duration::from_secs(1),
            pool_size: 2,
            max_value_size: 128 << 20,
            dialect: Dialect::Meta,
            protocol: Protocol::Text,
            connector: Arc::new(TcpConnector),
            auth: None,
        }
    }
}

impl ClientConfig {
    /// Connects with `connector` (e.g. a [`crate::TlsConnector`]) instead of plain TCP.
    pub fn with_tls(self, connector: impl Connector) -> Self {
        self.with_connector(Arc::new(connector))
    }

    /// Connects with `connector`.
    pub fn with_connector(mut self, connector: Arc<dyn Connector>) -> Self {
        self.connector = connector;
        self
    }

    /// Logs in with `creds` on every new connection, before any request: ASCII
    /// authentication over text, SASL PLAIN over binary.
    pub fn with_auth(mut self, creds: Credentials) -> Self {
        self.auth = Some(creds);
        self
    }

    /// Speaks the binary protocol (for `-S` servers, with [`ClientConfig::with_auth`]).
    pub fn binary(mut self) -> Self {
        self.protocol = Protocol::Binary;
        self
    }

    /// Opens one stream to `server` as the pool does: the connector (TCP or TLS), then the
    /// login when [`ClientConfig::auth`] is set (ASCII or SASL, by
    /// [`ClientConfig::protocol`]), all within `connect_timeout`. For tools that speak
    /// commands the client does not model (`memkit dump`, `watch`).
    pub async fn open(&self, server: &ServerSpec) -> Result<Box<dyn Stream>> {
        let open = async {
            let mut stream = self
                .connector
                .connect(server)
                .await
                .map_err(|e| Error::Io(format!("connect to {server}: {e}")))?;
            match (&self.auth, self.protocol) {
                (Some(creds), Protocol::Text) => crate::auth::login(&mut stream, creds).await?,
                (Some(creds), Protocol::Binary) => crate::sasl::login(&mut stream, creds).await?,
                (None, _) => {}
            }
            Ok::<_, Error>(stream)
        };
        match tokio::time::timeout(self.connect_timeout, open).await {
            Ok(r) => r,
            Err(_) => Err(Error::Timeout),
        }
    }
}

impl fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientConfig")
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("pool_size", &self.pool_size)
            .field("max_value_size", &self.max_value_size)
            .field("dialect", &self.dialect)
            .field("protocol", &self.protocol)
            .field("connector", &self.connector)
            .field("auth", &self.auth)
            .finish()
    }
}

struct Inner {
    spec: ServerSpec,
    config: ClientConfig,
    limits: Limits,
    slots: Vec<Mutex<Option<Arc<Connection>>>>,
    next: AtomicUsize,
}

/// A client for one server. Cheap to clone (the pool is shared).
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("server", &self.inner.spec)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client for `server`; connections open lazily on first use.
    pub fn new(server: ServerSpec, config: ClientConfig) -> Client {
        let limits = Limits {
            max_item_size: config.max_value_size,
            ..Limits::default()
        };
        let slots = (0..config.pool_size.max(1))
            .map(|_| Mutex::new(None))
            .collect();
        Client {
            inner: Arc::new(Inner {
                spec: server,
                config,
                limits,
                slots,
                next: AtomicUsize::new(0),
            }),
        }
    }

    /// A client for `addr` (`host:port`) with default settings, checked with `version`.
    pub async fn connect(addr: &str) -> Result<Client> {
        let spec: ServerSpec = addr.parse().map_err(Error::Protocol)?;
        let c = Client::new(spec, ClientConfig::default());
        c.version().await?;
        Ok(c)
    }

    /// The server this client talks to.
    pub fn server(&self) -> &ServerSpec {
        &self.inner.spec
    }

    /// The settings.
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    async fn connection(&self) -> Result<Arc<Connection>> {
        let inner = &self.inner;
        let i = inner.next.fetch_add(1, Ordering::Relaxed) % inner.slots.len();
        let mut slot = inner.slots[i].lock().await;
        if let Some(c) = slot.as_ref().filter(|c| c.is_open()) {
            return Ok(c.clone());
        }
        *slot = None;
        let stream = inner.config.open(&inner.spec).await?;
        let c = Arc::new(Connection::start_with(
            stream,
            inner.limits,
            inner.config.protocol,
            inner.config.request_timeout,
        ));
        *slot = Some(c.clone());
        Ok(c)
    }

    /// Sends `job` and returns its replies, within the request timeout (kept by the
    /// connection's watchdog, [`crate::conn`]; the connect timeout bounds the connecting).
    pub(crate) async fn call(&self, job: Job) -> Result<Vec<Reply>> {
        if job.count == 0 {
            return Ok(Vec::new());
        }
        self.connection().await?.call(job).await
    }

    /// Sends `jobs` on one connection, in order, and returns each one's replies, each
    /// within the request timeout ([`Client::pipeline`]).
    pub(crate) async fn call_in_order(&self, jobs: Vec<Job>) -> Vec<Result<Vec<Reply>>> {
        let n = jobs.len();
        let mut results: Vec<Result<Vec<Reply>>> = Vec::with_capacity(n);
        let queued = async {
            let c = self.connection().await?;
            let mut waits = Vec::with_capacity(n);
            for job in jobs {
                waits.push(c.queue(job).await?);
            }
            Ok::<_, Error>(waits)
        };
        match queued.await {
            Ok(waits) => {
                for w in waits {
                    results.push(w.await);
                }
            }
            Err(e) => results.resize_with(n, || Err(e.clone())),
        }
        results
    }

    /// `version`: also a cheap liveness check (`memkit ping`).
    pub async fn version(&self) -> Result<String> {
        match self.protocol() {
            Protocol::Text => command::version_reply(self.call(command::version()).await?),
            Protocol::Binary => binary::version_reply(self.call(binary::version()).await?),
        }
    }

    /// `stats [args]` as name/value pairs (binary: `STAT` with `args` as its group).
    pub async fn stats(&self, args: &str) -> Result<Vec<(String, String)>> {
        match self.protocol() {
            Protocol::Text => command::stats_reply(self.call(command::stats(args)).await?),
            Protocol::Binary => binary::stats_reply(self.call(binary::stats(args)).await?),
        }
    }

    /// Closes every pooled connection (they reopen on next use).
    pub async fn disconnect(&self) {
        for s in &self.inner.slots {
            if let Some(c) = s.lock().await.take() {
                c.close("disconnected");
            }
        }
    }

    fn dialect(&self) -> Dialect {
        self.inner.config.dialect
    }

    fn protocol(&self) -> Protocol {
        self.inner.config.protocol
    }
}

impl Memcache for Client {
    async fn get_multi(&self, keys: &[&[u8]], opts: &GetOptions) -> Result<Vec<Option<Item>>> {
        for k in keys {
            validate_key(k)?;
        }
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        match self.protocol() {
            Protocol::Text => {
                let job = command::get(self.dialect(), keys, opts)?;
                command::get_replies(self.dialect(), keys, self.call(job).await?)
            }
            Protocol::Binary => {
                binary::get_replies(keys, self.call(binary::get(keys, opts)?).await?)
            }
        }
    }

    async fn store(&self, key: &[u8], value: &[u8], opts: &StoreOptions) -> Result<Stored> {
        validate_key(key)?;
        match self.protocol() {
            Protocol::Text => {
                let job = command::store(self.dialect(), key, value, opts)?;
                command::store_reply(self.call(job).await?)
            }
            Protocol::Binary => {
                let job = binary::store(key, value, opts)?;
                binary::store_reply(opts, self.call(job).await?)
            }
        }
    }

    async fn delete_with(&self, key: &[u8], opts: &DeleteOptions) -> Result<DeleteOutcome> {
        validate_key(key)?;
        match self.protocol() {
            Protocol::Text => {
                let job = command::delete(self.dialect(), key, opts)?;
                command::delete_reply(self.call(job).await?)
            }
            Protocol::Binary => binary::delete_reply(self.call(binary::delete(key, opts)?).await?),
        }
    }

    async fn arithmetic(&self, key: &[u8], opts: &ArithOptions) -> Result<ArithOutcome> {
        validate_key(key)?;
        match self.protocol() {
            Protocol::Text => {
                let job = command::arith(self.dialect(), key, opts)?;
                command::arith_reply(self.call(job).await?)
            }
            Protocol::Binary => {
                binary::arith_reply(opts, self.call(binary::arith(key, opts)?).await?)
            }
        }
    }

    async fn touch(&self, key: &[u8], exptime: Exptime) -> Result<bool> {
        validate_key(key)?;
        match self.protocol() {
            Protocol::Text => command::touch_reply(self.call(command::touch(key, exptime)).await?),
            Protocol::Binary => binary::touch_reply(self.call(binary::touch(key, exptime)?).await?),
        }
    }

    async fn flush_all(&self, delay: u32) -> Result<()> {
        match self.protocol() {
            Protocol::Text => command::ok_reply(self.call(command::flush_all(delay)).await?),
            Protocol::Binary => binary::flush_reply(self.call(binary::flush_all(delay)).await?),
        }
    }
}
