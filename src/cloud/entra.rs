//! Microsoft Entra ID bearer tokens for Azure OpenAI (`entra:`): client credentials (a tenant,
//! an application's client id and its secret) against the tenant's token endpoint, or a managed
//! identity through the instance metadata service. Each token is held until shortly before it
//! expires ([`Refreshing`]), then fetched anew on the next request.
//!
//! Two form posts and a GET on reqwest, which the agent already has: the `azure_identity`
//! crate brings its own HTTP pipeline for these two calls (docs/dependencies.md has the count).
//! The hosts follow the Azure SDKs' variables: `AZURE_AUTHORITY_HOST` (another cloud's login
//! host) and `AZURE_POD_IDENTITY_AUTHORITY_HOST` (another metadata endpoint).

use std::time::{Duration, SystemTime};

use serde::Deserialize;

use super::refresh::Refreshing;
use super::CredentialError;
use crate::secret::Secret;

/// What Azure OpenAI's tokens are issued for.
const SCOPE: &str = "https://cognitiveservices.azure.com/.default";
const RESOURCE: &str = "https://cognitiveservices.azure.com";
const AUTHORITY: &str = "https://login.microsoftonline.com";
const IMDS: &str = "http://169.254.169.254";
/// The variables the Azure SDKs read for other hosts.
pub(crate) const AUTHORITY_HOST_ENV: &str = "AZURE_AUTHORITY_HOST";
pub(crate) const IMDS_HOST_ENV: &str = "AZURE_POD_IDENTITY_AUTHORITY_HOST";
/// How long one token request may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// How a target gets its tokens.
#[derive(Debug, Clone)]
pub enum EntraSource {
    ClientCredentials {
        tenant_id: String,
        client_id: String,
        client_secret: Secret,
    },
    /// The system-assigned identity, or the user-assigned one with this client id.
    ManagedIdentity { client_id: Option<String> },
}

/// A target's token source and its latest token.
pub struct Entra {
    source: EntraSource,
    held: Refreshing<Secret>,
}

impl std::fmt::Debug for Entra {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entra")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    /// Seconds; the metadata service writes it as a string.
    expires_in: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct ErrorAnswer {
    error: Option<String>,
}

impl Entra {
    pub fn new(source: EntraSource) -> Entra {
        Entra {
            source,
            held: Refreshing::default(),
        }
    }

    pub fn source(&self) -> &EntraSource {
        &self.source
    }

    /// The client secret, for errors to be cleaned of.
    pub fn known_secret(&self) -> Option<&Secret> {
        match &self.source {
            EntraSource::ClientCredentials { client_secret, .. } => Some(client_secret),
            EntraSource::ManagedIdentity { .. } => None,
        }
    }

    /// What `check` says of it.
    pub fn describe(&self) -> String {
        match &self.source {
            EntraSource::ClientCredentials {
                tenant_id,
                client_id,
                ..
            } => format!("Entra ID bearer token in authorization (client credentials: tenant {tenant_id}, client {client_id}), refreshed before it expires"),
            EntraSource::ManagedIdentity { client_id: None } => "Entra ID bearer token in authorization (the system-assigned managed identity), refreshed before it expires".into(),
            EntraSource::ManagedIdentity { client_id: Some(c) } => format!("Entra ID bearer token in authorization (managed identity, client {c}), refreshed before it expires"),
        }
    }

    /// The token to send now.
    pub async fn token(&self, client: &reqwest::Client) -> Result<Secret, CredentialError> {
        self.held.get(|| self.fetch(client)).await
    }

    async fn fetch(
        &self,
        client: &reqwest::Client,
    ) -> Result<(Secret, Option<SystemTime>), CredentialError> {
        let host = |var: &str, default: &str| {
            std::env::var(var)
                .ok()
                .filter(|v| !v.trim().is_empty())
                .unwrap_or_else(|| default.to_string())
                .trim_end_matches('/')
                .to_string()
        };
        let (what, request) = match &self.source {
            EntraSource::ClientCredentials {
                tenant_id,
                client_id,
                client_secret,
            } => {
                let url = format!(
                    "{}/{tenant_id}/oauth2/v2.0/token",
                    host(AUTHORITY_HOST_ENV, AUTHORITY)
                );
                let form = [
                    ("grant_type", "client_credentials"),
                    ("client_id", client_id.as_str()),
                    ("client_secret", client_secret.expose()),
                    ("scope", SCOPE),
                ];
                ("Entra ID token endpoint", client.post(url).form(&form))
            }
            EntraSource::ManagedIdentity { client_id } => {
                let url = format!(
                    "{}/metadata/identity/oauth2/token",
                    host(IMDS_HOST_ENV, IMDS)
                );
                let mut query = vec![("api-version", "2018-02-01"), ("resource", RESOURCE)];
                if let Some(c) = client_id {
                    query.push(("client_id", c));
                }
                (
                    "managed identity endpoint",
                    client.get(url).query(&query).header("metadata", "true"),
                )
            }
        };
        let failed =
            |why: String| CredentialError(format!("no Entra ID token from the {what}: {why}"));
        let answer = request
            .timeout(TIMEOUT)
            .send()
            .await
            .map_err(|e| failed(crate::util::error_chain(&e)))?;
        let status = answer.status();
        let body = answer
            .bytes()
            .await
            .map_err(|e| failed(crate::util::error_chain(&e)))?;
        if !status.is_success() {
            // The error code only: a description may quote what was sent.
            let code = serde_json::from_slice::<ErrorAnswer>(&body)
                .ok()
                .and_then(|e| e.error)
                .map(|c| format!(" ({})", crate::util::one_line(&c, 80)))
                .unwrap_or_default();
            return Err(failed(format!("HTTP {}{code}", status.as_u16())));
        }
        let token: TokenAnswer = serde_json::from_slice(&body)
            .map_err(|_| failed("the answer is not a token (JSON with access_token)".into()))?;
        let expires_in = token.expires_in.as_ref().and_then(|v| match v {
            serde_json::Value::Number(n) => n.as_u64(),
            serde_json::Value::String(s) => s.parse().ok(),
            _ => None,
        });
        let expiry = expires_in.map(|s| SystemTime::now() + Duration::from_secs(s));
        Ok((Secret::new(token.access_token), expiry))
    }
}
