//! Reading a web config file: parsed strictly, then validated whole (certificates read and
//! matched to their key, hashes parsed, headers checked) into a [`WebConfig`], every refusal
//! one sentence with file, line, column and field.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use serde_saphyr::{Location, Spanned};

use super::rate::Limiter;
use super::raw::{RawHttp, RawRateLimit, RawTls, RawWeb};
use super::users::Users;
use crate::config::{ConfigError, FieldPath, Source};
use crate::tls::server::{self, ClientAuth, Pem, ServerTlsError, ServerTlsSettings, Version};

/// A web config file, validated: its TLS made (certificates read, key matched), its users'
/// hashes parsed, its headers checked.
pub(crate) struct WebConfig {
    /// The server's TLS; `None` serves plain HTTP.
    pub(super) tls: Option<Arc<rustls::ServerConfig>>,
    pub(super) users: Users,
    pub(super) headers: HeaderMap,
    /// `rate_limit`, if one is set; a re-read file starts a full bucket.
    pub(super) limiter: Option<Limiter>,
    /// The file and every file it names: a change to any of them is a new config.
    pub(super) watched: Vec<PathBuf>,
}

impl WebConfig {
    /// Whether the endpoints speak TLS.
    pub(crate) fn tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Whether requests need a user and password.
    pub(crate) fn basic_auth(&self) -> bool {
        !self.users.is_empty()
    }
}

/// The response headers the toolkit lets a web config set, with the values it accepts (none
/// listed: any). Any other header is refused: what a server must compute (`Content-Length`)
/// or what auth owns (`WWW-Authenticate`) cannot be overridden by configuration.
const HEADERS: [(&str, &[&str]); 5] = [
    ("Strict-Transport-Security", &[]),
    ("X-Content-Type-Options", &["nosniff"]),
    ("X-Frame-Options", &["deny", "sameorigin"]),
    ("X-XSS-Protection", &[]),
    ("Content-Security-Policy", &[]),
];

/// Reads and validates the web config at `path`; relative paths in it are relative to its
/// folder, as the toolkit reads them.
pub(crate) fn load(path: &Path) -> Result<WebConfig, ConfigError> {
    let text = crate::config::read(path)?;
    let src = Source { path, text: &text };
    // An empty file is valid to the toolkit: plain HTTP, no auth.
    let raw: RawWeb = if !src.is_blank() {
        src.parse()?
    } else {
        RawWeb::default()
    };
    let base = path.parent().unwrap_or(Path::new("."));
    let root = FieldPath::root();
    let limiter = match raw.rate_limit {
        Some(r) => rate_limit(&src, &root.key("rate_limit"), r)?,
        None => None,
    };
    let mut watched = vec![path.to_path_buf()];
    let tls = match raw.tls_server_config {
        Some(t) => load_tls(&src, &root.key("tls_server_config"), t, base, &mut watched)?,
        None => None,
    };
    let headers = load_http(
        &src,
        &root.key("http_server_config"),
        raw.http_server_config,
    )?;
    let users = Users::load(&src, &root.key("basic_auth_users"), raw.basic_auth_users)?;
    Ok(WebConfig {
        tls,
        users,
        headers,
        limiter,
        watched,
    })
}

/// `rate_limit`: `interval` (a duration; `0` or none turns it off) and `burst` (at least 1:
/// with none saved up, the toolkit would refuse every request).
fn rate_limit(
    src: &Source,
    at: &FieldPath,
    raw: Spanned<RawRateLimit>,
) -> Result<Option<Limiter>, ConfigError> {
    let every = match &raw.value.interval {
        Some(i) if i.value.trim() == "0" => Duration::ZERO,
        Some(i) => crate::config::duration::parse_duration(&i.value)
            .map_err(|e| src.err(&at.key("interval"), i.referenced, e))?,
        None => Duration::ZERO,
    };
    if every.is_zero() {
        return Ok(None);
    }
    let burst = match &raw.value.burst {
        Some(b) if (1..=i64::from(u32::MAX)).contains(&b.value) => b.value as u32,
        Some(b) => {
            return Err(src.err(
                &at.key("burst"),
                b.referenced,
                format!(
                    "burst must be at least 1, found {}: with none, every request would be refused",
                    b.value
                ),
            ))
        }
        None => {
            return Err(src.err(
                at,
                raw.referenced,
                "missing burst: how many requests may come at once (at least 1)",
            ))
        }
    };
    Ok(Some(Limiter::new(every, burst, Instant::now())))
}

