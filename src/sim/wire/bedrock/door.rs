//! Bedrock's door, SigV4: a request signed with the sim's test key ([`ACCESS_KEY_ID`],
//! [`SECRET_ACCESS_KEY`]) or with keys the credential stand-ins issued is signed again from
//! what arrived, with the probe's own signer, and refused unless the signatures agree; another
//! key id is unknown to it, an issued one may have expired; a Bedrock API key (a bearer token)
//! is let in. Each refusal is AWS's: its status, type and message.

use std::time::SystemTime;

use super::errors::error_type;
use crate::probe::flavor::AwsKeys;
use crate::secret::Secret;
use crate::sim::credentials::{AwsKeyCheck, Issued};
use crate::sim::http::HttpRequest;
use crate::sim::wire::Refusal;

/// The sim's test credentials, the only ones whose signature it checks.
pub const ACCESS_KEY_ID: &str = "AKIDSIMEXAMPLE";
pub const SECRET_ACCESS_KEY: &str = "sim/Bedrock+K7MDENG/bPxRfiCYSIMEXAMPLEKEY";

fn refuse(status: u16, ty: &str, message: impl Into<String>) -> Refusal {
    Refusal {
        status,
        headers: vec![error_type(ty)],
        body: serde_json::json!({"message": message.into()}),
    }
}

/// A signature that lacks `what`.
fn incomplete(what: &str) -> Refusal {
    refuse(
        403,
        "IncompleteSignatureException",
        format!("Authorization header requires {what}."),
    )
}

fn invalid() -> Refusal {
    refuse(
        403,
        "UnrecognizedClientException",
        "The security token included in the request is invalid.",
    )
}

fn mismatch() -> Refusal {
    refuse(
        403,
        "InvalidSignatureException",
        "The request signature we calculated does not match the signature you provided.",
    )
}

/// Lets in a request signed with the test key or with keys the credential stand-ins issued and
/// that have not expired (its signature checked), or carrying a Bedrock API key; refuses one
/// unsigned, malformed, signed by another key or an expired one, or signed wrongly.
pub(super) fn check_auth(req: &HttpRequest, issued: &Issued) -> Result<(), Refusal> {
    let Some(auth) = req.header("authorization") else {
        return Err(refuse(
            403,
            "MissingAuthenticationTokenException",
            "Missing Authentication Token",
        ));
    };
    if auth.starts_with("Bearer ") {
        return Ok(());
    }
    let signed = Signed::parse(auth)?;
    let sent_token = req.header("x-amz-security-token");
    let secret = secret_for(signed.key_id, sent_token, issued)?;
    let time = req
        .header("x-amz-date")
        .and_then(amz_date)
        .ok_or_else(|| incomplete("a valid X-Amz-Date"))?;
    let keys = AwsKeys {
        access_key_id: Secret::new(signed.key_id.into()),
        secret_access_key: Secret::new(secret),
        session_token: sent_token.map(|t| Secret::new(t.to_string())),
    };
    if sign_again(req, &signed, &keys, time)? == auth {
        Ok(())
    } else {
        Err(mismatch())
    }
}

/// What a SigV4 `Authorization` header names: the key, the region, the headers it signed.
struct Signed<'a> {
    key_id: &'a str,
    region: &'a str,
    headers: Vec<&'a str>,
}

