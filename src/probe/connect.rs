//! The probe's own connection to a target, so that each step of setting it up is timed: DNS
//! (none for an IP address), TCP connect (each address in turn, `TCP_NODELAY`), through a proxy
//! when the environment says so (a CONNECT tunnel for `https://`, the absolute form for
//! `http://`), then TLS on rustls, with what the handshake showed (version, cipher, the leaf's
//! issuer, the earliest expiry in the chain the server sent). Each step is stamped the moment it
//! completes, on the run's clock. A failed step says which, and a refused certificate why.
//!
//! One connection per run, never pooled, so every measurement includes the same connect work,
//! as blackbox_exporter's do.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::header::{HeaderValue, HOST, PROXY_AUTHORIZATION, USER_AGENT};
use hyper::Uri;
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::proxy::matcher::{Intercept, Matcher};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use rustls::{CertificateError, ClientConfig};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tower_service::Service;

use crate::outcome::HttpReason;
use crate::result::TlsSession;
use crate::timeline::Setup;
use crate::tls::client::Outbound;
use crate::util::{error_chain, human_duration};

/// The user agent every request names.
pub(crate) const AGENT: &str = concat!("llm-canary/", env!("CARGO_PKG_VERSION"));

/// What runs connect with: the HTTP client for what is not a run (model lists, Entra ID
/// tokens), one per connect timeout, and the proxies the environment names.
#[derive(Default)]
pub(crate) struct Clients {
    http: Mutex<HashMap<Duration, reqwest::Client>>,
    /// HTTP(S)_PROXY and NO_PROXY, read once.
    env_proxies: OnceLock<Arc<Matcher>>,
}

/// What one run connects with.
#[derive(Clone)]
pub(crate) struct Client {
    /// For the requests beside a run: a cloud's token, the model list.
    pub http: reqwest::Client,
    env_proxies: Arc<Matcher>,
}

impl Clients {
    pub(crate) fn get(&self, connect: Duration) -> Client {
        let http = self
            .http
            .lock()
            .expect("the client map is never poisoned")
            .entry(connect)
            .or_insert_with(|| {
                reqwest::Client::builder()
                    .connect_timeout(connect)
                    .pool_max_idle_per_host(0)
                    .redirect(reqwest::redirect::Policy::none())
                    .user_agent(AGENT)
                    .tcp_nodelay(true)
                    .build()
                    .expect("a client with static settings builds")
            })
            .clone();
        Client {
            http,
            env_proxies: self
                .env_proxies
                .get_or_init(|| Arc::new(Matcher::from_env()))
                .clone(),
        }
    }
}

/// How one run reaches its target: the TLS config (its `tls:` block, else the system's roots)
/// and the name its certificate must hold, and the proxies (its `proxy_url` and `no_proxy`,
/// else the environment's). Made before the run's clock starts.
pub(crate) struct Way {
    tls: Result<Arc<ClientConfig>, String>,
    server_name: Option<String>,
    proxies: Arc<Matcher>,
}

impl Client {
    pub(crate) fn way(&self, outbound: &Outbound) -> Way {
        let proxies = match &outbound.proxy_url {
            Some(url) => {
                let mut m = Matcher::builder().all(url.to_string());
                if let Some(no) = &outbound.no_proxy {
                    m = m.no(no.clone());
                }
                Arc::new(m.build())
            }
            None => self.env_proxies.clone(),
        };
        Way {
            tls: outbound.tls_config(),
            server_name: outbound.tls.as_ref().and_then(|t| t.server_name.clone()),
            proxies,
        }
    }
}

/// Any connection the request can be written to.
pub(crate) trait Io: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Io for T {}

/// A connection ready for the request.
pub(crate) struct Connection {
    pub io: Box<dyn Io>,
    /// What the handshake showed, for `https://`.
    pub tls: Option<Peer>,
    /// Through a proxy to an `http://` target: the request goes to the proxy in absolute form,
    /// with this `Proxy-Authorization`, if the proxy URL had credentials.
    pub absolute_form: Option<Option<HeaderValue>>,
    /// On `http://`, the first byte the server sent, once it has sent one: a TLS record's type
    /// there means the scheme is wrong ([`answered_plain_http_in_tls`]).
    pub first_byte: Option<FirstByte>,
}

