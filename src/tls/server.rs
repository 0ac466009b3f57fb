//! The server side: a rustls `ServerConfig` for the agent's own endpoints, made from what an
//! exporter-toolkit web config names (a certificate and key, a client-certificate policy with
//! its CA, protocol versions, TLS 1.2 cipher suites and key-exchange groups), on ring.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{ring, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{
    DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig, SignatureScheme,
    SupportedCipherSuite,
};

use super::pem;

/// Where a PEM block comes from: a file, or the web config's own text (`cert:`, `key:`,
/// `client_ca:`).
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum Pem {
    File(PathBuf),
    Inline(String),
}

impl fmt::Debug for Pem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pem::File(p) => write!(f, "{}", p.display()),
            // An inline key is a secret; the rest need not be printed either.
            Pem::Inline(_) => f.write_str("(inline)"),
        }
    }
}

impl Pem {
    fn certificates(&self, what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
        match self {
            Pem::File(p) => pem::certificates(p),
            Pem::Inline(text) => {
                pem::certificates_in(text.as_bytes(), &format!("the inline {what}"))
            }
        }
    }

    fn private_key(&self) -> Result<PrivateKeyDer<'static>, String> {
        match self {
            Pem::File(p) => pem::private_key(p),
            Pem::Inline(text) => PrivateKeyDer::from_pem_slice(text.as_bytes())
                .map_err(|e| format!("the inline key is not a PEM private key: {e}")),
        }
    }
}

/// Whether a client must show a certificate, and whether it is checked against the CA. The
/// exporter-toolkit's (and Go's) five policies, under their names there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClientAuth {
    /// `NoClientCert`: none is asked for.
    No,
    /// `RequestClientCert`: one is asked for; none, or any, is accepted.
    Request,
    /// `RequireAnyClientCert`: one must be shown; it is not checked against a CA.
    RequireAny,
    /// `VerifyClientCertIfGiven`: none is accepted; one shown must chain to the CA.
    VerifyIfGiven,
    /// `RequireAndVerifyClientCert`: one must be shown and chain to the CA.
    RequireAndVerify,
}

impl ClientAuth {
    /// The toolkit's names; `RequireClientCert` is its older name for `RequireAnyClientCert`.
    pub(crate) const NAMES: [&'static str; 5] = [
        "NoClientCert",
        "RequestClientCert",
        "RequireAnyClientCert",
        "VerifyClientCertIfGiven",
        "RequireAndVerifyClientCert",
    ];

    pub(crate) fn from_name(name: &str) -> Option<ClientAuth> {
        Some(match name {
            "" | "NoClientCert" => ClientAuth::No,
            "RequestClientCert" => ClientAuth::Request,
            "RequireAnyClientCert" | "RequireClientCert" => ClientAuth::RequireAny,
            "VerifyClientCertIfGiven" => ClientAuth::VerifyIfGiven,
            "RequireAndVerifyClientCert" => ClientAuth::RequireAndVerify,
            _ => return None,
        })
    }

    /// Whether the policy checks a certificate against a CA (and so needs one).
    pub(crate) fn verifies(self) -> bool {
        matches!(
            self,
            ClientAuth::VerifyIfGiven | ClientAuth::RequireAndVerify
        )
    }
}

/// A protocol version rustls speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Version {
    Tls12,
    Tls13,
}

/// What the server's TLS is made of, validated as far as it can be without reading files.
#[derive(Debug, Clone)]
pub(crate) struct ServerTlsSettings {
    pub cert: Pem,
    pub key: Pem,
    pub client_auth: ClientAuth,
    pub client_ca: Option<Pem>,
    pub min_version: Version,
    pub max_version: Version,
    /// TLS 1.2 suites in preference order, by their IANA names; `None` keeps ring's.
    pub cipher_suites: Option<Vec<String>>,
    /// Key-exchange groups in preference order, by the toolkit's names; `None` keeps ring's.
    pub curves: Option<Vec<String>>,
    /// Choose by the server's order of suites rather than the client's.
    pub prefer_server_order: bool,
    /// A client certificate must name one of these (DNS name, e-mail address, IP address or
    /// URI, written exactly) among its subject alternative names.
    pub allowed_sans: Option<Vec<String>>,
}

