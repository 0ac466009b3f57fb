//! A Bedrock target's AWS settings (`aws:`): the region its requests are signed for, and the
//! credentials SigV4 signs with. The region is written or read from the endpoint's host
//! (`bedrock-runtime.<region>.amazonaws.com`). Keys named under `aws:` (`*_env`, `*_file`) are
//! read at load, like every other secret here. Otherwise AWS's own default chain finds them as
//! they are handed out (feature `aws-credential-chain`, [`crate::cloud::aws`]): the environment,
//! the shared config and credentials files (`aws.profile`, else `AWS_PROFILE`), web identity,
//! container credentials, the EC2 instance role, refreshed before they expire. A build without
//! the chain reads `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN` at load.

use std::path::Path;

use serde::Deserialize;
use serde_saphyr::{Location, Spanned};

use super::{read_secret, Api, ConfigError, FieldPath, Source};
pub(crate) use crate::probe::flavor::AwsAuth;
use crate::probe::flavor::{apis_where, AwsCredentials, AwsKeys};
use crate::secret::Secret;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAws {
    pub region: Option<Spanned<String>>,
    pub profile: Option<Spanned<String>>,
    pub access_key_id_env: Option<Spanned<String>>,
    pub access_key_id_file: Option<Spanned<String>>,
    pub secret_access_key_env: Option<Spanned<String>>,
    pub secret_access_key_file: Option<Spanned<String>>,
    pub session_token_env: Option<Spanned<String>>,
    pub session_token_file: Option<Spanned<String>>,
}

/// The variables every AWS tool reads, when the mapping names none.
const ACCESS_KEY_ID: &str = "AWS_ACCESS_KEY_ID";
const SECRET_ACCESS_KEY: &str = "AWS_SECRET_ACCESS_KEY";
const SESSION_TOKEN: &str = "AWS_SESSION_TOKEN";

/// What a target's requests are signed with: a `bedrock` target without a Bedrock API key
/// needs a region and credentials; `aws:` on any other target, or beside the key, is an error.
#[allow(clippy::too_many_arguments)]
pub(super) fn for_target(
    src: &Source,
    at: &FieldPath,
    api: Api,
    raw: Option<Spanned<RawAws>>,
    has_key: bool,
    base_url: &reqwest::Url,
    base: &Path,
    target_at: Location,
) -> Result<Option<AwsAuth>, ConfigError> {
    match (api.flavor().aws_signer().is_some(), raw) {
        (true, Some(a)) if has_key => Err(src.err(
            &at.key("aws"),
            a.referenced,
            "set aws: (SigV4 credentials) or api_key_env/api_key_file (a Bedrock API key), not both",
        )),
        // A Bedrock API key goes as a bearer token, unsigned.
        (true, None) if has_key => Ok(None),
        (true, raw) => load(src, at, raw, base_url, base, target_at).map(Some),
        (_, Some(a)) => Err(src.err(
            &at.key("aws"),
            a.referenced,
            format!(
                "aws: applies to api {} only, and this target speaks {}",
                apis_where(|f| f.aws_signer().is_some()),
                api.as_str()
            ),
        )),
        (_, None) => Ok(None),
    }
}

/// The target's region and credentials. `at` is the target's mapping, `target_at` where the
/// mapping starts (for an error about what is missing when there is no `aws:` to point at).
fn load(
    src: &Source,
    at: &FieldPath,
    raw: Option<Spanned<RawAws>>,
    base_url: &reqwest::Url,
    base: &Path,
    target_at: Location,
) -> Result<AwsAuth, ConfigError> {
    let (mut raw, aws_loc) = match raw {
        Some(r) => (r.value, r.referenced),
        None => (RawAws::default(), target_at),
    };
    let aws = at.key("aws");
    let region = region(src, &aws, raw.region.take(), base_url, aws_loc)?;
    let named_keys = [
        &raw.access_key_id_env,
        &raw.access_key_id_file,
        &raw.secret_access_key_env,
        &raw.secret_access_key_file,
        &raw.session_token_env,
        &raw.session_token_file,
    ]
    .iter()
    .any(|k| k.is_some());
    if let Some(p) = raw.profile.take() {
        let field = aws.key("profile");
        if named_keys {
            return Err(src.err(
                &field,
                p.referenced,
                "set aws.profile (keys from the shared config files) or keys under aws: (*_env, *_file), not both",
            ));
        }
        if p.value.trim().is_empty() {
            return Err(src.err(&field, p.referenced, "profile must not be empty"));
        }
        #[cfg(not(feature = "aws-credential-chain"))]
        return Err(src.err(
            &field,
            p.referenced,
            "this build has no AWS credential chain (cargo feature aws-credential-chain) to read profiles with: name keys under aws: instead",
        ));
        #[cfg(feature = "aws-credential-chain")]
        return Ok(chain(region, Some(p.value.trim().to_string())));
    }
    #[cfg(feature = "aws-credential-chain")]
    if !named_keys {
        return Ok(chain(region, None));
    }
    let keys = named(src, at, &aws, raw, base, aws_loc)?;
    Ok(AwsAuth {
        region,
        credentials: AwsCredentials::Fixed(keys),
    })
}

