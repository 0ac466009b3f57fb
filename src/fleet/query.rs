//! A PromQL instant-query client for Prometheus' HTTP API (`GET /api/v1/query`), which
//! VictoriaMetrics, Thanos Query and Mimir serve too: one query in, its vector of samples out.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::sinks::outbound::OutputClient;
use crate::tls::client::{ClientTls, MinVersion, Outbound};

/// One sample of an instant vector: its labels and its value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sample {
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

impl Sample {
    /// The value of `label`, or "" when the sample has none (as PromQL reads a missing label).
    pub(crate) fn label(&self, label: &str) -> &str {
        self.labels.get(label).map_or("", String::as_str)
    }
}

/// Why a query gave no vector.
#[derive(Debug, thiserror::Error)]
pub(crate) enum QueryError {
    #[error("the store at {url} did not answer: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("the store at {url} answered HTTP {status}: {error}")]
    Refused {
        url: String,
        status: u16,
        error: String,
    },
    #[error(
        "the store at {url} answered something that is not a Prometheus API response: {reason}"
    )]
    Malformed { url: String, reason: String },
}

#[derive(Deserialize)]
struct Envelope {
    status: String,
    #[serde(default)]
    data: Option<Data>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
}

#[derive(Deserialize)]
#[serde(tag = "resultType", content = "result", rename_all = "lowercase")]
enum Data {
    Vector(Vec<VectorSample>),
    Scalar((f64, String)),
    Matrix(Vec<MatrixSeries>),
    String(serde::de::IgnoredAny),
}

#[derive(Deserialize)]
struct MatrixSeries {
    metric: BTreeMap<String, String>,
    values: Vec<(f64, String)>,
}

/// One series of a range vector: its labels and the times (Unix seconds) of its raw samples
/// in the range, oldest first.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Series {
    pub labels: BTreeMap<String, String>,
    pub times: Vec<f64>,
}

#[derive(Deserialize)]
struct VectorSample {
    metric: BTreeMap<String, String>,
    value: (f64, String),
}

/// How the page reaches the store: the `--prometheus-*` TLS and proxy flags, the names and
/// meanings of a `tls:` block and `proxy_url`.
#[derive(Debug, Clone, Default)]
pub(crate) struct StoreConnection {
    pub ca_file: Option<PathBuf>,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    pub server_name: Option<String>,
    pub insecure_skip_verify: bool,
    pub proxy_url: Option<String>,
}

impl StoreConnection {
    /// Checked as the config checks a `tls:` block: each file read now, so a missing or
    /// mismatched one is an error that names its flag.
    pub(crate) fn outbound(self) -> Result<Outbound, String> {
        let proxy_url = match &self.proxy_url {
            Some(p) => Some(proxy(p)?),
            None => None,
        };
        if let Some(n) = &self.server_name {
            if rustls::pki_types::ServerName::try_from(n.as_str()).is_err() {
                return Err(format!(
                    "--prometheus-server-name {n:?} is not a DNS name or an IP address"
                ));
            }
        }
        match (&self.cert_file, &self.key_file) {
            (Some(_), None) => return Err("--prometheus-cert-file needs --prometheus-key-file (the client certificate's private key)".into()),
            (None, Some(_)) => return Err("--prometheus-key-file needs --prometheus-cert-file (the client certificate it belongs to)".into()),
            _ => {}
        }
        for (flag, file) in [
            ("--prometheus-ca-file", &self.ca_file),
            ("--prometheus-cert-file", &self.cert_file),
        ] {
            if let Some(f) = file {
                crate::tls::pem::certificates(f).map_err(|e| format!("{flag}: {e}"))?;
            }
        }
        if let Some(k) = &self.key_file {
            crate::tls::pem::private_key(k).map_err(|e| format!("--prometheus-key-file: {e}"))?;
        }
        let any = self.ca_file.is_some()
            || self.cert_file.is_some()
            || self.server_name.is_some()
            || self.insecure_skip_verify;
        let tls = any.then(|| {
            ClientTls::new(
                self.ca_file,
                self.cert_file,
                self.key_file,
                self.server_name,
                self.insecure_skip_verify,
                MinVersion::default(),
            )
        });
        if let Some(t) = &tls {
            t.validate().map_err(|e| format!("--prometheus TLS: {e}"))?;
        }
        Ok(Outbound {
            tls,
            proxy_url,
            no_proxy: None,
        })
    }
}

/// An `http://` proxy with a host, as `proxy_url` is checked.
fn proxy(text: &str) -> Result<url::Url, String> {
    match url::Url::parse(text) {
        Ok(u) if u.scheme() == "http" && u.host().is_some() => Ok(u),
        Ok(u) if u.scheme() == "https" => Err("--prometheus-proxy-url must be an http:// proxy: an https:// store is still encrypted end to end, through a CONNECT tunnel".into()),
        _ => Err(format!("--prometheus-proxy-url {text:?} is not an http:// URL with a host")),
    }
}