/// Why a `ServerConfig` could not be made, by the setting at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ServerTlsError {
    #[error("{0}")]
    Cert(String),
    #[error("{0}")]
    Key(String),
    #[error("{0}")]
    ClientCa(String),
    /// The suite at this index of `cipher_suites`.
    #[error("{1}")]
    CipherSuite(usize, String),
    /// The group at this index of `curves`.
    #[error("{1}")]
    Curve(usize, String),
    #[error("{0}")]
    Versions(String),
}

/// The toolkit's curve names → rustls' groups (ring offers no P-521).
const CURVES: [(&str, rustls::NamedGroup); 3] = [
    ("CurveP256", rustls::NamedGroup::secp256r1),
    ("CurveP384", rustls::NamedGroup::secp384r1),
    ("X25519", rustls::NamedGroup::X25519),
];

/// ring's provider with the suites and groups `s` asks for, in its order.
fn provider(s: &ServerTlsSettings) -> Result<CryptoProvider, ServerTlsError> {
    let mut p = ring::default_provider();
    if let Some(names) = &s.cipher_suites {
        // Named TLS 1.2 suites, then every TLS 1.3 suite: as in Go, `cipher_suites` does not
        // choose TLS 1.3's.
        let mut chosen: Vec<SupportedCipherSuite> = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let found = p
                .cipher_suites
                .iter()
                .find(|c| suite_name(c) == *name)
                .ok_or_else(|| {
                    let offered: Vec<String> = p
                        .cipher_suites
                        .iter()
                        .filter(|c| c.tls13().is_none())
                        .map(suite_name)
                        .collect();
                    ServerTlsError::CipherSuite(
                        i,
                        format!(
                            "cipher suite {name:?} is not offered here; the TLS 1.2 suites are {}",
                            offered.join(", ")
                        ),
                    )
                })?;
            if found.tls13().is_none() && !chosen.contains(found) {
                chosen.push(*found);
            }
        }
        chosen.extend(p.cipher_suites.iter().filter(|c| c.tls13().is_some()));
        p.cipher_suites = chosen;
    }
    if let Some(names) = &s.curves {
        let mut groups = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let wanted = CURVES.iter().find(|(n, _)| n == name).map(|(_, g)| *g);
            let group = wanted
                .and_then(|g| p.kx_groups.iter().find(|k| k.name() == g).copied())
                .ok_or_else(|| {
                    let known: Vec<&str> = CURVES.iter().map(|(n, _)| *n).collect();
                    ServerTlsError::Curve(
                        i,
                        format!(
                            "curve {name:?} is not offered here; the curves are {}",
                            known.join(", ")
                        ),
                    )
                })?;
            groups.push(group);
        }
        p.kx_groups = groups;
    }
    Ok(p)
}

fn suite_name(c: &SupportedCipherSuite) -> String {
    format!("{:?}", c.suite())
}

/// Makes the server's TLS: reads the certificate, key and CA, checks that the key is the
/// certificate's, and sets the client-certificate policy.
pub(crate) fn server_config(s: &ServerTlsSettings) -> Result<ServerConfig, ServerTlsError> {
    let provider = Arc::new(provider(s)?);
    let certs = s
        .cert
        .certificates("certificate")
        .map_err(ServerTlsError::Cert)?;
    let key = s.key.private_key().map_err(ServerTlsError::Key)?;
    let versions: Vec<&'static rustls::SupportedProtocolVersion> = [
        (Version::Tls12, &rustls::version::TLS12),
        (Version::Tls13, &rustls::version::TLS13),
    ]
    .into_iter()
    .filter(|(v, _)| (s.min_version..=s.max_version).contains(v))
    .map(|(_, p)| p)
    .collect();
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| ServerTlsError::Versions(format!("no protocol version left: {e}")))?;
    let verifier = client_verifier(s, &provider)?;
    let certified = rustls::sign::CertifiedKey::from_der(certs, key, &provider).map_err(|e| {
        let (cert, key) = (format!("{:?}", s.cert), format!("{:?}", s.key));
        ServerTlsError::Key(match e {
            rustls::Error::InconsistentKeys(_) => {
                format!("the private key in {key} is not the certificate's in {cert}")
            }
            other => format!("the private key in {key} cannot be used: {other}"),
        })
    })?;
    let mut config = builder
        .with_client_cert_verifier(verifier)
        .with_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(certified)));
    config.ignore_client_order = s.prefer_server_order;
    // These endpoints speak HTTP/1.1 only.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

