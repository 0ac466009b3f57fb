//! Reading the PEM files an operator names (certificates, a private key, a CA bundle) with
//! rustls-pki-types' parser, into errors that say which file and what is wrong with it.

use std::path::Path;

use rustls_pki_types::pem::{Error as PemError, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Every certificate in `path`, in file order (a leaf first, then its chain); at least one.
pub(crate) fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let text = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    certificates_in(&text, &path.display().to_string())
}

/// Every certificate in the PEM text `pem` (called `name` in errors); at least one.
pub(crate) fn certificates_in(
    pem: &[u8],
    name: &str,
) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{name} is not valid PEM: {e}"))?;
    if certs.is_empty() {
        return Err(format!(
            "{name} holds no PEM certificate (a -----BEGIN CERTIFICATE----- block)"
        ));
    }
    Ok(certs)
}

/// The first private key in `path` (PKCS#8, PKCS#1 RSA or SEC1 EC).
pub(crate) fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| described(path, "private key", e))
}

fn described(path: &Path, what: &str, e: PemError) -> String {
    let p = path.display();
    match e {
        PemError::Io(io) => format!("cannot read {p}: {io}"),
        PemError::NoItemsFound => format!("{p} holds no PEM {what}"),
        other => format!("{p} is not valid PEM: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_file_and_a_file_without_pem_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.pem");
        let e = certificates(&missing).unwrap_err();
        assert!(
            e.starts_with(&format!("cannot read {}", missing.display())),
            "{e}"
        );
        let text = dir.path().join("text.pem");
        std::fs::write(&text, "not a certificate\n").unwrap();
        let e = certificates(&text).unwrap_err();
        assert!(e.contains("holds no PEM certificate"), "{e}");
        let e = private_key(&text).unwrap_err();
        assert!(e.ends_with("holds no PEM private key"), "{e}");
    }
}
