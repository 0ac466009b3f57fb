//! `tls:`, `proxy_url` and `no_proxy` on a target and on each output (push, remote-write, OTLP):
//! Prometheus' names and meanings. The files are read here once, so a missing or mismatched one
//! is an error at its key; the connection reads them again whenever they change.

use std::path::Path;

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::{ConfigError, FieldPath, Source};
use crate::tls::client::{ClientTls, MinVersion, Outbound};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTls {
    pub ca_file: Option<Spanned<String>>,
    pub cert_file: Option<Spanned<String>>,
    pub key_file: Option<Spanned<String>>,
    pub server_name: Option<Spanned<String>>,
    pub insecure_skip_verify: Option<bool>,
    pub min_version: Option<Spanned<String>>,
}

/// The keys of one mapping (a target, `push:` ...) that say how to connect.
pub(super) struct OutboundKeys {
    pub tls: Option<Spanned<RawTls>>,
    pub proxy_url: Option<Spanned<String>>,
    pub no_proxy: Option<Spanned<String>>,
}

/// The connection keys of a raw mapping (a target, `push:`, `remote_write:`, `otlp:` write
/// them alike; serde cannot flatten them into a mapping that refuses unknown keys).
macro_rules! outbound_keys {
    ($raw:expr) => {
        $crate::config::tls::OutboundKeys {
            tls: $raw.tls,
            proxy_url: $raw.proxy_url,
            no_proxy: $raw.no_proxy,
        }
    };
}
pub(super) use outbound_keys;

pub(super) fn load_outbound(
    src: &Source,
    at: &FieldPath,
    keys: OutboundKeys,
    base: &Path,
) -> Result<Outbound, ConfigError> {
    let tls = keys
        .tls
        .map(|t| load_tls(src, &at.key("tls"), t, base))
        .transpose()?;
    let proxy_url = match keys.proxy_url {
        Some(p) => Some(proxy(src, &at.key("proxy_url"), &p)?),
        None => None,
    };
    if let (Some(n), None) = (&keys.no_proxy, &proxy_url) {
        return Err(src.err(
            &at.key("no_proxy"),
            n.referenced,
            "no_proxy needs proxy_url (without one, the NO_PROXY environment variable applies)",
        ));
    }
    Ok(Outbound {
        tls,
        proxy_url,
        no_proxy: keys.no_proxy.map(|n| n.value),
    })
}

/// An `http://` proxy with a host (and, if it needs them, credentials in the URL).
fn proxy(src: &Source, field: &FieldPath, text: &Spanned<String>) -> Result<url::Url, ConfigError> {
    match url::Url::parse(&text.value) {
        Ok(u) if u.scheme() == "http" && u.host().is_some() => Ok(u),
        Ok(u) if u.scheme() == "https" => Err(src.err(
            field,
            text.referenced,
            "proxy_url must be an http:// proxy: HTTPS targets are still encrypted end to end, through a CONNECT tunnel",
        )),
        _ => Err(src.err(
            field,
            text.referenced,
            format!("proxy_url {:?} is not an http:// URL with a host", text.value),
        )),
    }
}

fn load_tls(
    src: &Source,
    at: &FieldPath,
    raw: Spanned<RawTls>,
    base: &Path,
) -> Result<ClientTls, ConfigError> {
    let (block, r) = (raw.referenced, raw.value);
    let path = |p: &Option<Spanned<String>>| p.as_ref().map(|p| base.join(&p.value));
    let min_version = match &r.min_version {
        None => MinVersion::default(),
        Some(v) => MinVersion::parse(&v.value).ok_or_else(|| {
            src.err(
                &at.key("min_version"),
                v.referenced,
                format!(
                    "min_version {:?} is not one of TLS10, TLS11, TLS12, TLS13",
                    v.value
                ),
            )
        })?,
    };
    if let Some(n) = &r.server_name {
        if rustls::pki_types::ServerName::try_from(n.value.as_str()).is_err() {
            return Err(src.err(
                &at.key("server_name"),
                n.referenced,
                format!(
                    "server_name {:?} is not a DNS name or an IP address",
                    n.value
                ),
            ));
        }
    }
    match (&r.cert_file, &r.key_file) {
        (Some(c), None) => {
            return Err(src.err(
                &at.key("cert_file"),
                c.referenced,
                "cert_file needs key_file (the client certificate's private key)",
            ))
        }
        (None, Some(k)) => {
            return Err(src.err(
                &at.key("key_file"),
                k.referenced,
                "key_file needs cert_file (the client certificate it belongs to)",
            ))
        }
        _ => {}
    }
    let tls = ClientTls::new(
        path(&r.ca_file),
        path(&r.cert_file),
        path(&r.key_file),
        r.server_name.map(|n| n.value),
        r.insecure_skip_verify.unwrap_or(false),
        min_version,
    );
    // Each file alone first, so the error points at its key.
    for (key, p) in [("ca_file", &r.ca_file), ("cert_file", &r.cert_file)] {
        if let Some(p) = p {
            crate::tls::pem::certificates(&base.join(&p.value))
                .map_err(|e| src.err(&at.key(key), p.referenced, e))?;
        }
    }
    if let Some(k) = &r.key_file {
        crate::tls::pem::private_key(&base.join(&k.value))
            .map_err(|e| src.err(&at.key("key_file"), k.referenced, e))?;
    }
    tls.validate().map_err(|e| {
        let (key, loc) = match (&r.key_file, &r.ca_file) {
            (Some(k), _) => ("key_file", k.referenced),
            (None, Some(c)) => ("ca_file", c.referenced),
            (None, None) => ("tls", block),
        };
        let field = if key == "tls" {
            at.clone()
        } else {
            at.key(key)
        };
        src.err(&field, loc, e)
    })?;
    Ok(tls)
}