/// `http_server_config`: HTTP/1.1 only, and the headers the toolkit allows.
fn load_http(src: &Source, at: &FieldPath, raw: Option<RawHttp>) -> Result<HeaderMap, ConfigError> {
    let mut out = HeaderMap::new();
    let Some(raw) = raw else { return Ok(out) };
    if let Some(h2) = raw.http2.filter(|h| h.value) {
        return Err(src.err(
            &at.key("http2"),
            h2.referenced,
            "HTTP/2 is not served here: the endpoints speak HTTP/1.1; set http2: false or remove the key",
        ));
    }
    for (name, value) in raw.headers.unwrap_or_default() {
        let field = at.key("headers").key(&name);
        let Some((canonical, allowed)) =
            HEADERS.iter().find(|(h, _)| h.eq_ignore_ascii_case(&name))
        else {
            let names: Vec<&str> = HEADERS.iter().map(|(h, _)| *h).collect();
            return Err(src.err(
                &field,
                value.referenced,
                format!(
                    "HTTP header {name:?} cannot be configured; these can: {}",
                    names.join(", ")
                ),
            ));
        };
        if value.value.is_empty() {
            // Blank means unset, as in the toolkit.
            continue;
        }
        if !allowed.is_empty() && !allowed.contains(&value.value.as_str()) {
            return Err(src.err(
                &field,
                value.referenced,
                format!(
                    "{canonical} must be one of {}, found {:?}",
                    allowed.join(", "),
                    value.value
                ),
            ));
        }
        let v = HeaderValue::from_str(&value.value).map_err(|_| {
            src.err(
                &field,
                value.referenced,
                "a header value must be visible ASCII on one line",
            )
        })?;
        out.insert(
            HeaderName::from_bytes(canonical.as_bytes())
                .expect("the allowed headers are valid names"),
            v,
        );
    }
    Ok(out)
}

/// A TLS version as the toolkit names it. TLS10 and TLS11 as a minimum mean the lowest this
/// server speaks, TLS 1.2.
fn version(src: &Source, at: &FieldPath, v: &Spanned<String>) -> Result<Version, ConfigError> {
    match v.value.as_str() {
        "TLS10" | "TLS11" | "TLS12" => Ok(Version::Tls12),
        "TLS13" => Ok(Version::Tls13),
        other => Err(src.err(
            at,
            v.referenced,
            format!("{other:?} is not a TLS version: write TLS10, TLS11, TLS12 or TLS13"),
        )),
    }
}

/// A PEM source named by `file` (a path, relative to the web config's folder) or written
/// inline; one of the two, as the toolkit requires for the certificate and key.
fn pem_source(
    src: &Source,
    at: &FieldPath,
    (inline_key, inline): (&str, Option<Spanned<String>>),
    (file_key, file): (&str, Option<Spanned<String>>),
    base: &Path,
    watched: &mut Vec<PathBuf>,
) -> Result<Option<(Pem, FieldPath, Location)>, ConfigError> {
    match (inline, file) {
        (Some(_), Some(f)) => Err(src.err(
            &at.key(file_key),
            f.referenced,
            format!("set {inline_key} or {file_key}, not both"),
        )),
        (Some(i), None) => Ok(Some((
            Pem::Inline(i.value),
            at.key(inline_key),
            i.referenced,
        ))),
        (None, Some(f)) => {
            let p = base.join(&f.value);
            watched.push(p.clone());
            Ok(Some((Pem::File(p), at.key(file_key), f.referenced)))
        }
        (None, None) => Ok(None),
    }
}