/// The first byte read from a connection, once one has been read.
#[derive(Debug, Clone, Default)]
pub(crate) struct FirstByte(Arc<std::sync::OnceLock<u8>>);

impl FirstByte {
    pub(crate) fn get(&self) -> Option<u8> {
        self.0.get().copied()
    }
}

/// A stream that notes the first byte read from it; reads and writes are its inner stream's.
struct Sniffed<T> {
    inner: T,
    first: FirstByte,
}

impl<T: AsyncRead + Unpin> AsyncRead for Sniffed<T> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Some(b) = buf.filled().get(before) {
            let _ = self.first.0.set(*b);
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Sniffed<T> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        std::pin::Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Whether an `http://` exchange failed because the server speaks TLS there: its first byte
/// was a TLS record's (an alert, 21, or a handshake, 22, where a status line belongs), or its
/// answer is the sentence HTTPS servers send to plain HTTP (Go's and this agent's `Client sent
/// an HTTP request to an HTTPS server`, nginx's `The plain HTTP request was sent to HTTPS
/// port`). The connect error it is, with its reason.
pub(crate) fn answered_plain_http_in_tls(
    first: Option<&FirstByte>,
    answer: Option<&str>,
    addr: &str,
) -> Option<(HttpReason, String)> {
    let tls_record = matches!(first.and_then(FirstByte::get), Some(21 | 22));
    let said = answer.is_some_and(|a| {
        a.contains("Client sent an HTTP request to an HTTPS server")
            || a.contains("The plain HTTP request was sent to HTTPS port")
    });
    (tls_record || said).then(|| {
        (
            HttpReason::TlsMismatch,
            format!(
                "connect: the server answered plain HTTP in TLS: the scheme looks wrong, try https:// ({addr})"
            ),
        )
    })
}

/// Why no connection was made: the step that failed, with what it said.
/// [`ConnectError::describe`] says it for the record, with its reason.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnectError {
    /// The URL cannot be connected to (no host, another scheme).
    #[error("{0}")]
    Url(String),
    #[error("cannot resolve the host: {source}")]
    Dns { source: io::Error },
    /// No address took the TCP connection; the last one's error.
    #[error("{source}")]
    Tcp { source: io::Error },
    #[error("through the proxy {proxy}: {why}")]
    Proxy { proxy: String, why: String },
    /// The handshake with `host` (the name verified) failed.
    #[error("TLS handshake with {host}: {source}")]
    Tls { host: String, source: io::Error },
    /// No TLS settings to connect with (no trust store).
    #[error("{0}")]
    Settings(String),
}

/// Where a run's request goes.
pub(crate) struct Dest {
    pub uri: Uri,
    https: bool,
    /// Without the brackets of an IPv6 address.
    host: String,
    port: u16,
}

impl Dest {
    pub(crate) fn parse(url: &str) -> Result<Dest, ConnectError> {
        let uri: Uri = url
            .parse()
            .map_err(|e| ConnectError::Url(format!("{url:?} is no URL: {e}")))?;
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(ConnectError::Url(format!("{url:?} is not http(s)://"))),
        };
        let host = uri
            .host()
            .ok_or_else(|| ConnectError::Url(format!("{url:?} names no host")))?;
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host)
            .to_string();
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        Ok(Dest {
            uri,
            https,
            host,
            port,
        })
    }

    /// `host:port`, as an error names it.
    pub(crate) fn addr(&self) -> String {
        match self.host.contains(':') {
            true => format!("[{}]:{}", self.host, self.port),
            false => format!("{}:{}", self.host, self.port),
        }
    }

    /// The `Host` header: the URL's authority, without credentials.
    pub(crate) fn host_header(&self) -> Option<HeaderValue> {
        let authority = self.uri.authority()?.as_str();
        let authority = authority.rsplit('@').next().unwrap_or(authority);
        HeaderValue::from_str(authority).ok()
    }
}

