//! How the agent reaches its outputs (Pushgateway, remote-write, OTLP) and the fleet page's
//! Prometheus: one HTTP client per output, built from its `tls:` block and proxy and built
//! again when its TLS config changes; one POST of an encoded batch to a receiver, and what a
//! failure means: try again later, or drop it. Shared by every sender that queues.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use prost::bytes::Bytes;

use crate::config::PushAuth;
use crate::tls::client::Outbound;

/// Why an output's client could not be made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClientError {
    #[error("TLS: {0}")]
    Tls(String),
    #[error("proxy_url {url}: {reason}")]
    Proxy { url: String, reason: String },
    #[error("cannot build the HTTP client: {0}")]
    Build(String),
}

/// A client with the system's roots and the environment's proxies, for the agent's own
/// daemon (`watch`, `mcp`).
pub(crate) fn default_client() -> reqwest::Client {
    build(&Outbound::default(), None).expect("a client with static settings builds")
}

/// The client for one output, as its settings say: its TLS config in place of the system's
/// roots, and its `proxy_url` (with `no_proxy`) in place of the environment's proxies.
fn build(
    outbound: &Outbound,
    tls: Option<&rustls::ClientConfig>,
) -> Result<reqwest::Client, ClientError> {
    let mut builder = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .user_agent(concat!("llm-canary/", env!("CARGO_PKG_VERSION")));
    if let Some(tls) = tls {
        builder = builder.use_preconfigured_tls(tls.clone());
    }
    if let Some(url) = &outbound.proxy_url {
        let proxy = reqwest::Proxy::all(url.as_str()).map_err(|e| ClientError::Proxy {
            url: url.to_string(),
            reason: crate::util::error_chain(&e),
        })?;
        let no_proxy = outbound
            .no_proxy
            .as_deref()
            .and_then(reqwest::NoProxy::from_string);
        builder = builder.proxy(proxy.no_proxy(no_proxy));
    }
    builder
        .build()
        .map_err(|e| ClientError::Build(crate::util::error_chain(&e)))
}

/// One output's client, made on first use (a TLS root store is about 200 KB, which an agent
/// that sends nowhere never holds) and made again only when what it was made from changed:
/// a new TLS config (a rotated certificate, a reload) or another proxy. A reqwest client
/// keeps its TLS config for good, so this is how a rotated client certificate reaches the
/// next connection.
#[derive(Default)]
pub(crate) struct OutputClient {
    made: Mutex<Option<Made>>,
    #[cfg(test)]
    builds: std::sync::atomic::AtomicUsize,
}

impl std::fmt::Debug for OutputClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OutputClient")
    }
}

struct Made {
    /// Held so the pointer compared is never reused by another config.
    tls: Option<Arc<rustls::ClientConfig>>,
    proxy_url: Option<url::Url>,
    no_proxy: Option<String>,
    client: reqwest::Client,
}

impl OutputClient {
    /// The client for the next request to the output `outbound` describes.
    pub(crate) fn get(&self, outbound: &Outbound) -> Result<reqwest::Client, ClientError> {
        let tls = match outbound.tls_config() {
            Ok(tls) => Some(tls),
            // No `tls:` block on a system without root certificates (ca-certificates is only
            // recommended): an http:// output still works, and an https:// one fails at its
            // handshake, as before.
            Err(_) if outbound.tls.is_none() => None,
            Err(e) => return Err(ClientError::Tls(e)),
        };
        let mut made = self
            .made
            .lock()
            .expect("the output client lock is never poisoned");
        if let Some(m) = made.as_ref().filter(|m| {
            let same_tls = match (&m.tls, &tls) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            };
            same_tls && m.proxy_url == outbound.proxy_url && m.no_proxy == outbound.no_proxy
        }) {
            return Ok(m.client.clone());
        }
        let client = build(outbound, tls.as_deref())?;
        #[cfg(test)]
        self.builds
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        *made = Some(Made {
            tls,
            proxy_url: outbound.proxy_url.clone(),
            no_proxy: outbound.no_proxy.clone(),
            client: client.clone(),
        });
        Ok(client)
    }
}

/// Where and how a batch goes.
#[derive(Debug, Clone)]
pub(crate) struct Route {
    /// What the logs call this sender (`remote write`, `OTLP metrics`).
    pub what: &'static str,
    pub url: String,
    /// Content type, encoding and protocol headers.
    pub headers: &'static [(&'static str, &'static str)],
    pub auth: Option<PushAuth>,
    /// One request's deadline.
    pub timeout: Duration,
    /// The longest wait between retries while the receiver fails.
    pub max_backoff: Duration,
    /// Its `tls:` block and proxy.
    pub outbound: Outbound,
}

