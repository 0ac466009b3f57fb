//! Test certificates, made at test time with rcgen: a private CA, a server certificate for
//! `localhost` and `127.0.0.1`, a client certificate, one already expired, one for another name,
//! one that expires in a few days, and a second CA nobody trusts. Written as PEM files into a
//! temporary folder, the way an operator's files sit on disk.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
};

use super::TempDir;

/// A certificate and its key, as PEM files on disk.
pub struct Pair {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Pair {
    pub fn cert(&self) -> &str {
        self.cert.to_str().unwrap()
    }
    pub fn key(&self) -> &str {
        self.key.to_str().unwrap()
    }
}

/// Everything a TLS test needs, in one folder.
pub struct Pki {
    pub dir: TempDir,
    /// The private CA's certificate (what `ca_file` names).
    pub ca: PathBuf,
    /// For `localhost` and `127.0.0.1`, signed by the CA, valid now.
    pub server: Pair,
    /// A client certificate (`CN=canary-client`) signed by the CA.
    pub client: Pair,
    /// For `localhost`, signed by the CA, expired a year ago.
    pub expired: Pair,
    /// For `wrong.example`, signed by the CA: a name mismatch at `localhost`.
    pub wrong_name: Pair,
    /// For `localhost`, signed by the CA, expiring [`Pki::SOON_DAYS`] days from now.
    pub expiring: Pair,
    /// For `localhost`, signed by a second CA that nothing trusts.
    pub untrusted: Pair,
    /// A client certificate signed by the untrusted CA.
    pub stranger: Pair,
    /// The untrusted CA's certificate.
    pub other_ca: PathBuf,
}

impl Pki {
    pub const SOON_DAYS: i64 = 10;

    pub fn new(tag: &str) -> Pki {
        let dir = TempDir::new(&format!("pki-{tag}"));
        let ca = issuer("llm-canary test CA");
        let other = issuer("somebody else's CA");
        let ca_path = write(dir.path(), "ca.pem", &ca.pem());
        let other_path = write(dir.path(), "other-ca.pem", &other.pem());
        let now = jiff::Timestamp::now();
        let server = leaf(
            dir.path(),
            "server",
            &["localhost", "127.0.0.1"],
            &ca,
            None,
            false,
        );
        let client = leaf(dir.path(), "client", &["canary-client"], &ca, None, true);
        let expired = leaf(
            dir.path(),
            "expired",
            &["localhost", "127.0.0.1"],
            &ca,
            Some((
                now - jiff::SignedDuration::from_hours(2 * 365 * 24),
                now - jiff::SignedDuration::from_hours(365 * 24),
            )),
            false,
        );
        let wrong_name = leaf(
            dir.path(),
            "wrong-name",
            &["wrong.example"],
            &ca,
            None,
            false,
        );
        let expiring = leaf(
            dir.path(),
            "expiring",
            &["localhost", "127.0.0.1"],
            &ca,
            Some((
                now - jiff::SignedDuration::from_hours(24),
                now + jiff::SignedDuration::from_hours(Pki::SOON_DAYS * 24),
            )),
            false,
        );
        let untrusted = leaf(
            dir.path(),
            "untrusted",
            &["localhost", "127.0.0.1"],
            &other,
            None,
            false,
        );
        let stranger = leaf(dir.path(), "stranger", &["stranger"], &other, None, true);
        Pki {
            dir,
            ca: ca_path,
            server,
            client,
            expired,
            wrong_name,
            expiring,
            untrusted,
            stranger,
            other_ca: other_path,
        }
    }

    pub fn ca(&self) -> &str {
        self.ca.to_str().unwrap()
    }

    /// The expiring certificate's notAfter, in seconds since the epoch (whole seconds, as X.509
    /// holds it), as written beside it when it was made.
    pub fn expiring_not_after(&self) -> i64 {
        std::fs::read_to_string(self.dir.path().join("expiring.not-after"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }
}

fn issuer(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
    dn.push(DnType::OrganizationName, "llm-canary tests");
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
}

fn leaf(
    dir: &Path,
    name: &str,
    sans: &[&str],
    ca: &CertifiedIssuer<'static, KeyPair>,
    validity: Option<(jiff::Timestamp, jiff::Timestamp)>,
    client: bool,
) -> Pair {
    let mut params =
        CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, sans[0]);
    params.distinguished_name = dn;
    params.extended_key_usages = vec![if client {
        ExtendedKeyUsagePurpose::ClientAuth
    } else {
        ExtendedKeyUsagePurpose::ServerAuth
    }];
    let now = jiff::Timestamp::now();
    let (from, to) = validity.unwrap_or((
        now - jiff::SignedDuration::from_hours(24),
        now + jiff::SignedDuration::from_hours(365 * 24),
    ));
    params.not_before = offset(from);
    params.not_after = offset(to);
    std::fs::write(
        dir.join(format!("{name}.not-after")),
        params.not_after.unix_timestamp().to_string(),
    )
    .unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, ca).unwrap();
    Pair {
        cert: write(dir, &format!("{name}.pem"), &cert.pem()),
        key: write(dir, &format!("{name}-key.pem"), &key.serialize_pem()),
    }
}

fn offset(t: jiff::Timestamp) -> time::OffsetDateTime {
    time::OffsetDateTime::from_unix_timestamp(t.as_second()).unwrap()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}
