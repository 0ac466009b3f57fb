//! The sim as Amazon Bedrock: its event-stream frames, written by `aws-smithy-eventstream` so
//! they are correct by construction (and a fault is one on purpose); its error answers (a
//! `{"message"}` body with the type in `x-amzn-ErrorType`); and its door, SigV4. A request
//! signed with the sim's test key ([`ACCESS_KEY_ID`], [`SECRET_ACCESS_KEY`]) is signed again
//! from what arrived, with the same crate, and refused unless the signatures agree; another key
//! id is unknown to it; a Bedrock API key (a bearer token) is let in.

use std::sync::LazyLock;
use std::time::SystemTime;

use aws_smithy_eventstream::frame::write_message_to;
use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use serde_json::{json, Value};

use super::credentials::{AwsKeyCheck, Issued};
use super::http::HttpRequest;
use crate::probe::flavor::AwsKeys;
use crate::secret::Secret;

/// The sim's test credentials, the only ones whose signature it checks.
pub const ACCESS_KEY_ID: &str = "AKIDSIMEXAMPLE";
pub const SECRET_ACCESS_KEY: &str = "sim/Bedrock+K7MDENG/bPxRfiCYSIMEXAMPLEKEY";

/// One frame: an event (named by its type) or, named `exception:<type>`, an exception.
pub(super) fn frame(name: &str, payload: &[u8]) -> Vec<u8> {
    let m = Message::new(payload.to_vec());
    let m = match name.strip_prefix("exception:") {
        Some(ty) => m
            .add_header(Header::new(
                ":exception-type",
                HeaderValue::String(ty.to_string().into()),
            ))
            .add_header(Header::new(
                ":content-type",
                HeaderValue::String("application/json".into()),
            ))
            .add_header(Header::new(
                ":message-type",
                HeaderValue::String("exception".into()),
            )),
        None => m
            .add_header(Header::new(
                ":event-type",
                HeaderValue::String(name.to_string().into()),
            ))
            .add_header(Header::new(
                ":content-type",
                HeaderValue::String("application/json".into()),
            ))
            .add_header(Header::new(
                ":message-type",
                HeaderValue::String("event".into()),
            )),
    };
    let mut out = Vec::new();
    // Only a header name over 255 bytes fails, and these are fixed.
    write_message_to(&m, &mut out).expect("the sim's frames have short header names");
    out
}

/// What keeps a Bedrock stream busy without content: an empty text delta.
pub(super) static KEEP_ALIVE: LazyLock<Vec<u8>> = LazyLock::new(|| {
    frame(
        "contentBlockDelta",
        br#"{"contentBlockIndex":0,"delta":{"text":""}}"#,
    )
});

/// A frame whose prelude claims more than any cap allows, whole and correct: the client must
/// refuse it from its first twelve bytes.
pub(super) fn huge_frame() -> Vec<u8> {
    let text = "x".repeat(2 * 1024 * 1024);
    let payload = json!({"contentBlockIndex": 0, "delta": {"text": text}}).to_string();
    frame("contentBlockDelta", payload.as_bytes())
}

/// Bedrock's error type for a status, and its message.
fn error_of(status: u16) -> (&'static str, &'static str) {
    match status {
        400 => (
            "ValidationException",
            "Input is too long for requested model.",
        ),
        401 | 403 => (
            "AccessDeniedException",
            "You don't have access to the model with the specified model ID.",
        ),
        404 => (
            "ResourceNotFoundException",
            "Could not resolve the foundation model from the provided model identifier.",
        ),
        429 => (
            "ThrottlingException",
            "Too many requests, please wait before trying again.",
        ),
        503 | 529 => ("ServiceUnavailableException", "Service unavailable."),
        _ => (
            "InternalServerException",
            "The server encountered an internal error while processing the request.",
        ),
    }
}

/// An error answer's body, for a status.
pub(super) fn error_body(status: u16) -> Value {
    json!({"message": error_of(status).1})
}

/// The header naming an error answer's type.
pub(super) fn error_type_header(status: u16) -> (&'static str, String) {
    error_type(error_of(status).0)
}

fn error_type(ty: &str) -> (&'static str, String) {
    (
        "x-amzn-errortype",
        format!("{ty}:http://internal.amazon.com/coral/com.amazon.bedrock/"),
    )
}