/// Opens a connection to `dest` as `client` says (proxy, TLS), stamping each step in `setup`
/// as it completes. Unbounded in time: the caller holds the connect deadline.
pub(crate) async fn open(
    way: &Way,
    dest: &Dest,
    setup: &mut Setup,
) -> Result<Connection, ConnectError> {
    let proxy = way.proxies.intercept(&dest.uri);
    let (tcp, absolute_form) = match &proxy {
        None => (tcp(&dest.host, dest.port, setup).await?, None),
        Some(via) => through(via, dest, setup).await?,
    };
    if !dest.https {
        let first = FirstByte::default();
        return Ok(Connection {
            io: Box::new(Sniffed {
                inner: tcp,
                first: first.clone(),
            }),
            tls: None,
            absolute_form,
            first_byte: Some(first),
        });
    }
    let config = way.tls.clone().map_err(ConnectError::Settings)?;
    // `tls.server_name`, where set, is the name sent and verified.
    let host = way.server_name.clone().unwrap_or_else(|| dest.host.clone());
    let name = ServerName::try_from(host.clone())
        .map_err(|_| ConnectError::Url(format!("{host:?} is no host name for TLS")))?;
    let tls = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .map_err(|source| ConnectError::Tls { host, source })?;
    setup.secured = Some(std::time::Instant::now());
    let peer = Peer::of(tls.get_ref().1);
    Ok(Connection {
        io: Box::new(tls),
        tls: peer,
        absolute_form: None,
        first_byte: None,
    })
}

/// DNS (unless `host` is an address), then TCP to each address in turn until one answers.
async fn tcp(host: &str, port: u16, setup: &mut Setup) -> Result<TcpStream, ConnectError> {
    let addrs: Vec<SocketAddr> = match host.parse::<std::net::IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => {
            let found = tokio::net::lookup_host((host, port))
                .await
                .map_err(|source| ConnectError::Dns { source })?
                .collect();
            setup.resolved = Some(std::time::Instant::now());
            found
        }
    };
    let mut last = io::Error::new(io::ErrorKind::NotFound, "the name has no address");
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(sock) => {
                setup.connected = Some(std::time::Instant::now());
                let _ = sock.set_nodelay(true);
                return Ok(sock);
            }
            Err(e) => last = e,
        }
    }
    Err(ConnectError::Tcp { source: last })
}

/// To `dest` through the proxy `via`: for `https://` a CONNECT tunnel (the connect step ends
/// when the tunnel is open); for `http://` the proxy's connection itself, with the
/// `Proxy-Authorization` the absolute-form request carries.
async fn through(
    via: &Intercept,
    dest: &Dest,
    setup: &mut Setup,
) -> Result<(TcpStream, Option<Option<HeaderValue>>), ConnectError> {
    let proxy = via.uri().clone();
    let named = format!(
        "{}:{}",
        proxy.host().unwrap_or_default(),
        proxy.port_u16().unwrap_or(80)
    );
    let refused = |why: String| ConnectError::Proxy {
        proxy: named.clone(),
        why,
    };
    if proxy.scheme_str() == Some("https") {
        return Err(refused(
            "an https:// proxy is not supported: use http://".into(),
        ));
    }
    let host = proxy.host().ok_or_else(|| refused("no host".into()))?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let port = proxy.port_u16().unwrap_or(80);
    let sock = tcp(host, port, setup).await.map_err(|e| match e {
        ConnectError::Tcp { source } | ConnectError::Dns { source } => refused(io_reason(&source)),
        other => other,
    })?;
    if !dest.https {
        return Ok((sock, Some(via.basic_auth().cloned())));
    }
    let mut tunnel = Tunnel::new(proxy, Ready(Some(sock)));
    if let Some(auth) = via.basic_auth() {
        tunnel = tunnel.with_auth(auth.clone());
    }
    let target: Uri = format!("https://{}", dest.addr())
        .parse()
        .map_err(|e| ConnectError::Url(format!("{}: {e}", dest.addr())))?;
    let sock = tunnel
        .call(target)
        .await
        .map_err(|e| refused(format!("CONNECT {}: {}", dest.addr(), error_chain(&e))))?
        .into_inner();
    setup.connected = Some(std::time::Instant::now());
    Ok((sock, None))
}

