//! Every refusal of a web config, pinned to its message; and what a valid one turns on.

use super::*;
use crate::tls::server::ClientAuth;

/// A folder with a CA, a server certificate and key, and a second key that is not the
/// certificate's.
struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn new() -> Files {
        let dir = tempfile::tempdir().unwrap();
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = rcgen::CertifiedIssuer::self_signed(ca, ca_key).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
            .unwrap()
            .signed_by(&key, &ca)
            .unwrap();
        let other = rcgen::KeyPair::generate().unwrap();
        let w = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
        w("ca.pem", &ca.pem());
        w("cert.pem", &cert.pem());
        w("key.pem", &key.serialize_pem());
        w("other-key.pem", &other.serialize_pem());
        Files { dir }
    }

    /// Loads `text` as `web.yml` in the folder; the error as printed, or what it turns on.
    fn load(&self, text: &str) -> String {
        let path = self.dir.path().join("web.yml");
        std::fs::write(&path, text).unwrap();
        match load(&path) {
            Ok(w) => format!("tls={} auth={}", w.tls(), w.basic_auth()),
            Err(e) => e
                .to_string()
                .replace(&self.dir.path().display().to_string(), "D"),
        }
    }
}

#[test]
fn a_valid_file_turns_on_what_it_names() {
    let f = Files::new();
    assert_eq!(f.load(""), "tls=false auth=false");
    let hash = bcrypt::hash("pw", 4).unwrap();
    assert_eq!(
        f.load(&format!("basic_auth_users:\n  prom: \"{hash}\"\n")),
        "tls=false auth=true"
    );
    assert_eq!(
        f.load(
            "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.pem\n  min_version: TLS10\n  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256]\n  curve_preferences: [X25519, CurveP256]\n  prefer_server_cipher_suites: false\nhttp_server_config:\n  http2: false\n  headers: {X-Frame-Options: deny, Strict-Transport-Security: max-age=3600}\n"
        ),
        "tls=true auth=false"
    );
    assert_eq!(
        f.load("tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n  client_auth_type: RequireAnyClientCert\n  client_allowed_sans: [scraper.example, 10.0.0.7]\n"),
        "tls=true auth=false"
    );
    assert_eq!(
        f.load("rate_limit: {interval: 100ms, burst: 5}\n"),
        "tls=false auth=false"
    );
    assert_eq!(
        f.load("rate_limit: {interval: \"0\", burst: 0}\n"),
        "tls=false auth=false"
    );
    for policy in ClientAuth::NAMES {
        let ca = if ClientAuth::from_name(policy).is_some_and(|c| c != ClientAuth::No) {
            "\n  client_ca_file: ca.pem"
        } else {
            ""
        };
        assert_eq!(
            f.load(&format!("tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n  client_auth_type: {policy}{ca}\n")),
            "tls=true auth=false",
            "{policy}"
        );
    }
}