/// Why a request is refused at the door: status, the `x-amzn-ErrorType` header, body.
pub(super) struct Refusal {
    pub status: u16,
    pub header: (&'static str, String),
    pub body: Value,
}

fn refuse(status: u16, ty: &str, message: impl Into<String>) -> Refusal {
    Refusal {
        status,
        header: error_type(ty),
        body: json!({"message": message.into()}),
    }
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
    let incomplete = |what: &str| {
        refuse(
            403,
            "IncompleteSignatureException",
            format!("Authorization header requires {what}."),
        )
    };
    let fields = auth
        .strip_prefix("AWS4-HMAC-SHA256 ")
        .ok_or_else(|| incomplete("the AWS4-HMAC-SHA256 algorithm"))?;
    let field = |name: &str| {
        fields
            .split(',')
            .find_map(|f| f.trim().strip_prefix(name)?.strip_prefix('='))
    };
    let credential = field("Credential").ok_or_else(|| incomplete("'Credential' parameter"))?;
    let signed = field("SignedHeaders").ok_or_else(|| incomplete("'SignedHeaders' parameter"))?;
    field("Signature").ok_or_else(|| incomplete("'Signature' parameter"))?;
    let scope: Vec<&str> = credential.split('/').collect();
    let [key_id, _date, region, "bedrock", "aws4_request"] = scope[..] else {
        return Err(incomplete(
            "a credential scope of key/date/region/bedrock/aws4_request",
        ));
    };
    let signed: Vec<&str> = signed.split(';').collect();
    if !signed.contains(&"host") || !signed.contains(&"x-amz-date") {
        return Err(incomplete("host and x-amz-date among the signed headers"));
    }
    let invalid = || {
        refuse(
            403,
            "UnrecognizedClientException",
            "The security token included in the request is invalid.",
        )
    };
    let sent_token = req.header("x-amz-security-token");
    let secret = match issued.check_aws_key(key_id) {
        _ if key_id == ACCESS_KEY_ID => SECRET_ACCESS_KEY.to_string(),
        AwsKeyCheck::Unknown => return Err(invalid()),
        AwsKeyCheck::Expired => {
            return Err(refuse(
                403,
                "ExpiredTokenException",
                "The security token included in the request is expired",
            ))
        }
        AwsKeyCheck::Good { secret, token } if sent_token == Some(token.as_str()) => secret,
        AwsKeyCheck::Good { .. } => return Err(invalid()),
    };
    let time = req
        .header("x-amz-date")
        .and_then(amz_date)
        .ok_or_else(|| incomplete("a valid X-Amz-Date"))?;
    let test_key = AwsKeys {
        access_key_id: Secret::new(key_id.into()),
        secret_access_key: Secret::new(secret),
        session_token: sent_token.map(|t| Secret::new(t.to_string())),
    };
    // Signed again from what arrived: the headers the client named (but those the signer adds
    // itself, and the host, which it takes from the URL), the path as sent, the body.
    let mut headers = reqwest::header::HeaderMap::new();
    for (k, v) in &req.headers {
        let name = k.to_ascii_lowercase();
        let added = matches!(
            name.as_str(),
            "host" | "x-amz-date" | "x-amz-security-token"
        );
        if signed.contains(&name.as_str()) && !added {
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
    let mismatch = || {
        refuse(
            403,
            "InvalidSignatureException",
            "The request signature we calculated does not match the signature you provided.",
        )
    };
    crate::probe::flavor::bedrock::sign_request(
        &mut headers,
        &url,
        &req.body,
        region,
        &test_key,
        time,
    )
    .map_err(|_| mismatch())?;
    match headers.get("authorization").and_then(|v| v.to_str().ok()) {
        Some(ours) if ours == auth => Ok(()),
        _ => Err(mismatch()),
    }
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

/// The model id in a ConverseStream path (`.../model/<id>/converse-stream`), decoded.
pub(super) fn model_of(path: &str) -> Option<String> {
    let rest = path.split("/model/").nth(1)?;
    let id = rest.strip_suffix("/converse-stream")?;
    percent_encoding::percent_decode_str(id)
        .decode_utf8()
        .ok()
        .map(|s| s.into_owned())
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
        assert!(r.header.1.starts_with("InvalidSignatureException"));
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
        assert!(r
            .header
            .1
            .starts_with("MissingAuthenticationTokenException"));
    }

    #[test]
    fn model_ids_from_paths() {
        assert_eq!(
            model_of("/s/x/v1/model/anthropic.claude-v2%3A1/converse-stream").as_deref(),
            Some("anthropic.claude-v2:1")
        );
        assert_eq!(model_of("/v1/chat/completions"), None);
    }
}
