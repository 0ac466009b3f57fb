//! The web config file as the exporter-toolkit writes it: serde structs that reject unknown
//! keys, each value with its position for the errors.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_saphyr::Spanned;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawWeb {
    pub tls_server_config: Option<Spanned<RawTls>>,
    pub http_server_config: Option<RawHttp>,
    pub basic_auth_users: Option<BTreeMap<String, Spanned<String>>>,
    pub rate_limit: Option<Spanned<RawRateLimit>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRateLimit {
    pub interval: Option<Spanned<String>>,
    pub burst: Option<Spanned<i64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTls {
    pub cert: Option<Spanned<String>>,
    pub key: Option<Spanned<String>>,
    pub client_ca: Option<Spanned<String>>,
    pub cert_file: Option<Spanned<String>>,
    pub key_file: Option<Spanned<String>>,
    pub client_auth_type: Option<Spanned<String>>,
    pub client_ca_file: Option<Spanned<String>>,
    pub client_allowed_sans: Option<Spanned<Vec<String>>>,
    pub min_version: Option<Spanned<String>>,
    pub max_version: Option<Spanned<String>>,
    pub cipher_suites: Option<Vec<Spanned<String>>>,
    pub prefer_server_cipher_suites: Option<bool>,
    pub curve_preferences: Option<Vec<Spanned<String>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHttp {
    pub http2: Option<Spanned<bool>>,
    pub headers: Option<BTreeMap<String, Spanned<String>>>,
}