impl<'a> Signed<'a> {
    /// The header's fields, each required, the scope Bedrock's and the host and date signed.
    fn parse(auth: &'a str) -> Result<Signed<'a>, Refusal> {
        let fields = auth
            .strip_prefix("AWS4-HMAC-SHA256 ")
            .ok_or_else(|| incomplete("the AWS4-HMAC-SHA256 algorithm"))?;
        let field = |name: &str| {
            fields
                .split(',')
                .find_map(|f| f.trim().strip_prefix(name)?.strip_prefix('='))
        };
        let credential = field("Credential").ok_or_else(|| incomplete("'Credential' parameter"))?;
        let signed =
            field("SignedHeaders").ok_or_else(|| incomplete("'SignedHeaders' parameter"))?;
        field("Signature").ok_or_else(|| incomplete("'Signature' parameter"))?;
        let scope: Vec<&str> = credential.split('/').collect();
        let [key_id, _date, region, "bedrock", "aws4_request"] = scope[..] else {
            return Err(incomplete(
                "a credential scope of key/date/region/bedrock/aws4_request",
            ));
        };
        let headers: Vec<&str> = signed.split(';').collect();
        if !headers.contains(&"host") || !headers.contains(&"x-amz-date") {
            return Err(incomplete("host and x-amz-date among the signed headers"));
        }
        Ok(Signed {
            key_id,
            region,
            headers,
        })
    }
}

/// The secret to check a signature by `key_id` with: the test key's, or an issued key's that
/// has not expired and came with its own session token.
fn secret_for(key_id: &str, sent_token: Option<&str>, issued: &Issued) -> Result<String, Refusal> {
    match issued.check_aws_key(key_id) {
        _ if key_id == ACCESS_KEY_ID => Ok(SECRET_ACCESS_KEY.to_string()),
        AwsKeyCheck::Unknown => Err(invalid()),
        AwsKeyCheck::Expired => Err(refuse(
            403,
            "ExpiredTokenException",
            "The security token included in the request is expired",
        )),
        AwsKeyCheck::Good { secret, token } if sent_token == Some(token.as_str()) => Ok(secret),
        AwsKeyCheck::Good { .. } => Err(invalid()),
    }
}

/// The `Authorization` the request would carry, signed again from what arrived: the headers
/// the client named (but those the signer adds itself, and the host, which it takes from the
/// URL), the path as sent, the body.
fn sign_again(
    req: &HttpRequest,
    signed: &Signed,
    keys: &AwsKeys,
    time: SystemTime,
) -> Result<String, Refusal> {
    let mut headers = reqwest::header::HeaderMap::new();
    for (k, v) in &req.headers {
        let name = k.to_ascii_lowercase();
        let added = matches!(
            name.as_str(),
            "host" | "x-amz-date" | "x-amz-security-token"
        );
        if signed.headers.contains(&name.as_str()) && !added {
            if let (Ok(k), Ok(v)) = (
                reqwest::header::HeaderName::from_bytes(name.as_bytes()),
                reqwest::header::HeaderValue::from_str(v),
            ) {
                headers.append(k, v);
            }
        }
    }
    let host = req.header("host").unwrap_or("localhost");
    let url = format!("http://{host}{}", req.path);
    crate::probe::flavor::bedrock::sign_request(
        &mut headers,
        &url,
        &req.body,
        signed.region,
        keys,
        time,
    )
    .map_err(|_| mismatch())?;
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .ok_or_else(mismatch)
}

/// `X-Amz-Date`'s `20260101T000000Z`.
fn amz_date(text: &str) -> Option<SystemTime> {
    let t = jiff::fmt::strtime::parse("%Y%m%dT%H%M%SZ", text).ok()?;
    let ts = t
        .to_datetime()
        .ok()?
        .to_zoned(jiff::tz::TimeZone::UTC)
        .ok()?;
    Some(SystemTime::from(ts.timestamp()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signed_request(auth: &AwsKeys, body: &[u8]) -> HttpRequest {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("content-type", "application/json".parse().unwrap());
        headers.insert("x-request-id", "r1".parse().unwrap());
        let path = "/s/healthy/v1/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse-stream";
        let url = format!("http://127.0.0.1:4000{path}");
        crate::probe::flavor::bedrock::sign_request(
            &mut headers,
            &url,
            body,
            "us-east-1",
            auth,
            SystemTime::now(),
        )
        .unwrap();
        let mut pairs: Vec<(String, String)> = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_string()))
            .collect();
        pairs.push(("Host".into(), "127.0.0.1:4000".into()));
        HttpRequest {
            method: "POST".into(),
            path: path.into(),
            headers: pairs,
            body: body.to_vec(),
        }
    }

    fn key(secret: &str) -> AwsKeys {
        AwsKeys {
            access_key_id: Secret::new(ACCESS_KEY_ID.into()),
            secret_access_key: Secret::new(secret.into()),
            session_token: Some(Secret::new("tok".into())),
        }
    }

    /// The `x-amzn-ErrorType` a refusal names.
    fn error_type_of(r: &Refusal) -> &str {
        &r.headers[0].1
    }

    #[test]
    fn a_signature_is_checked_not_only_present() {
        let good = signed_request(&key(SECRET_ACCESS_KEY), b"{}");
        assert!(check_auth(&good, &Issued::default()).is_ok());
        // Another secret, a changed body, a changed header: each fails the check.
        let wrong = signed_request(&key("not-the-secret"), b"{}");
        assert_eq!(
            check_auth(&wrong, &Issued::default())
                .err()
                .map(|r| r.status),
            Some(403)
        );
        let mut tampered = good.clone();
        tampered.body = b"{\"x\":1}".to_vec();
        let r = check_auth(&tampered, &Issued::default()).err().unwrap();
        assert!(error_type_of(&r).starts_with("InvalidSignatureException"));
        let mut tampered = good.clone();
        for (k, v) in &mut tampered.headers {
            if k == "x-request-id" {
                *v = "r2".into();
            }
        }
        assert!(check_auth(&tampered, &Issued::default()).is_err());
        let mut unsigned = good;
        unsigned.headers.retain(|(k, _)| k != "authorization");
        let r = check_auth(&unsigned, &Issued::default()).err().unwrap();
        assert!(error_type_of(&r).starts_with("MissingAuthenticationTokenException"));
    }
}