fn load_tls(
    src: &Source,
    at: &FieldPath,
    raw: Spanned<RawTls>,
    base: &Path,
    watched: &mut Vec<PathBuf>,
) -> Result<Option<Arc<rustls::ServerConfig>>, ConfigError> {
    let (t, whole) = (raw.value, raw.referenced);
    let client_auth = match &t.client_auth_type {
        Some(c) => ClientAuth::from_name(&c.value).ok_or_else(|| {
            src.err(
                &at.key("client_auth_type"),
                c.referenced,
                format!(
                    "{:?} is not a client_auth_type: write one of {}",
                    c.value,
                    ClientAuth::NAMES.join(", ")
                ),
            )
        })?,
        None => ClientAuth::No,
    };
    let cert = pem_source(
        src,
        at,
        ("cert", t.cert),
        ("cert_file", t.cert_file),
        base,
        watched,
    )?;
    let key = pem_source(
        src,
        at,
        ("key", t.key),
        ("key_file", t.key_file),
        base,
        watched,
    )?;
    let ca = pem_source(
        src,
        at,
        ("client_ca", t.client_ca),
        ("client_ca_file", t.client_ca_file),
        base,
        watched,
    )?;
    // The toolkit's rule: any of these turns TLS on; then a certificate and key are required.
    if cert.is_none() && key.is_none() && ca.is_none() && t.client_auth_type.is_none() {
        return Ok(None);
    }
    let Some((cert, cert_field, cert_at)) = cert else {
        return Err(src.err(at, whole, "missing one of cert or cert_file"));
    };
    let Some((key, key_field, key_at)) = key else {
        return Err(src.err(at, whole, "missing one of key or key_file"));
    };
    if let (Some((_, f, l)), ClientAuth::No) = (&ca, client_auth) {
        return Err(src.err(
            f,
            *l,
            "a client CA is set without a client_auth_type to use it (VerifyClientCertIfGiven or RequireAndVerifyClientCert)",
        ));
    }
    if client_auth.verifies() && ca.is_none() {
        let c = t.client_auth_type.as_ref().map_or(whole, |c| c.referenced);
        return Err(src.err(
            &at.key("client_auth_type"),
            c,
            "this policy checks client certificates against a CA: set client_ca_file",
        ));
    }
    if let Some(s) = &t.client_allowed_sans {
        if !matches!(
            client_auth,
            ClientAuth::RequireAny | ClientAuth::RequireAndVerify
        ) {
            return Err(src.err(
                &at.key("client_allowed_sans"),
                s.referenced,
                "client_allowed_sans requires client_auth_type to be one of RequireAnyClientCert or RequireAndVerifyClientCert",
            ));
        }
    }
    let min = match &t.min_version {
        Some(v) => version(src, &at.key("min_version"), v)?,
        None => Version::Tls12,
    };
    let max = match &t.max_version {
        Some(v) if matches!(v.value.as_str(), "TLS10" | "TLS11") => {
            return Err(src.err(
                &at.key("max_version"),
                v.referenced,
                format!(
                    "max_version {} is below TLS 1.2, the lowest this server speaks: write TLS12 or TLS13",
                    v.value
                ),
            ))
        }
        Some(v) => version(src, &at.key("max_version"), v)?,
        None => Version::Tls13,
    };
    if min > max {
        let v = t.min_version.as_ref().map_or(whole, |v| v.referenced);
        return Err(src.err(
            &at.key("min_version"),
            v,
            "min_version is above max_version",
        ));
    }
    let names = |list: &Option<Vec<Spanned<String>>>| {
        list.as_ref()
            .map(|l| l.iter().map(|s| s.value.clone()).collect::<Vec<_>>())
    };
    let settings = ServerTlsSettings {
        cert,
        key,
        client_auth,
        client_ca: ca.as_ref().map(|(p, _, _)| p.clone()),
        min_version: min,
        max_version: max,
        cipher_suites: names(&t.cipher_suites),
        curves: names(&t.curve_preferences),
        prefer_server_order: t.prefer_server_cipher_suites.unwrap_or(true),
        allowed_sans: t.client_allowed_sans.as_ref().map(|s| s.value.clone()),
    };
    let config = server::server_config(&settings).map_err(|e| {
        let (field, loc) = match &e {
            ServerTlsError::Cert(_) => (cert_field.clone(), cert_at),
            ServerTlsError::Key(_) => (key_field.clone(), key_at),
            ServerTlsError::ClientCa(_) => match &ca {
                Some((_, f, l)) => (f.clone(), *l),
                None => (at.clone(), whole),
            },
            ServerTlsError::CipherSuite(i, _) => {
                spanned_at(at, "cipher_suites", &t.cipher_suites, *i, whole)
            }
            ServerTlsError::Curve(i, _) => {
                spanned_at(at, "curve_preferences", &t.curve_preferences, *i, whole)
            }
            ServerTlsError::Versions(_) => (at.key("min_version"), whole),
        };
        src.err(&field, loc, e.to_string())
    })?;
    Ok(Some(Arc::new(config)))
}

/// The field and position of item `i` of the list at `key`.
fn spanned_at(
    at: &FieldPath,
    key: &str,
    list: &Option<Vec<Spanned<String>>>,
    i: usize,
    whole: Location,
) -> (FieldPath, Location) {
    let loc = list
        .as_ref()
        .and_then(|l| l.get(i))
        .map_or(whole, |s| s.referenced);
    (at.key(key).index(i), loc)
}
