//! The client side: a `tls:` block with Prometheus' names (`ca_file`, `cert_file`, `key_file`,
//! `server_name`, `insecure_skip_verify`, `min_version`) made into a rustls client config, and
//! made again when one of its files changes, so a rotated client certificate is used from the
//! next connection. Without a block, the system's roots, read once.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use super::pem;

/// The oldest TLS version a connection may use. rustls speaks TLS 1.2 and 1.3 only, so
/// Prometheus' `TLS10` and `TLS11` allow what `TLS12` allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MinVersion {
    #[default]
    Tls12,
    Tls13,
}

impl MinVersion {
    /// Prometheus' spelling (`TLS10` .. `TLS13`).
    pub(crate) fn parse(text: &str) -> Option<MinVersion> {
        match text {
            "TLS10" | "TLS11" | "TLS12" => Some(MinVersion::Tls12),
            "TLS13" => Some(MinVersion::Tls13),
            _ => None,
        }
    }
}

/// A `tls:` block, its paths resolved against the config's folder.
#[derive(Debug, Clone, Default)]
pub struct ClientTls {
    /// The CA bundle that verifies the server, in place of the system's roots (as Prometheus
    /// reads `ca_file`).
    pub ca_file: Option<PathBuf>,
    /// The client certificate (and its chain) presented to servers that ask for one.
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    /// The name the server's certificate is verified against (and, where the connection is the
    /// agent's own, sent as SNI), in place of the URL's host.
    pub server_name: Option<String>,
    /// The server's certificate is not verified. Loud everywhere: `check`, the log, a metric.
    pub insecure_skip_verify: bool,
    pub min_version: MinVersion,
    built: Arc<Mutex<Option<Built>>>,
}

/// A config made from the files as they were when it was made.
#[derive(Debug)]
struct Built {
    stamps: Vec<Option<(SystemTime, u64)>>,
    config: Arc<ClientConfig>,
}

impl ClientTls {
    pub(crate) fn new(
        ca_file: Option<PathBuf>,
        cert_file: Option<PathBuf>,
        key_file: Option<PathBuf>,
        server_name: Option<String>,
        insecure_skip_verify: bool,
        min_version: MinVersion,
    ) -> ClientTls {
        ClientTls {
            ca_file,
            cert_file,
            key_file,
            server_name,
            insecure_skip_verify,
            min_version,
            built: Arc::default(),
        }
    }

    /// The config for the next connection: the one made before while its files are unchanged,
    /// else made anew. A file that changed into something unusable keeps the last good config
    /// (and says why, once per change); with none before, the error is returned.
    pub(crate) fn config(&self) -> Result<Arc<ClientConfig>, String> {
        let stamps = self.stamps();
        let mut built = self
            .built
            .lock()
            .expect("the TLS config lock is never poisoned");
        if let Some(b) = built.as_ref().filter(|b| b.stamps == stamps) {
            return Ok(b.config.clone());
        }
        match self.build() {
            Ok(config) => {
                let config = Arc::new(config);
                *built = Some(Built {
                    stamps,
                    config: config.clone(),
                });
                Ok(config)
            }
            Err(e) => match built.as_mut() {
                Some(old) => {
                    tracing::warn!(error = %e, "a TLS file changed and no longer loads: the previous certificates stay in use");
                    // Not again until the files change once more.
                    old.stamps = stamps;
                    Ok(old.config.clone())
                }
                None => Err(e),
            },
        }
    }

    /// Makes the config from the files now, for `check` and the config's load.
    pub(crate) fn validate(&self) -> Result<(), String> {
        self.build().map(drop)
    }

    fn files(&self) -> [Option<&PathBuf>; 3] {
        [
            self.ca_file.as_ref(),
            self.cert_file.as_ref(),
            self.key_file.as_ref(),
        ]
    }

    fn stamps(&self) -> Vec<Option<(SystemTime, u64)>> {
        self.files()
            .iter()
            .map(|f| {
                let m = std::fs::metadata(f.as_ref()?).ok()?;
                Some((m.modified().ok()?, m.len()))
            })
            .collect()
    }