fn client_verifier(
    s: &ServerTlsSettings,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<dyn ClientCertVerifier>, ServerTlsError> {
    let roots = match &s.client_ca {
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for c in ca
                .certificates("client CA")
                .map_err(ServerTlsError::ClientCa)?
            {
                roots.add(c).map_err(|e| {
                    ServerTlsError::ClientCa(format!(
                        "a certificate in {ca:?} is not a usable CA: {e}"
                    ))
                })?;
            }
            Some(Arc::new(roots))
        }
        None => None,
    };
    let webpki = |roots: Arc<RootCertStore>, optional: bool| {
        let b = WebPkiClientVerifier::builder_with_provider(roots, provider.clone());
        let b = if optional {
            b.allow_unauthenticated()
        } else {
            b
        };
        b.build()
            .map_err(|e| ServerTlsError::ClientCa(format!("cannot verify clients: {e}")))
    };
    let verifier: Arc<dyn ClientCertVerifier> =
        match (s.client_auth, roots) {
            (ClientAuth::No, _) => WebPkiClientVerifier::no_client_auth(),
            (ClientAuth::Request, _) => Arc::new(AnyCert::new(provider, false)),
            (ClientAuth::RequireAny, _) => Arc::new(AnyCert::new(provider, true)),
            (ClientAuth::VerifyIfGiven, Some(r)) => webpki(r, true)?,
            (ClientAuth::RequireAndVerify, Some(r)) => webpki(r, false)?,
            (_, None) => return Err(ServerTlsError::ClientCa(
                "this client_auth_type checks client certificates: name their CA (client_ca_file)"
                    .into(),
            )),
        };
    Ok(match &s.allowed_sans {
        Some(allowed) => Arc::new(AllowedSans {
            inner: verifier,
            allowed: allowed.clone(),
        }),
        None => verifier,
    })
}

/// Another verifier, then the toolkit's `client_allowed_sans`: the certificate must name one
/// of `allowed` among its subject alternative names.
#[derive(Debug)]
struct AllowedSans {
    inner: Arc<dyn ClientCertVerifier>,
    allowed: Vec<String>,
}

