//! A target of `llm-canary.yaml`, validated: its address parsed into a `Url`, and the headers
//! every request to it carries (configured ones, the key, those its provider's own server asks
//! for) into a `HeaderMap`, once at load.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_saphyr::Spanned;

use super::{
    check_labels, check_name, raw, read_secret, Api, ConfigError, FieldPath, ServerKind, Source,
};
use crate::probe::flavor::{ProviderAuth, TargetField};
use crate::secret::Secret;

#[derive(Debug, Clone)]
pub struct Target {
    pub name: String,
    /// Without a trailing `/`: a flavor's path is appended to it ([`Target::endpoint`]).
    pub base_url: reqwest::Url,
    pub api: Api,
    pub server: ServerKind,
    pub model: String,
    pub labels: BTreeMap<String, String>,
    pub api_key: Option<Secret>,
    /// What every request to the target carries: its configured headers and its key (marked
    /// sensitive, so it never prints).
    pub headers: reqwest::header::HeaderMap,
    /// `priority:`, read for the target's server kind.
    pub priority: Option<super::Priority>,
    /// Objectives `rules` turns into burn-rate alerts (`slo:`).
    pub slo: Option<super::Slo>,
    /// What its tokens cost (`price:`), for `check`'s estimate.
    pub price: Option<super::Price>,
    /// What a Bedrock target's requests are signed with (none with a Bedrock API key).
    pub aws: Option<super::AwsAuth>,
    /// The `api-version` an Azure OpenAI target's requests name.
    pub api_version: Option<String>,
    /// Where an Azure OpenAI target's Entra ID tokens come from (`entra:`), in place of a key.
    pub entra: Option<Arc<crate::cloud::entra::Entra>>,
    /// Its `tls:` block and proxy.
    pub outbound: crate::tls::client::Outbound,
}

impl Target {
    /// Every secret its requests carry: the key, or the AWS credentials, for errors to be
    /// cleaned of before they are kept.
    pub fn secrets(&self) -> impl Iterator<Item = &Secret> {
        let aws = self.aws.iter().flat_map(|a| a.credentials.known_secrets());
        let entra = self.entra.iter().filter_map(|e| e.known_secret());
        self.api_key.iter().chain(aws).chain(entra)
    }

    /// The header its key goes in (the only sensitive one), for `check` to name.
    pub fn key_header(&self) -> Option<&HeaderName> {
        self.headers
            .iter()
            .find(|(_, v)| v.is_sensitive())
            .map(|(k, _)| k)
    }

    /// How its provider's own server takes its key, when the target is on it: its `server:`
    /// names the provider, or its `base_url` is on the API's provider's own host.
    pub fn provider_auth(&self) -> Option<ProviderAuth> {
        provider_auth(self.api, self.server, &self.base_url)
    }

    /// `base_url` with `path` (`/chat/completions`, `/models` ...) appended.
    pub fn endpoint(&self, path: &str) -> String {
        format!("{}{path}", self.base_url.as_str().trim_end_matches('/'))
    }
}

