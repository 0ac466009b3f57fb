//! The sim's TLS (`sim --tls-cert FILE --tls-key FILE [--client-ca FILE]`): a certificate and
//! key, and with a client CA, a client certificate signed by it required. On rustls with ring.

use std::path::Path;
use std::sync::Arc;

use rustls::server::WebPkiClientVerifier;
use rustls::ServerConfig;

use crate::tls::pem;

/// The sim's server configuration; `Err` says which file and what is wrong.
pub(crate) fn server_config(
    cert: &Path,
    key: &Path,
    client_ca: Option<&Path>,
) -> Result<Arc<ServerConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in pem::certificates(ca)? {
                roots
                    .add(c)
                    .map_err(|e| format!("{}: not a CA certificate: {e}", ca.display()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| format!("{}: {e}", ca.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder
        .with_single_cert(pem::certificates(cert)?, pem::private_key(key)?)
        .map_err(|e| {
            format!(
                "{} and {} are no certificate and key pair: {e}",
                cert.display(),
                key.display()
            )
        })?;
    Ok(Arc::new(config))
}