impl ClientCertVerifier for AllowedSans {
    fn offer_client_auth(&self) -> bool {
        self.inner.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.inner.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let verified = self
            .inner
            .verify_client_cert(end_entity, intermediates, now)?;
        let names = subject_alt_names(end_entity).map_err(|_| {
            rustls::Error::InvalidCertificate(rustls::CertificateError::BadEncoding)
        })?;
        if names.iter().any(|n| self.allowed.contains(n)) {
            Ok(verified)
        } else {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::ApplicationVerificationFailure,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// A certificate's subject alternative names as Go writes them: DNS names, e-mail addresses,
/// IP addresses and URIs.
fn subject_alt_names(der: &[u8]) -> Result<Vec<String>, x509_cert::der::Error> {
    use x509_cert::der::oid::AssociatedOid;
    use x509_cert::der::Decode;
    use x509_cert::ext::pkix::name::GeneralName;
    use x509_cert::ext::pkix::SubjectAltName;
    let cert = x509_cert::Certificate::from_der(der)?;
    let mut names = Vec::new();
    let extensions = cert.tbs_certificate.extensions.unwrap_or_default();
    for ext in extensions
        .iter()
        .filter(|e| e.extn_id == SubjectAltName::OID)
    {
        for name in SubjectAltName::from_der(ext.extn_value.as_bytes())?.0 {
            match name {
                GeneralName::DnsName(s)
                | GeneralName::Rfc822Name(s)
                | GeneralName::UniformResourceIdentifier(s) => names.push(s.to_string()),
                GeneralName::IpAddress(ip) => {
                    let b = ip.as_bytes();
                    if let Ok(v4) = <[u8; 4]>::try_from(b) {
                        names.push(std::net::Ipv4Addr::from(v4).to_string());
                    } else if let Ok(v6) = <[u8; 16]>::try_from(b) {
                        names.push(std::net::Ipv6Addr::from(v6).to_string());
                    }
                }
                _ => {}
            }
        }
    }
    Ok(names)
}

/// A client certificate is asked for (and required if `mandatory`) but not checked against a
/// CA: `RequestClientCert` and `RequireAnyClientCert`. The handshake's signature is still
/// checked, so the client holds the certificate's key.
#[derive(Debug)]
struct AnyCert {
    algorithms: rustls::crypto::WebPkiSupportedAlgorithms,
    mandatory: bool,
}

impl AnyCert {
    fn new(provider: &CryptoProvider, mandatory: bool) -> AnyCert {
        AnyCert {
            algorithms: provider.signature_verification_algorithms,
            mandatory,
        }
    }
}

impl ClientCertVerifier for AnyCert {
    fn client_auth_mandatory(&self) -> bool {
        self.mandatory
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::ServerName;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A CA, a server certificate for `localhost`, a client certificate from the CA and one
    /// from a CA nobody trusts, as PEM files.
    struct Files {
        dir: tempfile::TempDir,
    }

    fn leaf(name: &str, ca: &rcgen::CertifiedIssuer<'static, rcgen::KeyPair>) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec![name.to_string()])
            .unwrap()
            .signed_by(&key, ca)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    }

    fn issuer() -> rcgen::CertifiedIssuer<'static, rcgen::KeyPair> {
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        rcgen::CertifiedIssuer::self_signed(p, rcgen::KeyPair::generate().unwrap()).unwrap()
    }

    impl Files {
        fn new() -> Files {
            let dir = tempfile::tempdir().unwrap();
            let (ca, other) = (issuer(), issuer());
            let w = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
            w("ca.pem", &ca.pem());
            let (c, k) = leaf("localhost", &ca);
            w("server.pem", &c);
            w("server-key.pem", &k);
            let (c, k) = leaf("client", &ca);
            w("client.pem", &c);
            w("client-key.pem", &k);
            let (c, k) = leaf("stranger", &other);
            w("stranger.pem", &c);
            w("stranger-key.pem", &k);
            Files { dir }
        }

        fn path(&self, name: &str) -> PathBuf {
            self.dir.path().join(name)
        }

        fn settings(&self, client_auth: ClientAuth) -> ServerTlsSettings {
            ServerTlsSettings {
                cert: Pem::File(self.path("server.pem")),
                key: Pem::File(self.path("server-key.pem")),
                client_auth,
                client_ca: client_auth
                    .verifies()
                    .then(|| Pem::File(self.path("ca.pem"))),
                min_version: Version::Tls12,
                max_version: Version::Tls13,
                cipher_suites: None,
                curves: None,
                prefer_server_order: true,
                allowed_sans: None,
            }
        }

        /// Whether a client showing `identity` (a file stem) completes a handshake and an
        /// exchange of bytes with a server on `server`.
        async fn accepted(&self, server: &ServerConfig, identity: Option<&str>) -> bool {
            let mut roots = RootCertStore::empty();
            roots
                .add(pem::certificates(&self.path("ca.pem")).unwrap().remove(0))
                .unwrap();
            let b = rustls::ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots);
            let client = match identity {
                Some(stem) => b
                    .with_client_auth_cert(
                        pem::certificates(&self.path(&format!("{stem}.pem"))).unwrap(),
                        pem::private_key(&self.path(&format!("{stem}-key.pem"))).unwrap(),
                    )
                    .unwrap(),
                None => b.with_no_client_auth(),
            };
            let (c, s) = tokio::io::duplex(64 * 1024);
            let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server.clone()));
            let server = tokio::spawn(async move {
                let mut tls = acceptor.accept(s).await.ok()?;
                let mut b = [0u8; 4];
                tls.read_exact(&mut b).await.ok()?;
                tls.write_all(&b).await.ok()?;
                tls.flush().await.ok()
            });
            let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
            let talked = async {
                let mut tls = connector
                    .connect(ServerName::try_from("localhost").unwrap(), c)
                    .await
                    .ok()?;
                tls.write_all(b"ping").await.ok()?;
                let mut b = [0u8; 4];
                tls.read_exact(&mut b).await.ok()?;
                (&b == b"ping").then_some(())
            }
            .await
            .is_some();
            talked && server.await.unwrap().is_some()
        }
    }