/// A connector that hands over the connection already made, once: the tunnel's first step,
/// made (and timed) here.
struct Ready(Option<TcpStream>);

impl Service<Uri> for Ready {
    type Response = TokioIo<TcpStream>;
    type Error = io::Error;
    type Future = std::future::Ready<Result<Self::Response, io::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), io::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Uri) -> Self::Future {
        std::future::ready(
            self.0
                .take()
                .map(TokioIo::new)
                .ok_or_else(|| io::Error::other("the connection was handed over already")),
        )
    }
}

/// What the handshake showed, kept as it came: the chain is parsed only once the run is over
/// ([`Peer::session`]), so no certificate parsing stands between the handshake and the request.
pub(crate) struct Peer {
    version: rustls::ProtocolVersion,
    suite: rustls::CipherSuite,
    chain: Vec<rustls::pki_types::CertificateDer<'static>>,
}

impl Peer {
    fn of(conn: &rustls::ClientConnection) -> Option<Peer> {
        Some(Peer {
            version: conn.protocol_version()?,
            suite: conn.negotiated_cipher_suite()?.suite(),
            chain: conn.peer_certificates()?.to_vec(),
        })
    }

    /// The session's version, cipher, and from the chain the server sent: the leaf's issuer and
    /// the earliest notAfter.
    pub(crate) fn session(&self) -> Option<TlsSession> {
        use x509_cert::der::Decode;
        let version = match self.version {
            rustls::ProtocolVersion::TLSv1_3 => "TLSv1.3".to_string(),
            rustls::ProtocolVersion::TLSv1_2 => "TLSv1.2".to_string(),
            other => format!("{other:?}"),
        };
        let suite = self.suite;
        let cipher = suite.as_str().map_or_else(
            || format!("{suite:?}"),
            // rustls names TLS 1.3's suites `TLS13_…`; IANA's names are `TLS_…`.
            |s| match s.strip_prefix("TLS13_") {
                Some(rest) => format!("TLS_{rest}"),
                None => s.to_string(),
            },
        );
        let chain: Vec<x509_cert::Certificate> = self
            .chain
            .iter()
            .filter_map(|der| x509_cert::Certificate::from_der(der).ok())
            .collect();
        let issuer = chain.first()?.tbs_certificate.issuer.to_string();
        let earliest = chain
            .iter()
            .map(|c| c.tbs_certificate.validity.not_after.to_unix_duration())
            .min()?;
        Some(TlsSession {
            version,
            cipher,
            issuer,
            earliest_expiry: jiff::Timestamp::from_second(i64::try_from(earliest.as_secs()).ok()?)
                .ok()?,
        })
    }
}

impl ConnectError {
    /// The record's reason for this failure, if it shows one, and the sentence for the on-call
    /// engineer, naming `addr` (`host:port`).
    pub(crate) fn describe(&self, addr: &str) -> (Option<HttpReason>, String) {
        match self {
            ConnectError::Url(why) | ConnectError::Settings(why) => {
                (None, format!("connect: {why}"))
            }
            ConnectError::Dns { source } | ConnectError::Tcp { source } => {
                (None, format!("connect: {} ({addr})", io_reason(source)))
            }
            ConnectError::Proxy { proxy, why } => (
                None,
                format!("connect: through the proxy {proxy}: {why} ({addr})"),
            ),
            ConnectError::Tls { host, source } => tls_failure(source, host, addr),
        }
    }
}

/// An I/O error in a few words: its kind for an operating system's error ("connection
/// refused"), else what it says.
fn io_reason(e: &io::Error) -> String {
    if e.kind() != io::ErrorKind::Other && e.raw_os_error().is_some() {
        e.kind().to_string()
    } else {
        e.to_string()
    }
}

