//! Credentials that clouds hand out and take back: AWS's for SigV4 ([`aws`], from AWS's own
//! chain) and Entra ID's bearer tokens for Azure ([`entra`]), each refreshed before it expires
//! by one rule ([`refresh`]). A credential is fetched when a request needs it, before the run's
//! clock starts, so its fetch is never part of a measurement.

pub(crate) mod aws;
pub(crate) mod entra;
mod refresh;

/// Why no credential could be had; the text names the source, never a secret.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct CredentialError(pub String);
