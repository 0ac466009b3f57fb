//! The sim's TLS (`sim --tls-cert FILE --tls-key FILE [--client-ca FILE]`): a certificate and
//! key, and with a client CA, a client certificate signed by it required. The agent's own
//! server TLS ([`crate::tls::server`]) with those settings.

use std::path::Path;
use std::sync::Arc;

use rustls::ServerConfig;

use crate::tls::server::{self, ClientAuth, Pem, ServerTlsSettings, Version};

/// The sim's server configuration; `Err` says which file and what is wrong.
pub(crate) fn server_config(
    cert: &Path,
    key: &Path,
    client_ca: Option<&Path>,
) -> Result<Arc<ServerConfig>, String> {
    let settings = ServerTlsSettings {
        cert: Pem::File(cert.to_path_buf()),
        key: Pem::File(key.to_path_buf()),
        client_auth: match client_ca {
            Some(_) => ClientAuth::RequireAndVerify,
            None => ClientAuth::No,
        },
        client_ca: client_ca.map(|ca| Pem::File(ca.to_path_buf())),
        min_version: Version::Tls12,
        max_version: Version::Tls13,
        cipher_suites: None,
        curves: None,
        prefer_server_order: false,
        allowed_sans: None,
    };
    server::server_config(&settings)
        .map(Arc::new)
        .map_err(|e| e.to_string())
}