pub(super) fn load_target(
    src: &Source,
    at: &FieldPath,
    t: raw::RawTarget,
    base: &Path,
    agent_labels: &BTreeMap<String, String>,
) -> Result<Target, ConfigError> {
    check_name(src, &at.key("name"), &t.name, "target")?;
    let base_url = base_url(src, &at.key("base_url"), &t.base_url)?;
    let mut labels = BTreeMap::new();
    if let Some(l) = t.labels {
        let labels_field = at.key("labels");
        check_labels(src, &labels_field, &l)?;
        if let Some(k) = l.value.keys().find(|k| agent_labels.contains_key(*k)) {
            return Err(src.err(
                &labels_field,
                l.referenced,
                format!("label {k:?} is already set under agent.labels"),
            ));
        }
        labels = l.value;
    }
    let key_at = match (&t.api_key_file, &t.api_key_env) {
        (Some(f), _) => Some((at.key("api_key_file"), f.referenced)),
        (None, Some(e)) => Some((at.key("api_key_env"), e.referenced)),
        (None, None) => None,
    };
    let api_key = read_secret(src, at, t.api_key_env, t.api_key_file, base, "api_key")?;
    let server = t.server.unwrap_or(ServerKind::Generic);
    let api = t.api.unwrap_or_default();
    if let Err(e) = api.flavor().check_target(&t.model.value, &base_url) {
        let (field, location) = match e.field {
            TargetField::Model => ("model", t.model.referenced),
            TargetField::BaseUrl => ("base_url", t.base_url.referenced),
        };
        return Err(src.err(&at.key(field), location, e.message));
    }
    let has_key = api_key.is_some();
    let aws = super::aws::for_target(
        src,
        at,
        api,
        t.aws,
        has_key,
        &base_url,
        base,
        t.name.referenced,
    )?;
    let api_version = super::azure::api_version(src, at, api, t.api_version)?;
    let entra = super::azure::entra(src, at, api, t.entra, has_key, base)?;
    let mut headers = match t.headers {
        Some(h) => configured_headers(src, &at.key("headers"), h)?,
        None => HeaderMap::new(),
    };
    // The provider's own server takes the key its way (and the headers it asks for) whatever
    // `server:` says on its own host; any other server speaking the same API (vLLM, llama.cpp)
    // takes a bearer token unless told.
    let provider = provider_auth(api, server, &base_url);
    for (name, value) in provider.iter().flat_map(|p| p.headers) {
        headers.insert(*name, HeaderValue::from_static(value));
    }
    if let (Some(key), Some((field, referenced))) = (&api_key, key_at) {
        let (name, value) = key_header(api, provider, key).ok_or_else(|| {
            src.err(
                &field,
                referenced,
                "the api key is not a valid HTTP header value: it holds a line break or another control character",
            )
        })?;
        headers.insert(name, value);
    }
    let priority =
        super::priority::load_priority(src, at, server, t.priority, t.priority_low_values_first)?;
    let slo = t
        .slo
        .map(|s| super::slo::load_slo(src, &at.key("slo"), s))
        .transpose()?;
    let outbound = super::tls::load_outbound(src, at, super::tls::outbound_keys!(t), base)?;
    let price = t
        .price
        .map(|p| super::price::load_price(src, &at.key("price"), p))
        .transpose()?;
    Ok(Target {
        name: t.name.value,
        base_url,
        api,
        server,
        model: t.model.value,
        labels,
        api_key,
        headers,
        priority,
        slo,
        price,
        aws,
        api_version,
        entra,
        outbound,
    })
}

/// An http(s) URL with a host and no credentials, without its trailing `/`.
fn base_url(
    src: &Source,
    field: &FieldPath,
    text: &Spanned<String>,
) -> Result<reqwest::Url, ConfigError> {
    let err = |what: String| src.err(field, text.referenced, what);
    match reqwest::Url::parse(text.value.trim_end_matches('/')) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {
            if !u.username().is_empty() || u.password().is_some() {
                return Err(err(
                    "credentials do not belong in base_url: use api_key_env or api_key_file".into(),
                ));
            }
            Ok(u)
        }
        // International domain names are not converted (no IDNA tables in the binary).
        Err(url::ParseError::IdnaError) => Err(err(format!(
            "base_url {:?} has a host name that is not ASCII: write it in its xn-- (punycode) form",
            text.value
        ))),
        _ => Err(err(format!(
            "base_url {:?} is not an http(s) URL",
            text.value
        ))),
    }
}

/// `headers:`; a name written twice (in any case) keeps its first value.
fn configured_headers(
    src: &Source,
    field: &FieldPath,
    h: Spanned<BTreeMap<String, String>>,
) -> Result<HeaderMap, ConfigError> {
    let mut headers = HeaderMap::new();
    for (k, v) in h.value {
        let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(&v),
        ) else {
            return Err(src.err(
                field,
                h.referenced,
                format!("header {k:?} is not a valid HTTP header"),
            ));
        };
        if !headers.contains_key(&name) {
            headers.insert(name, value);
        }
    }
    Ok(headers)
}