/// A failed handshake with `host`: its reason and what to do about it.
fn tls_failure(e: &io::Error, host: &str, addr: &str) -> (Option<HttpReason>, String) {
    let said = |reason, what: String| (Some(reason), format!("connect: {what} ({addr})"));
    match tls_error(e) {
        Some(rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType)) => said(
            HttpReason::TlsMismatch,
            "the server answered the TLS handshake in plain HTTP: the scheme looks wrong, try http://".into(),
        ),
        Some(rustls::Error::InvalidCertificate(c)) => match c {
            CertificateError::ExpiredContext { time, not_after } => {
                let at = jiff::Timestamp::from_second(not_after.as_secs() as i64)
                    .map_or_else(|_| "?".to_string(), |t| t.to_string());
                let ago = Duration::from_secs(time.as_secs().saturating_sub(not_after.as_secs()));
                said(
                    HttpReason::CertExpired,
                    format!(
                        "the certificate {host} sent expired at {at}, {} ago: renew it",
                        human_duration(ago)
                    ),
                )
            }
            CertificateError::Expired => said(
                HttpReason::CertExpired,
                format!("the certificate {host} sent has expired: renew it"),
            ),
            CertificateError::UnknownIssuer => said(
                HttpReason::CertUnknownAuthority,
                format!("the certificate {host} sent is signed by a CA the agent does not trust: set tls.ca_file to that CA's certificate"),
            ),
            CertificateError::NotValidForNameContext { presented, .. } => said(
                HttpReason::CertNameMismatch,
                format!(
                    "the certificate the server sent is for {}, not {host}: fix base_url or the server's certificate",
                    presented
                        .iter()
                        .map(|n| bare_name(n))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ),
            CertificateError::NotValidForName => said(
                HttpReason::CertNameMismatch,
                format!("the certificate the server sent is not for {host}: fix base_url or the server's certificate"),
            ),
            other => said(
                HttpReason::TlsHandshake,
                format!("TLS handshake: the server's certificate was refused: {other}"),
            ),
        },
        Some(rustls::Error::AlertReceived(alert)) => {
            said(HttpReason::TlsHandshake, format!("TLS handshake: {}", alerted(*alert)))
        }
        Some(other) => said(HttpReason::TlsHandshake, format!("TLS handshake: {other}")),
        None => said(HttpReason::TlsHandshake, format!("TLS handshake: {}", io_reason(e))),
    }
}

/// What the server's alert means for the client's certificate, in words.
fn alerted(alert: rustls::AlertDescription) -> String {
    use rustls::AlertDescription as A;
    match alert {
        A::CertificateRequired => {
            "the server requires a client certificate: set tls.cert_file and tls.key_file".into()
        }
        A::BadCertificate | A::UnknownCA | A::CertificateUnknown | A::AccessDenied => format!(
            "the server refused the client certificate ({alert:?}): tls.cert_file must be signed by a CA the server trusts"
        ),
        other => format!("the server ended the handshake ({other:?})"),
    }
}