/// Why a request did not land.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SendError {
    /// The receiver is unreachable, overloaded (429) or failing (5xx): send it again later.
    #[error("{what} to {url}: {reason}")]
    Retry {
        what: &'static str,
        url: String,
        reason: String,
    },
    /// The receiver refused the data (4xx): resending the same bytes cannot succeed.
    #[error("{what} to {url} refused: {reason}")]
    Rejected {
        what: &'static str,
        url: String,
        reason: String,
    },
}

/// Basic or bearer auth on a request to one of the agent's outputs.
pub(crate) fn authorize(
    req: reqwest::RequestBuilder,
    auth: Option<&PushAuth>,
) -> reqwest::RequestBuilder {
    match auth {
        Some(PushAuth::Basic { username, password }) => {
            req.basic_auth(username, Some(password.expose()))
        }
        Some(PushAuth::Bearer(t)) => req.bearer_auth(t.expose()),
        None => req,
    }
}

/// One POST of a batch.
pub(crate) async fn post(
    client: &OutputClient,
    route: &Route,
    body: Bytes,
) -> Result<(), SendError> {
    let (what, url) = (route.what, &route.url);
    // A TLS file that never loaded may be fixed before the next try.
    let client = client.get(&route.outbound).map_err(|e| SendError::Retry {
        what,
        url: url.clone(),
        reason: e.to_string(),
    })?;
    let mut req = client.post(url).timeout(route.timeout).body(body);
    for (k, v) in route.headers {
        req = req.header(*k, *v);
    }
    let resp = authorize(req, route.auth.as_ref())
        .send()
        .await
        .map_err(|e| SendError::Retry {
            what,
            url: url.clone(),
            reason: crate::util::error_chain(&e),
        })?;
    let status = resp.status();
    if status.is_success() {
        return Ok(());
    }
    let body = resp.text().await.unwrap_or_default();
    let body: String = body.chars().filter(|c| !c.is_control()).take(300).collect();
    let reason = format!("HTTP {}: {}", status.as_u16(), body.trim());
    let url = url.clone();
    if status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS {
        Err(SendError::Retry { what, url, reason })
    } else {
        Err(SendError::Rejected { what, url, reason })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::tls::client::{ClientTls, MinVersion};

    fn pem(dir: &std::path::Path, stem: &str, name: &str) -> std::path::PathBuf {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec![name.to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let path = dir.join(format!("{stem}.pem"));
        std::fs::write(&path, cert.pem()).unwrap();
        path
    }

    #[test]
    fn the_client_is_made_again_only_when_its_tls_config_or_proxy_changes() {
        let dir = tempfile::tempdir().unwrap();
        let ca = pem(dir.path(), "ca", "ca.example");
        let mut outbound = Outbound {
            tls: Some(ClientTls::new(
                Some(ca.clone()),
                None,
                None,
                None,
                false,
                MinVersion::default(),
            )),
            ..Outbound::default()
        };
        let client = OutputClient::default();
        let builds = || client.builds.load(Ordering::Relaxed);
        client.get(&outbound).unwrap();
        client.get(&outbound).unwrap();
        assert_eq!(builds(), 1, "unchanged: the same client");

        // The CA bundle is replaced (another length, whatever the clock's grain).
        let other = pem(dir.path(), "other", "another-ca.example.org");
        std::fs::copy(&other, &ca).unwrap();
        client.get(&outbound).unwrap();
        client.get(&outbound).unwrap();
        assert_eq!(builds(), 2, "a changed file: one new client");

        outbound.proxy_url = Some("http://proxy.example:3128".parse().unwrap());
        client.get(&outbound).unwrap();
        outbound.no_proxy = Some("localhost".into());
        client.get(&outbound).unwrap();
        client.get(&outbound).unwrap();
        assert_eq!(builds(), 4, "another proxy or no_proxy: a new client");
    }

    #[test]
    fn a_tls_block_that_never_loaded_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let outbound = Outbound {
            tls: Some(ClientTls::new(
                Some(dir.path().join("gone.pem")),
                None,
                None,
                None,
                false,
                MinVersion::default(),
            )),
            ..Outbound::default()
        };
        let e = OutputClient::default()
            .get(&outbound)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("TLS: cannot read ") && e.contains("gone.pem"),
            "{e}"
        );
    }
}
