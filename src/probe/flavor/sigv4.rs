//! Signing a request with AWS's SigV4 (`aws-sigv4`) for an AWS service: the credentials it
//! signs with, and the signing a flavor's `aws_signer()` does for its own service.

use std::time::SystemTime;

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

pub(crate) use crate::cloud::aws::{AwsCredentials, AwsKeys};

/// What an AWS service's request is signed with: the region, and where the keys come from (the keys
/// print as `***`).
#[derive(Debug, Clone)]
pub struct AwsAuth {
    pub region: String,
    pub credentials: AwsCredentials,
}

/// Why a request could not be signed.
#[derive(Debug, thiserror::Error)]
#[error("cannot sign the request: {0}")]
pub struct SignError(String);

/// Signs a request to `service` with SigV4 at `time`: adds `x-amz-date`, the session token
/// when there is one, and `Authorization` (both marked sensitive), over every header already in
/// `headers`.
pub(super) fn sign_for(
    service: &str,
    headers: &mut HeaderMap,
    url: &str,
    body: &[u8],
    region: &str,
    auth: &AwsKeys,
    time: SystemTime,
) -> Result<(), SignError> {
    let failed = |e: &dyn std::fmt::Display| SignError(e.to_string());
    let identity = Credentials::new(
        auth.access_key_id.expose(),
        auth.secret_access_key.expose(),
        auth.session_token.as_ref().map(|t| t.expose().to_string()),
        None,
        "llm-canary",
    )
    .into();
    let params: aws_sigv4::http_request::SigningParams = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| failed(&e))?
        .into();
    let pairs = headers
        .iter()
        .filter_map(|(k, v)| Some((k.as_str(), v.to_str().ok()?)));
    let request = SignableRequest::new("POST", url, pairs, SignableBody::Bytes(body))
        .map_err(|e| failed(&e))?;
    let (instructions, _signature) = sign(request, &params).map_err(|e| failed(&e))?.into_parts();
    let (added, _params) = instructions.into_parts();
    for h in added {
        let mut value = HeaderValue::from_str(h.value()).map_err(|e| failed(&e))?;
        value.set_sensitive(h.sensitive() || h.name() == "authorization");
        headers.insert(HeaderName::from_static(h.name()), value);
    }
    Ok(())
}
