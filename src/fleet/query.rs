//! A PromQL instant-query client for Prometheus' HTTP API (`GET /api/v1/query`), which
//! VictoriaMetrics, Thanos Query and Mimir serve too: one query in, its vector of samples out.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

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
    Matrix(serde::de::IgnoredAny),
    String(serde::de::IgnoredAny),
}

#[derive(Deserialize)]
struct VectorSample {
    metric: BTreeMap<String, String>,
    value: (f64, String),
}

/// A client for one store's query API.
#[derive(Debug, Clone)]
pub(crate) struct Client {
    http: reqwest::Client,
    /// The base URL, without a trailing slash: the API is `<base>/api/v1/query`.
    base: String,
    timeout: Duration,
}

impl Client {
    /// A client for the store at `base` (http or https, no credentials in it).
    pub(crate) fn new(base: &str, timeout: Duration) -> Result<Client, String> {
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
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(Client {
            http,
            base: base.trim_end_matches('/').to_string(),
            timeout,
        })
    }

    /// The store's base URL, as the page names it.
    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    /// The instant vector `query` evaluates to now. A scalar comes back as one sample without
    /// labels; a range vector or a string is an error (no query of the page asks for one).
    pub(crate) async fn vector(&self, query: &str) -> Result<Vec<Sample>, QueryError> {
        let url = format!("{}/api/v1/query", self.base);
        let timeout = format!("{}ms", self.timeout.as_millis());
        let response = self
            .http
            .get(&url)
            .query(&[("query", query), ("timeout", timeout.as_str())])
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
        let malformed = |reason: String| QueryError::Malformed {
            url: self.base.clone(),
            reason,
        };
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
                .collect(),
            Some(Data::Scalar((_, v))) => Ok(vec![Sample {
                labels: BTreeMap::new(),
                value: parse_value(&v).map_err(&malformed)?,
            }]),
            Some(Data::Matrix(_) | Data::String(_)) | None => {
                Err(malformed(format!("no instant vector for {query}")))
            }
        }
    }
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
        let e = Client::new("http://u:hunter2@prom:9090", Duration::from_secs(1)).unwrap_err();
        assert!(!e.contains("hunter2"), "{e}");
        assert!(Client::new("ftp://prom", Duration::from_secs(1)).is_err());
        let c = Client::new("http://prom:9090/", Duration::from_secs(1)).unwrap();
        assert_eq!(c.base(), "http://prom:9090");
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
}
