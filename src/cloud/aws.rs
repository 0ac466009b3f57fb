//! AWS credentials for SigV4: keys given in the environment or files, read once at load, or
//! (feature `aws-credential-chain`) AWS's own default chain from the `aws-config` crate —
//! environment, shared config and credentials files (`aws.profile`), web identity (EKS IRSA),
//! ECS and EKS Pod Identity container credentials, EC2 instance roles through IMDSv2 — each
//! credential held until shortly before it expires ([`Refreshing`]), then fetched anew on the
//! next request: a rotated instance role needs no reload.

#[cfg(feature = "aws-credential-chain")]
use std::sync::Arc;
#[cfg(feature = "aws-credential-chain")]
use std::time::SystemTime;

#[cfg(feature = "aws-credential-chain")]
use super::refresh::Refreshing;
use super::CredentialError;
use crate::secret::Secret;

/// One set of keys a request is signed with. Every part prints as `***`.
#[derive(Debug, Clone)]
pub struct AwsKeys {
    pub access_key_id: Secret,
    pub secret_access_key: Secret,
    pub session_token: Option<Secret>,
}

/// Where a target's keys come from.
#[derive(Debug, Clone)]
pub enum AwsCredentials {
    /// Read at load from the environment or files (a reload reads them again).
    Fixed(AwsKeys),
    /// AWS's default chain, fetched when needed and refreshed before expiry.
    #[cfg(feature = "aws-credential-chain")]
    Chain(Arc<Chain>),
}

impl AwsCredentials {
    /// The keys to sign with now.
    pub async fn keys(&self) -> Result<AwsKeys, CredentialError> {
        match self {
            AwsCredentials::Fixed(k) => Ok(k.clone()),
            #[cfg(feature = "aws-credential-chain")]
            AwsCredentials::Chain(c) => c.keys().await,
        }
    }

    /// The secrets known at load, for errors to be cleaned of (a chain's are never echoed: AWS
    /// answers with a key id at most).
    pub fn known_secrets(&self) -> Vec<&Secret> {
        match self {
            AwsCredentials::Fixed(k) => [Some(&k.secret_access_key), k.session_token.as_ref()]
                .into_iter()
                .flatten()
                .collect(),
            #[cfg(feature = "aws-credential-chain")]
            AwsCredentials::Chain(_) => Vec::new(),
        }
    }

    /// Where the keys come from, for `check`.
    pub fn describe(&self) -> String {
        match self {
            AwsCredentials::Fixed(_) => "keys read at load from the environment or files".into(),
            #[cfg(feature = "aws-credential-chain")]
            AwsCredentials::Chain(c) => c.describe(),
        }
    }
}

/// AWS's default credential chain for one target, built on first use (it reads files and
/// may call out), and its latest credential.
#[cfg(feature = "aws-credential-chain")]
pub struct Chain {
    region: String,
    profile: Option<String>,
    provider:
        tokio::sync::OnceCell<aws_config::default_provider::credentials::DefaultCredentialsChain>,
    held: Refreshing<AwsKeys>,
}

#[cfg(feature = "aws-credential-chain")]
impl std::fmt::Debug for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chain")
            .field("region", &self.region)
            .field("profile", &self.profile)
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "aws-credential-chain")]
impl Chain {
    pub fn new(region: String, profile: Option<String>) -> Chain {
        Chain {
            region,
            profile,
            provider: tokio::sync::OnceCell::new(),
            held: Refreshing::default(),
        }
    }

    fn describe(&self) -> String {
        let profile = match &self.profile {
            Some(p) => format!("profile {p}"),
            None => "the default profile or AWS_PROFILE".to_string(),
        };
        format!("keys from AWS's default chain (environment, shared config with {profile}, web identity, container credentials, EC2 instance role), refreshed before they expire")
    }

    async fn keys(&self) -> Result<AwsKeys, CredentialError> {
        self.held.get(|| self.fetch()).await
    }

    async fn fetch(&self) -> Result<(AwsKeys, Option<SystemTime>), CredentialError> {
        use aws_config::default_provider::credentials::DefaultCredentialsChain;
        use aws_config::provider_config::ProviderConfig;
        use aws_credential_types::provider::ProvideCredentials;
        use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};

        let provider = self
            .provider
            .get_or_init(|| async {
                // The TLS stack the rest of the agent uses (rustls on ring).
                let http = aws_smithy_http_client::Builder::new()
                    .tls_provider(Provider::Rustls(CryptoMode::Ring))
                    .build_https();
                let conf = ProviderConfig::default().with_http_client(http);
                let mut chain = DefaultCredentialsChain::builder()
                    .region(aws_config::Region::new(self.region.clone()))
                    .configure(conf);
                if let Some(p) = &self.profile {
                    chain = chain.profile_name(p);
                }
                chain.build().await
            })
            .await;
        let c = provider.provide_credentials().await.map_err(|e| {
            CredentialError(format!(
                "no AWS credentials from the default chain: {}",
                aws_smithy_types::error::display::DisplayErrorContext(&e)
            ))
        })?;
        let keys = AwsKeys {
            access_key_id: Secret::new(c.access_key_id().to_string()),
            secret_access_key: Secret::new(c.secret_access_key().to_string()),
            session_token: c.session_token().map(|t| Secret::new(t.to_string())),
        };
        Ok((keys, c.expiry()))
    }
}