/// A client for one store's query API.
#[derive(Debug, Clone)]
pub(crate) struct Client {
    /// Made again when a client certificate rotates.
    http: Arc<OutputClient>,
    outbound: Outbound,
    /// The base URL, without a trailing slash: the API is `<base>/api/v1/query`.
    base: String,
    timeout: Duration,
}

impl Client {
    /// A client for the store at `base` (http or https, no credentials in it).
    pub(crate) fn new(base: &str, timeout: Duration, outbound: Outbound) -> Result<Client, String> {
        let url = url::Url::parse(base).map_err(|e| format!("--prometheus {base:?}: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "--prometheus must be an http or https URL, not {}:",
                url.scheme()
            ));
        }
        if !url.username().is_empty() || url.password().is_some() {
            // The URL is shown on the page and in errors: a password in it would leak there.
            return Err("--prometheus must not carry credentials (user:password@): put the page behind a proxy that adds them".into());
        }
        let http = Arc::new(OutputClient::default());
        // Made once now, so a TLS setting that cannot work is an error at start.
        http.get(&outbound)
            .map_err(|e| format!("--prometheus {base}: {e}"))?;
        Ok(Client {
            http,
            outbound,
            base: base.trim_end_matches('/').to_string(),
            timeout,
        })
    }

    /// The store's base URL, as the page names it.
    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    /// The instant vector `query` evaluates to now. A scalar comes back as one sample without
    /// labels; a range vector or a string is an error.
    pub(crate) async fn vector(&self, query: &str) -> Result<Vec<Sample>, QueryError> {
        match self.data(query, None).await? {
            Got::Vector(v) => Ok(v),
            Got::Matrix(_) => Err(self.malformed(format!("no instant vector for {query}"))),
        }
    }

    /// The instant vector `query` evaluated at `at` (Unix seconds), as it stood then.
    pub(crate) async fn vector_at(&self, query: &str, at: f64) -> Result<Vec<Sample>, QueryError> {
        match self.data(query, Some(at)).await? {
            Got::Vector(v) => Ok(v),
            Got::Matrix(_) => Err(self.malformed(format!("no instant vector for {query}"))),
        }
    }

    /// The raw samples' times of the range vector `query` (a selector with a `[range]`).
    pub(crate) async fn series(&self, query: &str) -> Result<Vec<Series>, QueryError> {
        match self.data(query, None).await? {
            Got::Matrix(m) => Ok(m),
            Got::Vector(_) => Err(self.malformed(format!("no range vector for {query}"))),
        }
    }

    fn malformed(&self, reason: String) -> QueryError {
        QueryError::Malformed {
            url: self.base.clone(),
            reason,
        }
    }

    async fn data(&self, query: &str, at: Option<f64>) -> Result<Got, QueryError> {
        let url = format!("{}/api/v1/query", self.base);
        let timeout = format!("{}ms", self.timeout.as_millis());
        let mut params = vec![("query", query.to_string()), ("timeout", timeout)];
        if let Some(at) = at {
            params.push(("time", format!("{at:.3}")));
        }
        let http = self
            .http
            .get(&self.outbound)
            .map_err(|e| QueryError::Unreachable {
                url: self.base.clone(),
                reason: e.to_string(),
            })?;
        let response = http
            .get(&url)
            .timeout(self.timeout)
            .query(&params)
            .send()
            .await
            .map_err(|e| QueryError::Unreachable {
                url: self.base.clone(),
                reason: crate::util::error_chain(&e.without_url()),
            })?;
        let status = response.status();
        let body = response.text().await.map_err(|e| QueryError::Unreachable {
            url: self.base.clone(),
            reason: crate::util::error_chain(&e.without_url()),
        })?;
        let envelope: Envelope = match serde_json::from_str(&body) {
            Ok(e) => e,
            Err(e) if status.is_success() => {
                return Err(QueryError::Malformed {
                    url: self.base.clone(),
                    reason: e.to_string(),
                })
            }
            Err(_) => {
                return Err(QueryError::Refused {
                    url: self.base.clone(),
                    status: status.as_u16(),
                    error: crate::util::clip(body.trim()),
                })
            }
        };
        if envelope.status != "success" || !status.is_success() {
            let kind = envelope.error_type.unwrap_or_default();
            let error = envelope.error.unwrap_or_default();
            return Err(QueryError::Refused {
                url: self.base.clone(),
                status: status.as_u16(),
                error: format!("{kind}: {error} (query: {query})"),
            });
        }
        let malformed = |reason: String| self.malformed(reason);
        match envelope.data {
            Some(Data::Vector(v)) => v
                .into_iter()
                .map(|s| {
                    let value = parse_value(&s.value.1).map_err(&malformed)?;
                    Ok(Sample {
                        labels: s.metric,
                        value,
                    })
                })
                .collect::<Result<_, _>>()
                .map(Got::Vector),
            Some(Data::Scalar((_, v))) => Ok(Got::Vector(vec![Sample {
                labels: BTreeMap::new(),
                value: parse_value(&v).map_err(&malformed)?,
            }])),
            Some(Data::Matrix(m)) => Ok(Got::Matrix(
                m.into_iter()
                    .map(|s| Series {
                        labels: s.metric,
                        times: s.values.into_iter().map(|(t, _)| t).collect(),
                    })
                    .collect(),
            )),
            Some(Data::String(_)) | None => Err(malformed(format!("no vector for {query}"))),
        }
    }
}