    #[tokio::test]
    async fn each_client_auth_policy_admits_the_clients_it_names() {
        let f = Files::new();
        // (policy, no certificate, one from the CA, one from another CA)
        let table = [
            (ClientAuth::No, true, true, true),
            (ClientAuth::Request, true, true, true),
            (ClientAuth::RequireAny, false, true, true),
            (ClientAuth::VerifyIfGiven, true, true, false),
            (ClientAuth::RequireAndVerify, false, true, false),
        ];
        for (policy, none, ours, stranger) in table {
            let server = server_config(&f.settings(policy)).unwrap();
            assert_eq!(f.accepted(&server, None).await, none, "{policy:?}, none");
            assert_eq!(
                f.accepted(&server, Some("client")).await,
                ours,
                "{policy:?}, the CA's"
            );
            assert_eq!(
                f.accepted(&server, Some("stranger")).await,
                stranger,
                "{policy:?}, another CA's"
            );
        }
    }

    #[tokio::test]
    async fn allowed_sans_admit_only_the_certificates_that_name_one() {
        let f = Files::new();
        for policy in [ClientAuth::RequireAny, ClientAuth::RequireAndVerify] {
            let mut s = f.settings(policy);
            s.allowed_sans = Some(vec!["client".into(), "127.0.0.1".into()]);
            let server = server_config(&s).unwrap();
            assert!(f.accepted(&server, Some("client")).await, "{policy:?}");
            assert!(!f.accepted(&server, Some("stranger")).await, "{policy:?}");
            assert!(!f.accepted(&server, None).await, "{policy:?}");
            s.allowed_sans = Some(vec!["someone-else".into()]);
            let server = server_config(&s).unwrap();
            assert!(!f.accepted(&server, Some("client")).await, "{policy:?}");
        }
        let ip = leaf("127.0.0.1", &issuer()).0;
        let der = rustls::pki_types::CertificateDer::from_pem_slice(ip.as_bytes()).unwrap();
        assert_eq!(subject_alt_names(&der).unwrap(), vec!["127.0.0.1"]);
    }

    #[test]
    fn versions_suites_and_curves_narrow_what_is_offered() {
        let f = Files::new();
        let mut s = f.settings(ClientAuth::No);
        s.min_version = Version::Tls13;
        s.cipher_suites = Some(vec!["TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256".into()]);
        s.curves = Some(vec!["X25519".into()]);
        let c = server_config(&s).unwrap();
        let suites: Vec<String> = c
            .crypto_provider()
            .cipher_suites
            .iter()
            .map(suite_name)
            .collect();
        assert_eq!(suites[0], "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256");
        assert!(
            suites[1..].iter().all(|n| !n.contains("ECDHE")),
            "{suites:?}"
        );
        assert_eq!(c.crypto_provider().kx_groups.len(), 1);
        assert!(c.ignore_client_order);
        s.cipher_suites = Some(vec!["TLS_NULL".into()]);
        assert!(matches!(
            server_config(&s),
            Err(ServerTlsError::CipherSuite(0, _))
        ));
    }
}