/// `aws.region`, which must agree with base_url's host; else the host's. `aws_loc` is where
/// `aws:` (or the target, without one) starts.
fn region(
    src: &Source,
    aws: &FieldPath,
    region: Option<Spanned<String>>,
    base_url: &reqwest::Url,
    aws_loc: Location,
) -> Result<String, ConfigError> {
    let from_host = base_url.host_str().and_then(region_of_host);
    match (region, from_host) {
        (Some(r), host) => {
            let field = aws.key("region");
            if !valid_region(&r.value) {
                return Err(src.err(
                    &field,
                    r.referenced,
                    format!("{:?} is not an AWS region (like us-east-1)", r.value),
                ));
            }
            if let Some(h) = host.filter(|h| *h != r.value) {
                return Err(src.err(
                    &field,
                    r.referenced,
                    format!("region {} differs from base_url's, {h}: requests signed for one region are refused by another", r.value),
                ));
            }
            Ok(r.value)
        }
        (None, Some(h)) => Ok(h.to_string()),
        (None, None) => Err(src.err(
            &aws.key("region"),
            aws_loc,
            "api bedrock needs aws.region: base_url's host names none (bedrock-runtime.<region>.amazonaws.com)",
        )),
    }
}

/// The keys named under `aws:` (`*_env`, `*_file`), each read from AWS's own variable when
/// neither of its keys is set. The session token is optional: only temporary credentials have
/// one.
fn named(
    src: &Source,
    at: &FieldPath,
    aws: &FieldPath,
    raw: RawAws,
    base: &Path,
    aws_loc: Location,
) -> Result<AwsKeys, ConfigError> {
    let required = |env: Option<Spanned<String>>,
                    file: Option<Spanned<String>>,
                    default: &str,
                    what: &str| {
        if env.is_none() && file.is_none() {
            return match std::env::var(default) {
                Ok(v) if !v.trim().is_empty() => Ok(Secret::new(v.trim().to_string())),
                _ => Err(src.err(at, aws_loc, format!("api bedrock signs with AWS credentials and {default} is not set: set {ACCESS_KEY_ID} and {SECRET_ACCESS_KEY}, name other variables or files under aws: ({what}_env, {what}_file), or give a Bedrock API key in api_key_env"))),
            };
        }
        read_secret(src, aws, env, file, base, what)?.ok_or_else(|| {
            src.err(
                &aws.key(&format!("{what}_env")),
                aws_loc,
                format!("api bedrock needs aws.{what}_env or aws.{what}_file"),
            )
        })
    };
    let access_key_id = required(
        raw.access_key_id_env,
        raw.access_key_id_file,
        ACCESS_KEY_ID,
        "access_key_id",
    )?;
    let secret_access_key = required(
        raw.secret_access_key_env,
        raw.secret_access_key_file,
        SECRET_ACCESS_KEY,
        "secret_access_key",
    )?;
    let session_token = match (raw.session_token_env, raw.session_token_file) {
        (None, None) => std::env::var(SESSION_TOKEN)
            .ok()
            .filter(|v| !v.trim().is_empty())
            .map(|v| Secret::new(v.trim().to_string())),
        (env, file) => read_secret(src, aws, env, file, base, "session_token")?,
    };
    Ok(AwsKeys {
        access_key_id,
        secret_access_key,
        session_token,
    })
}

/// Keys from AWS's default chain, found when the first request needs them.
#[cfg(feature = "aws-credential-chain")]
fn chain(region: String, profile: Option<String>) -> AwsAuth {
    let chain = crate::cloud::aws::Chain::new(region.clone(), profile);
    AwsAuth {
        region,
        credentials: AwsCredentials::Chain(std::sync::Arc::new(chain)),
    }
}

/// The region in a Bedrock runtime host: `bedrock-runtime[-fips].<region>.amazonaws.com[.cn]`,
/// or a VPC endpoint's `...bedrock-runtime.<region>.vpce.amazonaws.com`.
fn region_of_host(host: &str) -> Option<&str> {
    let labels: Vec<&str> = host.split('.').collect();
    let i = labels
        .iter()
        .position(|l| matches!(*l, "bedrock-runtime" | "bedrock-runtime-fips"))?;
    let region = *labels.get(i + 1)?;
    let aws = labels[i + 2..].contains(&"amazonaws");
    (aws && valid_region(region)).then_some(region)
}

/// An AWS region's shape: letters, then words, then a number (`us-east-1`, `us-gov-west-1`).
fn valid_region(r: &str) -> bool {
    let parts: Vec<&str> = r.split('-').collect();
    parts.len() >= 3
        && parts[0].len() == 2
        && parts[..parts.len() - 1]
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase()))
        && parts[parts.len() - 1].bytes().all(|b| b.is_ascii_digit())
        && !parts[parts.len() - 1].is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_from_hosts() {
        for (host, want) in [
            ("bedrock-runtime.us-east-1.amazonaws.com", Some("us-east-1")),
            (
                "bedrock-runtime-fips.us-gov-west-1.amazonaws.com",
                Some("us-gov-west-1"),
            ),
            (
                "bedrock-runtime.cn-north-1.amazonaws.com.cn",
                Some("cn-north-1"),
            ),
            (
                "vpce-0abc-xyz.bedrock-runtime.eu-west-3.vpce.amazonaws.com",
                Some("eu-west-3"),
            ),
            ("127.0.0.1", None),
            ("bedrock-runtime.example.com", None),
            ("bedrock-runtime.us-east-1.example.com", None),
        ] {
            assert_eq!(region_of_host(host), want, "{host}");
        }
        for bad in [
            "us",
            "us-east",
            "US-EAST-1",
            "us-east-x",
            "us--1",
            "useast-1",
        ] {
            assert!(!valid_region(bad), "{bad}");
        }
    }
}
