//! An Azure OpenAI target's settings beside the key: `api_version` (the `api-version` every
//! request names; Azure's current GA version unless given) and `entra:`, Entra ID bearer tokens
//! in place of a key — client credentials (a tenant, an application's client id, its secret
//! from the environment or a file) or the resource's managed identity.

use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::{read_secret, Api, ConfigError, FieldPath, Source};
use crate::cloud::entra::{Entra, EntraSource};
use crate::probe::flavor::apis_where;

/// `entra:` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawEntra {
    pub tenant_id: Option<Spanned<String>>,
    pub client_id: Option<Spanned<String>>,
    pub client_secret_env: Option<Spanned<String>>,
    pub client_secret_file: Option<Spanned<String>>,
    pub managed_identity: Option<Spanned<bool>>,
}

/// The variable the Azure SDKs read a client secret from, when `entra:` names none.
const CLIENT_SECRET: &str = "AZURE_CLIENT_SECRET";

/// The `api-version` an Azure OpenAI target's requests name: `Some` for that API only.
pub(super) fn api_version(
    src: &Source,
    at: &FieldPath,
    api: Api,
    raw: Option<Spanned<String>>,
) -> Result<Option<String>, ConfigError> {
    let field = at.key("api_version");
    match (api.flavor().api_version(), raw) {
        (Some(default), None) => Ok(Some(default.to_string())),
        (Some(_), Some(v)) if valid_api_version(&v.value) => Ok(Some(v.value)),
        (Some(default), Some(v)) => Err(src.err(
            &field,
            v.referenced,
            format!(
                "{:?} is not an API version (like {default} or 2025-04-01-preview)",
                v.value
            ),
        )),
        (None, Some(v)) => Err(src.err(
            &field,
            v.referenced,
            format!(
                "api_version applies to api {} only, and this target speaks {}",
                apis_where(|f| f.api_version().is_some()),
                api.as_str()
            ),
        )),
        (None, None) => Ok(None),
    }
}

/// `YYYY-MM-DD`, or `YYYY-MM-DD-preview`.
fn valid_api_version(v: &str) -> bool {
    let date = v.strip_suffix("-preview").unwrap_or(v);
    let b = date.as_bytes();
    b.len() == 10
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            _ => c.is_ascii_digit(),
        })
}

/// A target's Entra ID token source: `entra:` on an Azure OpenAI target without a key.
pub(super) fn entra(
    src: &Source,
    at: &FieldPath,
    api: Api,
    raw: Option<Spanned<RawEntra>>,
    has_key: bool,
    base: &Path,
) -> Result<Option<Arc<Entra>>, ConfigError> {
    let Some(raw) = raw else { return Ok(None) };
    let field = at.key("entra");
    if !api.flavor().takes_entra() {
        return Err(src.err(
            &field,
            raw.referenced,
            format!(
                "entra: applies to api {} only, and this target speaks {}",
                apis_where(|f| f.takes_entra()),
                api.as_str()
            ),
        ));
    }
    if has_key {
        return Err(src.err(
            &field,
            raw.referenced,
            "set entra: (Entra ID tokens) or api_key_env/api_key_file (a key), not both",
        ));
    }
    let (loc, r) = (raw.referenced, raw.value);
    let source = if r.managed_identity.as_ref().is_some_and(|m| m.value) {
        managed_identity(src, &field, r)?
    } else {
        client_credentials(src, &field, loc, r, base)?
    };
    Ok(Some(Arc::new(Entra::new(source))))
}

/// `managed_identity: true`: the resource's identity, a user-assigned one by `client_id`; the
/// client credentials' keys are errors.
fn managed_identity(
    src: &Source,
    field: &FieldPath,
    r: RawEntra,
) -> Result<EntraSource, ConfigError> {
    let stray = [
        ("tenant_id", r.tenant_id.as_ref().map(|s| s.referenced)),
        (
            "client_secret_env",
            r.client_secret_env.as_ref().map(|s| s.referenced),
        ),
        (
            "client_secret_file",
            r.client_secret_file.as_ref().map(|s| s.referenced),
        ),
    ];
    if let Some((name, Some(at))) = stray.into_iter().find(|(_, l)| l.is_some()) {
        return Err(src.err(
            &field.key(name),
            at,
            format!("{name} is for client credentials; a managed identity takes client_id at most (a user-assigned identity)"),
        ));
    }
    let client_id = text(src, field, r.client_id, "client_id")?;
    Ok(EntraSource::ManagedIdentity { client_id })
}

/// Client credentials: a tenant, an application's client id and its secret (named under
/// `entra:`, else [`CLIENT_SECRET`]). `loc` is where `entra:` starts.
fn client_credentials(
    src: &Source,
    field: &FieldPath,
    loc: serde_saphyr::Location,
    r: RawEntra,
    base: &Path,
) -> Result<EntraSource, ConfigError> {
    let need = |v: Option<String>, name: &str| {
        v.ok_or_else(|| {
            src.err(
                &field.key(name),
                loc,
                format!("entra: needs {name} for client credentials, or managed_identity: true"),
            )
        })
    };
    let tenant_id = need(text(src, field, r.tenant_id, "tenant_id")?, "tenant_id")?;
    let client_id = need(text(src, field, r.client_id, "client_id")?, "client_id")?;
    let client_secret = match (r.client_secret_env, r.client_secret_file) {
        (None, None) => match std::env::var(CLIENT_SECRET) {
            Ok(v) if !v.trim().is_empty() => crate::secret::Secret::new(v.trim().to_string()),
            _ => return Err(src.err(
                field,
                loc,
                format!("entra: client credentials need a secret and {CLIENT_SECRET} is not set: set it, name another variable or a file (client_secret_env, client_secret_file), or use managed_identity: true"),
            )),
        },
        (env, file) => read_secret(src, field, env, file, base, "client_secret")?
            .ok_or_else(|| src.err(field, loc, "entra: needs client_secret_env or client_secret_file"))?,
    };
    Ok(EntraSource::ClientCredentials {
        tenant_id,
        client_id,
        client_secret,
    })
}

/// A text key of `entra:` (`field`), trimmed; written empty, an error.
fn text(
    src: &Source,
    field: &FieldPath,
    v: Option<Spanned<String>>,
    name: &str,
) -> Result<Option<String>, ConfigError> {
    match v {
        Some(s) if s.value.trim().is_empty() => Err(src.err(
            &field.key(name),
            s.referenced,
            format!("{name} must not be empty"),
        )),
        Some(s) => Ok(Some(s.value.trim().to_string())),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_versions() {
        for good in ["2024-10-21", "2025-04-01-preview"] {
            assert!(valid_api_version(good), "{good}");
        }
        for bad in [
            "",
            "2024-10",
            "2024/10/21",
            "2024-10-21-beta",
            "v1",
            "2024-10-211",
        ] {
            assert!(!valid_api_version(bad), "{bad}");
        }
    }
}