/// A TLS alert that came with the first read, once the handshake seemed done: a TLS 1.3 server
/// judges the client's certificate (or its absence) after the client has finished its part.
/// The connect error it is, with its reason, or `None` for any other failure.
pub(crate) fn refused_after_handshake(
    e: &(dyn std::error::Error + 'static),
    addr: &str,
) -> Option<(HttpReason, String)> {
    match tls_error(e)? {
        rustls::Error::AlertReceived(alert) => Some((
            HttpReason::TlsHandshake,
            format!("connect: TLS handshake: {} ({addr})", alerted(*alert)),
        )),
        _ => None,
    }
}

/// A name as rustls presents it (`DnsName("a.example")`, `IpAddress(10.0.0.1)`), bare.
fn bare_name(n: &str) -> &str {
    let inner = match (n.find('('), n.rfind(')')) {
        (Some(a), Some(b)) if a < b => &n[a + 1..b],
        _ => n,
    };
    inner.trim_matches('"')
}

/// The TLS error under `err`, if there is one. tokio-rustls hands rustls' error on inside an
/// io::Error, and an io::Error's `source` skips what it wraps, so each is opened with
/// `get_ref`.
fn tls_error<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    if let Some(tls) = err.downcast_ref::<rustls::Error>() {
        return Some(tls);
    }
    let inner = match err.downcast_ref::<io::Error>() {
        Some(io) => io
            .get_ref()
            .map(|e| e as &(dyn std::error::Error + 'static)),
        None => err.source(),
    };
    inner.and_then(tls_error)
}

/// The request's target: the path (origin form), or through a proxy to `http://` the whole
/// URL (absolute form).
pub(crate) fn request_uri(dest: &Dest, conn: &Connection) -> Uri {
    match conn.absolute_form {
        Some(_) => dest.uri.clone(),
        None => dest
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .parse()
            .unwrap_or_else(|_| Uri::from_static("/")),
    }
}

/// A GET on a connection of its own (the model list, beside the runs): the body of a 2xx
/// answer, at most `max` bytes; else why not. Unbounded in time: the caller holds the deadline.
pub(crate) async fn get(
    way: &Way,
    url: &str,
    mut headers: hyper::HeaderMap,
    max: usize,
) -> Result<Vec<u8>, String> {
    use http_body_util::BodyExt;
    let dest = Dest::parse(url).map_err(|e| e.describe("").1)?;
    let conn = open(way, &dest, &mut Setup::default())
        .await
        .map_err(|e| e.describe(&dest.addr()).1)?;
    complete(&mut headers, &dest, &conn);
    let mut request = hyper::Request::new(http_body_util::Empty::<bytes::Bytes>::new());
    *request.uri_mut() = request_uri(&dest, &conn);
    *request.headers_mut() = headers;
    let (mut sender, driver) = hyper::client::conn::http1::handshake(TokioIo::new(conn.io))
        .await
        .map_err(|e| error_chain(&e))?;
    tokio::spawn(driver);
    let resp = sender
        .send_request(request)
        .await
        .map_err(|e| error_chain(&e))?;
    if !resp.status().is_success() {
        return Err(format!("HTTP {}", resp.status()));
    }
    let mut body = resp.into_body();
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.map_err(|e| error_chain(&e))?.into_data() {
            if out.len() + data.len() > max {
                return Err(format!("the body is over {max} bytes"));
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(out)
}

/// The headers every request carries that the caller did not set: `Host` and the user agent;
/// through a proxy to `http://`, the proxy's credentials.
pub(crate) fn complete(headers: &mut hyper::HeaderMap, dest: &Dest, conn: &Connection) {
    if let Some(host) = dest.host_header() {
        headers.insert(HOST, host);
    }
    if !headers.contains_key(USER_AGENT) {
        headers.insert(USER_AGENT, HeaderValue::from_static(AGENT));
    }
    if let Some(Some(auth)) = &conn.absolute_form {
        headers.insert(PROXY_AUTHORIZATION, auth.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_destination_is_its_host_port_and_host_header() {
        let d = Dest::parse("https://[::1]:8443/v1/chat/completions?x=1").unwrap();
        assert_eq!((d.host.as_str(), d.port, d.https), ("::1", 8443, true));
        assert_eq!(d.addr(), "[::1]:8443");
        assert_eq!(d.host_header().unwrap(), "[::1]:8443");
        let d = Dest::parse("http://user:pw@llm.example/v1").unwrap();
        assert_eq!((d.addr(), d.https), ("llm.example:80".to_string(), false));
        // The credentials stay out of the Host header.
        assert_eq!(d.host_header().unwrap(), "llm.example");
        assert!(matches!(Dest::parse("ftp://x/"), Err(ConnectError::Url(_))));
    }

    #[test]
    fn presented_names_are_shown_bare() {
        assert_eq!(bare_name("DnsName(\"a.example\")"), "a.example");
        assert_eq!(bare_name("IpAddress(10.0.0.1)"), "10.0.0.1");
        assert_eq!(bare_name("plain"), "plain");
    }
}