/// How the provider's own server takes a key, for a target on it: the API's provider on its
/// own host, or the provider whose server `server:` names, whatever the API.
fn provider_auth(api: Api, server: ServerKind, base_url: &reqwest::Url) -> Option<ProviderAuth> {
    let flavor = api.flavor();
    flavor
        .provider_auth()
        .filter(|_| flavor.provider_host(base_url))
        .or_else(|| crate::probe::flavor::server_auth(server.as_str()))
}

/// The header that carries `key`, marked sensitive: the API's own header when its flavor names
/// one for every server, else the provider's own on its own server (`provider`), else a bearer
/// token (vLLM and llama.cpp serving a provider's API too, and Bedrock with an API key in place
/// of SigV4). `None` when the key cannot be a header value.
fn key_header(
    api: Api,
    provider: Option<ProviderAuth>,
    key: &Secret,
) -> Option<(HeaderName, HeaderValue)> {
    let own = api.flavor().key_header().or(provider.map(|p| p.key_header));
    let (name, value) = match own {
        Some(name) => (
            HeaderName::from_static(name),
            HeaderValue::from_str(key.expose()),
        ),
        None => (
            reqwest::header::AUTHORIZATION,
            HeaderValue::from_str(&format!("Bearer {}", key.expose())),
        ),
    };
    let mut value = value.ok()?;
    value.set_sensitive(true);
    Some((name, value))
}

/// Target names as listed at `field` (a probe's or a window's `targets`): each must exist;
/// repeats are dropped.
pub(super) fn target_names(
    src: &Source,
    field: &FieldPath,
    list: &[Spanned<String>],
    targets: &[Arc<Target>],
) -> Result<Vec<String>, ConfigError> {
    let mut names: Vec<String> = Vec::new();
    for (i, t) in list.iter().enumerate() {
        if !targets.iter().any(|x| x.name == t.value) {
            return Err(src.err(
                &field.index(i),
                t.referenced,
                crate::util::unknown_name(
                    "target",
                    &t.value,
                    targets.iter().map(|x| x.name.as_str()),
                ),
            ));
        }
        if !names.contains(&t.value) {
            names.push(t.value.clone());
        }
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A target with its key in a file beside the config, loaded.
    fn load_text(extra: &str) -> Target {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("key"), "sk-test").unwrap();
        let text =
            format!("{{name: t, model: m, api_key_file: key, api: anthropic-messages, {extra}}}");
        let src = Source {
            path: Path::new("t.yaml"),
            text: &text,
        };
        let raw: raw::RawTarget = src.parse().unwrap();
        load_target(&src, &FieldPath::root(), raw, dir.path(), &BTreeMap::new()).unwrap()
    }

    /// The provider's own host takes the key its provider's way, as does a server `server:`
    /// names as the provider's; any other a bearer token.
    #[test]
    fn the_providers_own_server_takes_its_key_its_own_way_and_any_other_a_bearer_token() {
        let own = load_text("base_url: https://api.anthropic.com/v1");
        let auth = own.provider_auth().expect("the provider's host");
        let key = own.key_header().map(HeaderName::as_str);
        assert_eq!(key, Some(auth.key_header));
        for (name, value) in auth.headers {
            assert_eq!(own.headers[*name], *value);
        }
        let told = load_text("base_url: http://127.0.0.1:9/v1, server: anthropic");
        assert_eq!(told.provider_auth(), Some(auth));
        assert_eq!(told.key_header().map(HeaderName::as_str), key);
        let vllm = load_text("base_url: http://127.0.0.1:9/v1, server: vllm");
        assert_eq!(vllm.provider_auth(), None);
        assert_eq!(
            vllm.key_header().map(HeaderName::as_str),
            Some("authorization")
        );
        assert_eq!(vllm.headers.len(), 1, "the key alone");
    }
}