#[test]
fn every_refusal_names_file_line_column_and_field() {
    let f = Files::new();
    let tls = "tls_server_config:\n  cert_file: cert.pem\n";
    let cases: &[(String, &str)] = &[
        (
            "tls_server_config:\n  cert_file: cert.pem\n  key_fil: key.pem\n".into(),
            "D/web.yml:3:3: field tls_server_config.key_fil: unknown field `key_fil`, expected one of cert, key, client_ca, cert_file, key_file, client_auth_type, client_ca_file, client_allowed_sans, min_version, max_version, cipher_suites, prefer_server_cipher_suites, curve_preferences",
        ),
        (
            format!("{tls}  key_file: missing.pem\n"),
            "D/web.yml:3:13: field tls_server_config.key_file: cannot read D/missing.pem: No such file or directory (os error 2)",
        ),
        (
            format!("{tls}  key_file: other-key.pem\n"),
            "D/web.yml:3:13: field tls_server_config.key_file: the private key in D/other-key.pem is not the certificate's in D/cert.pem",
        ),
        (
            format!("{tls}\n"),
            "D/web.yml:2:3: field tls_server_config: missing one of key or key_file",
        ),
        (
            format!("{tls}  key_file: key.pem\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: nope/ca.pem\n"),
            "D/web.yml:5:19: field tls_server_config.client_ca_file: cannot read D/nope/ca.pem: No such file or directory (os error 2)",
        ),
        (
            format!("{tls}  key_file: key.pem\n  client_auth_type: RequireAndVerifyClientCert\n"),
            "D/web.yml:4:21: field tls_server_config.client_auth_type: this policy checks client certificates against a CA: set client_ca_file",
        ),
        (
            format!("{tls}  key_file: key.pem\n  client_ca_file: ca.pem\n"),
            "D/web.yml:4:19: field tls_server_config.client_ca_file: a client CA is set without a client_auth_type to use it (VerifyClientCertIfGiven or RequireAndVerifyClientCert)",
        ),
        (
            format!("{tls}  key_file: key.pem\n  client_auth_type: Sometimes\n"),
            "D/web.yml:4:21: field tls_server_config.client_auth_type: \"Sometimes\" is not a client_auth_type: write one of NoClientCert, RequestClientCert, RequireAnyClientCert, VerifyClientCertIfGiven, RequireAndVerifyClientCert",
        ),
        (
            format!("{tls}  key_file: key.pem\n  max_version: TLS11\n"),
            "D/web.yml:4:16: field tls_server_config.max_version: max_version TLS11 is below TLS 1.2, the lowest this server speaks: write TLS12 or TLS13",
        ),
        (
            format!("{tls}  key_file: key.pem\n  min_version: TLS13\n  max_version: TLS12\n"),
            "D/web.yml:4:16: field tls_server_config.min_version: min_version is above max_version",
        ),
        (
            format!("{tls}  key_file: key.pem\n  cipher_suites: [TLS_RSA_WITH_RC4_128_SHA]\n"),
            "D/web.yml:4:19: field tls_server_config.cipher_suites[0]: cipher suite \"TLS_RSA_WITH_RC4_128_SHA\" is not offered here; the TLS 1.2 suites are TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        ),
        (
            format!("{tls}  key_file: key.pem\n  curve_preferences: [X25519, CurveP521]\n"),
            "D/web.yml:4:31: field tls_server_config.curve_preferences[1]: curve \"CurveP521\" is not offered here; the curves are CurveP256, CurveP384, X25519",
        ),
        (
            format!("{tls}  key_file: key.pem\n  client_allowed_sans: [a]\n"),
            "D/web.yml:4:24: field tls_server_config.client_allowed_sans: client_allowed_sans requires client_auth_type to be one of RequireAnyClientCert or RequireAndVerifyClientCert",
        ),
        (
            format!("{tls}  key_file: key.pem\n  key: inline\n"),
            "D/web.yml:3:13: field tls_server_config.key_file: set key or key_file, not both",
        ),
        (
            "basic_auth_users:\n  prom: not-a-hash\n".into(),
            "D/web.yml:2:9: field basic_auth_users.prom: not a bcrypt hash (Invalid hash: the hash format is malformed; expected 60 ASCII bytes): make one with htpasswd -nBC 10 \"\" | tr -d ':\\n'",
        ),
        (
            "http_server_config:\n  headers:\n    Content-Length: \"1\"\n".into(),
            "D/web.yml:3:21: field http_server_config.headers.Content-Length: HTTP header \"Content-Length\" cannot be configured; these can: Strict-Transport-Security, X-Content-Type-Options, X-Frame-Options, X-XSS-Protection, Content-Security-Policy",
        ),
        (
            "http_server_config:\n  headers:\n    X-Frame-Options: allow\n".into(),
            "D/web.yml:3:22: field http_server_config.headers.X-Frame-Options: X-Frame-Options must be one of deny, sameorigin, found \"allow\"",
        ),
        (
            "http_server_config:\n  http2: true\n".into(),
            "D/web.yml:2:10: field http_server_config.http2: HTTP/2 is not served here: the endpoints speak HTTP/1.1; set http2: false or remove the key",
        ),
        (
            "rate_limit:\n  interval: 1s\n  burst: 0\n".into(),
            "D/web.yml:3:10: field rate_limit.burst: burst must be at least 1, found 0: with none, every request would be refused",
        ),
        (
            "rate_limit:\n  interval: soon\n  burst: 5\n".into(),
            "D/web.yml:2:13: field rate_limit.interval: invalid duration \"soon\" (write e.g. 500ms, 5s, 2m)",
        ),
        (
            "rate_limit:\n  interval: 1s\n".into(),
            "D/web.yml:2:3: field rate_limit: missing burst: how many requests may come at once (at least 1)",
        ),
    ];
    let wrong: Vec<String> = cases
        .iter()
        .filter_map(|(text, want)| {
            let got = f.load(text);
            (got != *want).then(|| format!("{text}\n  got:  {got}\n  want: {want}"))
        })
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