    fn build(&self) -> Result<ClientConfig, String> {
        let provider = provider();
        let roots = match &self.ca_file {
            Some(ca) => {
                let mut roots = RootCertStore::empty();
                for cert in pem::certificates(ca)? {
                    roots.add(cert).map_err(|e| {
                        format!(
                            "{}: a certificate in it is not a usable CA: {e}",
                            ca.display()
                        )
                    })?;
                }
                Arc::new(roots)
            }
            None => system_roots()?,
        };
        let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
            .build()
            .map_err(|e| format!("cannot verify servers with these roots: {e}"))?;
        let verifier: Arc<dyn ServerCertVerifier> = Arc::new(Verifier {
            webpki,
            name: match &self.server_name {
                Some(n) => Some(ServerName::try_from(n.clone()).map_err(|_| {
                    format!("server_name {n:?} is not a DNS name or an IP address")
                })?),
                None => None,
            },
            check: !self.insecure_skip_verify,
        });
        let versions: &[&rustls::SupportedProtocolVersion] = match self.min_version {
            MinVersion::Tls12 => rustls::ALL_VERSIONS,
            MinVersion::Tls13 => &[&rustls::version::TLS13],
        };
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(versions)
            .map_err(|e| format!("cannot use these TLS versions: {e}"))?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        match (&self.cert_file, &self.key_file) {
            (Some(cert), Some(key)) => {
                let chain = pem::certificates(cert)?;
                let private = pem::private_key(key)?;
                let signing = provider
                    .key_provider
                    .load_private_key(private.clone_key())
                    .map_err(|e| format!("{}: the key cannot sign: {e}", key.display()))?;
                rustls::sign::CertifiedKey::new(chain.clone(), signing)
                    .keys_match()
                    .map_err(|_| {
                        format!(
                            "{} is not the key of the certificate in {}",
                            key.display(),
                            cert.display()
                        )
                    })?;
                builder
                    .with_client_auth_cert(chain, private)
                    .map_err(|e| format!("{}: {e}", cert.display()))
            }
            (None, None) => Ok(builder.with_no_client_auth()),
            // The config's loader asks for both; this is the same sentence if it is missed.
            _ => Err("cert_file and key_file go together".to_string()),
        }
    }
}

/// rustls on ring: the provider reqwest already brings.
pub(crate) fn provider() -> Arc<CryptoProvider> {
    static PROVIDER: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    PROVIDER
        .get_or_init(|| Arc::new(rustls::crypto::ring::default_provider()))
        .clone()
}

/// The system's trusted roots (what reqwest read with `rustls-tls-native-roots`), read once:
/// reading /etc/ssl/certs takes milliseconds, too long for every run.
fn system_roots() -> Result<Arc<RootCertStore>, String> {
    static ROOTS: OnceLock<Result<Arc<RootCertStore>, String>> = OnceLock::new();
    ROOTS
        .get_or_init(|| {
            let found = rustls_native_certs::load_native_certs();
            let mut roots = RootCertStore::empty();
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                let why = found
                    .errors
                    .first()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default();
                return Err(format!(
                    "no trusted root certificates found on this system (install ca-certificates, or set tls.ca_file){why}"
                ));
            }
            Ok(Arc::new(roots))
        })
        .clone()
}

/// The client config with the system's roots, for a connection without a `tls:` block.
pub(crate) fn default_config() -> Result<Arc<ClientConfig>, String> {
    static DEFAULT: OnceLock<Result<Arc<ClientConfig>, String>> = OnceLock::new();
    DEFAULT
        .get_or_init(|| ClientTls::default().build().map(Arc::new))
        .clone()
}

/// webpki's verification, against `server_name` when one is configured, or none at all with
/// `insecure_skip_verify` (the handshake's signatures are still checked: the peer holds the
/// key of the certificate it sent).
#[derive(Debug)]
struct Verifier {
    webpki: Arc<WebPkiServerVerifier>,
    name: Option<ServerName<'static>>,
    check: bool,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if !self.check {
            return Ok(ServerCertVerified::assertion());
        }
        let name = self.name.as_ref().unwrap_or(server_name);
        self.webpki
            .verify_server_cert(end_entity, intermediates, name, ocsp_response, now)
    }

    // The handshake's signatures are checked whatever the certificate's verification: the
    // peer holds the key of the certificate it sent.
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// How an outbound connection is made: its `tls:` block and its proxy (`proxy_url`,
/// `no_proxy`). Without a proxy_url, the usual environment variables (`HTTPS_PROXY`,
/// `HTTP_PROXY`, `NO_PROXY`, and their lower-case forms) apply.
#[derive(Debug, Clone, Default)]
pub struct Outbound {
    pub tls: Option<ClientTls>,
    /// An HTTP proxy: `https://` URLs go through a CONNECT tunnel, `http://` ones as
    /// absolute-form requests.
    pub proxy_url: Option<url::Url>,
    /// Hosts, domains (`.example.com` or `example.com` with its subdomains), IPs and CIDR
    /// ranges reached directly, comma-separated, as `NO_PROXY` is written.
    pub no_proxy: Option<String>,
}