/// What a query gave.
enum Got {
    Vector(Vec<Sample>),
    Matrix(Vec<Series>),
}

/// A sample value as the API writes it: a decimal string, or `NaN`, `+Inf`, `-Inf`.
fn parse_value(v: &str) -> Result<f64, String> {
    match v {
        "+Inf" | "Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        "NaN" => Ok(f64::NAN),
        _ => v
            .parse()
            .map_err(|_| format!("sample value {v:?} is not a number")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_as_the_api_writes_them() {
        assert_eq!(parse_value("0.25"), Ok(0.25));
        assert_eq!(parse_value("+Inf"), Ok(f64::INFINITY));
        assert!(parse_value("NaN").is_ok_and(f64::is_nan));
        assert!(parse_value("x").is_err());
    }

    #[test]
    fn credentials_in_the_url_are_refused_without_being_repeated() {
        let e = Client::new(
            "http://u:hunter2@prom:9090",
            Duration::from_secs(1),
            Outbound::default(),
        )
        .unwrap_err();
        assert!(!e.contains("hunter2"), "{e}");
        assert!(Client::new("ftp://prom", Duration::from_secs(1), Outbound::default()).is_err());
        let c = Client::new(
            "http://prom:9090/",
            Duration::from_secs(1),
            Outbound::default(),
        )
        .unwrap();
        assert_eq!(c.base(), "http://prom:9090");
    }

    #[test]
    fn the_store_flags_are_checked_as_a_tls_block_is() {
        let dir = tempfile::tempdir().unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["prom.test".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let (ca, client_key) = (dir.path().join("ca.pem"), dir.path().join("client.key"));
        std::fs::write(&ca, cert.pem()).unwrap();
        std::fs::write(&client_key, key.serialize_pem()).unwrap();
        let err = |c: StoreConnection| c.outbound().unwrap_err();

        let none = StoreConnection::default().outbound().unwrap();
        assert!(none.tls.is_none() && none.proxy_url.is_none());
        let full = StoreConnection {
            ca_file: Some(ca.clone()),
            cert_file: Some(ca.clone()),
            key_file: Some(client_key.clone()),
            server_name: Some("prom.test".into()),
            proxy_url: Some("http://127.0.0.1:3128".into()),
            ..StoreConnection::default()
        }
        .outbound()
        .unwrap();
        assert!(full.tls.is_some() && full.proxy_url.is_some());

        let e = err(StoreConnection {
            cert_file: Some(ca.clone()),
            ..StoreConnection::default()
        });
        assert!(
            e.starts_with("--prometheus-cert-file needs --prometheus-key-file"),
            "{e}"
        );
        let e = err(StoreConnection {
            ca_file: Some(dir.path().join("gone.pem")),
            ..StoreConnection::default()
        });
        assert!(
            e.starts_with("--prometheus-ca-file: cannot read ") && e.contains("gone.pem"),
            "{e}"
        );
        let e = err(StoreConnection {
            proxy_url: Some("https://proxy:3128".into()),
            ..StoreConnection::default()
        });
        assert!(
            e.starts_with("--prometheus-proxy-url must be an http:// proxy"),
            "{e}"
        );
        let e = err(StoreConnection {
            server_name: Some("not a name".into()),
            ..StoreConnection::default()
        });
        assert!(e.contains("is not a DNS name or an IP address"), "{e}");
        // A key that is not the certificate's.
        let other = rcgen::KeyPair::generate().unwrap();
        let other_key = dir.path().join("other.key");
        std::fs::write(&other_key, other.serialize_pem()).unwrap();
        let e = err(StoreConnection {
            cert_file: Some(ca),
            key_file: Some(other_key),
            ..StoreConnection::default()
        });
        assert!(e.contains("is not the key of the certificate in"), "{e}");
    }

    #[test]
    fn a_vector_and_an_error_envelope_parse() {
        let v: Envelope = serde_json::from_str(
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"target":"t"},"value":[1.5,"1"]}]}}"#,
        )
        .unwrap();
        assert!(matches!(v.data, Some(Data::Vector(ref s)) if s.len() == 1));
        let e: Envelope = serde_json::from_str(
            r#"{"status":"error","errorType":"bad_data","error":"parse error"}"#,
        )
        .unwrap();
        assert_eq!(e.error.as_deref(), Some("parse error"));
    }

    #[test]
    fn a_range_vector_parses_into_its_sample_times() {
        let m: Envelope = serde_json::from_str(
            r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"instance":"a"},"values":[[10.5,"1"],[25.5,"1"]]}]}}"#,
        )
        .unwrap();
        let Some(Data::Matrix(series)) = m.data else {
            panic!("not a matrix")
        };
        assert_eq!(
            series[0].values.iter().map(|v| v.0).collect::<Vec<_>>(),
            [10.5, 25.5]
        );
        assert_eq!(series[0].metric["instance"], "a");
    }
}