impl Outbound {
    /// Whether the server's certificate goes unverified.
    pub fn insecure(&self) -> bool {
        self.tls.as_ref().is_some_and(|t| t.insecure_skip_verify)
    }

    /// The TLS config for the next connection ([`ClientTls::config`], or the default).
    pub(crate) fn tls_config(&self) -> Result<Arc<ClientConfig>, String> {
        match &self.tls {
            Some(t) => t.config(),
            None => default_config(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed certificate for `name` and its key, written as `<stem>.pem` and
    /// `<stem>.key` in `dir`.
    fn write_pair(dir: &std::path::Path, stem: &str, name: &str) -> (PathBuf, PathBuf) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec![name.to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let (c, k) = (
            dir.join(format!("{stem}.pem")),
            dir.join(format!("{stem}.key")),
        );
        std::fs::write(&c, cert.pem()).unwrap();
        std::fs::write(&k, key.serialize_pem()).unwrap();
        (c, k)
    }

    fn client_tls(
        ca: &std::path::Path,
        cert: &std::path::Path,
        key: &std::path::Path,
    ) -> ClientTls {
        ClientTls::new(
            Some(ca.to_path_buf()),
            Some(cert.to_path_buf()),
            Some(key.to_path_buf()),
            None,
            false,
            MinVersion::default(),
        )
    }

    #[test]
    fn the_config_is_made_once_and_again_when_a_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        let (ca, _) = write_pair(dir.path(), "ca", "ca.example");
        let (cert, key) = write_pair(dir.path(), "client", "canary-client");
        let tls = client_tls(&ca, &cert, &key);
        let first = tls.config().unwrap();
        assert!(
            Arc::ptr_eq(&first, &tls.config().unwrap()),
            "unchanged files: the same config"
        );

        // The certificate rotates (a longer name: another length, whatever the clock's grain).
        let (rotated_cert, rotated_key) =
            write_pair(dir.path(), "rotated", "canary-client-rotated");
        std::fs::copy(&rotated_cert, &cert).unwrap();
        std::fs::copy(&rotated_key, &key).unwrap();
        let second = tls.config().unwrap();
        assert!(
            !Arc::ptr_eq(&first, &second),
            "a rotated certificate: a new config"
        );
        assert!(Arc::ptr_eq(&second, &tls.config().unwrap()));
    }

    #[test]
    fn a_file_broken_after_a_good_config_keeps_the_good_one_and_without_one_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let (ca, _) = write_pair(dir.path(), "ca", "ca.example");
        let (cert, key) = write_pair(dir.path(), "client", "canary-client");
        let tls = client_tls(&ca, &cert, &key);
        let good = tls.config().unwrap();

        // Half-written by a rotation, or replaced by something else.
        std::fs::write(&cert, "-----BEGIN CERTIFICATE-----\ntruncated\n").unwrap();
        let kept = tls.config().expect("the last good config stays in use");
        assert!(Arc::ptr_eq(&good, &kept));
        assert!(Arc::ptr_eq(&good, &tls.config().unwrap()));

        // A key that is not the certificate's is as broken.
        let (other_cert, _) = write_pair(dir.path(), "other", "someone-else.example");
        std::fs::copy(&other_cert, &cert).unwrap();
        assert!(Arc::ptr_eq(&good, &tls.config().unwrap()));

        // Nothing good before: the error, naming what is wrong.
        let fresh = client_tls(&ca, &cert, &key);
        let e = fresh.config().unwrap_err();
        assert!(e.contains("is not the key of the certificate in"), "{e}");
    }

    #[test]
    fn prometheus_min_versions_map_onto_what_rustls_speaks() {
        assert_eq!(MinVersion::parse("TLS10"), Some(MinVersion::Tls12));
        assert_eq!(MinVersion::parse("TLS12"), Some(MinVersion::Tls12));
        assert_eq!(MinVersion::parse("TLS13"), Some(MinVersion::Tls13));
        assert_eq!(MinVersion::parse("TLS1.3"), None);
    }
}
