//! The sim as the places clouds hand credentials out from, on loopback, each issuing
//! short-lived ones ([`LIFETIME`]) that the sim's Bedrock and Azure doors then accept until
//! they expire — so a test proves a request was signed with what the stand-in issued, and with
//! a second credential after the first expired. The SDKs' own endpoint overrides point at them:
//!
//! - EC2 IMDSv2 (`AWS_EC2_METADATA_SERVICE_ENDPOINT=http://SIM`): `PUT /latest/api/token`, then
//!   `GET /latest/meta-data/iam/security-credentials/` (the role) and `.../<role>` (its keys);
//! - ECS and EKS Pod Identity container credentials
//!   (`AWS_CONTAINER_CREDENTIALS_FULL_URI=http://SIM/container/credentials`);
//! - STS `AssumeRoleWithWebIdentity` (`AWS_ENDPOINT_URL_STS=http://SIM`, with `AWS_ROLE_ARN` and
//!   `AWS_WEB_IDENTITY_TOKEN_FILE`), `POST /`;
//! - Entra ID's token endpoint (`AZURE_AUTHORITY_HOST=http://SIM`),
//!   `POST /<tenant>/oauth2/v2.0/token`, client credentials with [`ENTRA_CLIENT_SECRET`];
//! - Azure's managed identity endpoint (`AZURE_POD_IDENTITY_AUTHORITY_HOST=http://SIM`),
//!   `GET /metadata/identity/oauth2/token` with `Metadata: true`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use serde_json::json;

use super::conn::Conn;
use super::http::{self, respond_json, HttpRequest};

/// How long every credential the stand-ins issue is good for.
pub const LIFETIME: Duration = Duration::from_secs(12);
/// The instance's role, as IMDS names it.
pub const ROLE: &str = "sim-instance-role";
/// The only client secret the Entra stand-in takes.
pub const ENTRA_CLIENT_SECRET: &str = "sim-entra-client-secret";
/// What the Entra stand-in's tokens start with, so the Azure door knows to check them.
pub const ENTRA_TOKEN_PREFIX: &str = "sim-entra-";

/// AWS keys issued: secret and session token per key id, with the expiry.
struct AwsIssued {
    secret: String,
    token: String,
    expires: SystemTime,
}

/// What the stand-ins issued, for the doors to check.
#[derive(Default)]
pub(super) struct Issued {
    n: AtomicU64,
    aws: Mutex<HashMap<String, AwsIssued>>,
    imds_tokens: Mutex<Vec<String>>,
    entra: Mutex<HashMap<String, SystemTime>>,
    /// The `Authorization` each container-credentials request carried (EKS Pod Identity's
    /// token), in order.
    container_auth: Mutex<Vec<Option<String>>>,
}

/// Why the Bedrock door refuses an issued key.
pub(super) enum AwsKeyCheck {
    /// Not one of the stand-ins' keys.
    Unknown,
    Expired,
    /// Good: its secret, to check the signature with.
    Good {
        secret: String,
        token: String,
    },
}

impl Issued {
    fn next(&self) -> u64 {
        self.n.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// New AWS keys from `source` (`IMDS`, `ECS`, `STS`): key id, secret, token, expiry.
    fn aws_keys(&self, source: &str) -> (String, String, String, SystemTime) {
        let n = self.next();
        let id = format!("ASIASIM{source}{n:04}");
        let secret = format!("simSecret{source}{n:04}x{:016x}", fastrand::u64(..));
        let token = format!("simSession{source}{n:04}x{:016x}", fastrand::u64(..));
        let expires = SystemTime::now() + LIFETIME;
        self.aws.lock().expect("sim issued lock").insert(
            id.clone(),
            AwsIssued {
                secret: secret.clone(),
                token: token.clone(),
                expires,
            },
        );
        (id, secret, token, expires)
    }

    pub(super) fn check_aws_key(&self, key_id: &str) -> AwsKeyCheck {
        match self.aws.lock().expect("sim issued lock").get(key_id) {
            None => AwsKeyCheck::Unknown,
            Some(k) if SystemTime::now() >= k.expires => AwsKeyCheck::Expired,
            Some(k) => AwsKeyCheck::Good {
                secret: k.secret.clone(),
                token: k.token.clone(),
            },
        }
    }

    /// Whether a bearer token is one the Entra stand-ins issued and still good; `None` for one
    /// they did not issue.
    pub(super) fn entra_token_good(&self, token: &str) -> Option<bool> {
        if !token.starts_with(ENTRA_TOKEN_PREFIX) {
            return None;
        }
        let map = self.entra.lock().expect("sim issued lock");
        Some(map.get(token).is_some_and(|e| SystemTime::now() < *e))
    }

    /// Every secret issued so far (AWS secrets and session tokens, Entra tokens), for tests
    /// to look for where none may be.
    pub(super) fn secrets(&self) -> Vec<String> {
        let aws = self.aws.lock().expect("sim issued lock");
        let entra = self.entra.lock().expect("sim issued lock");
        aws.values()
            .flat_map(|k| [k.secret.clone(), k.token.clone()])
            .chain(entra.keys().cloned())
            .collect()
    }

    pub(super) fn container_authorizations(&self) -> Vec<Option<String>> {
        self.container_auth.lock().expect("sim issued lock").clone()
    }

    fn entra_token(&self) -> String {
        let token = format!(
            "{ENTRA_TOKEN_PREFIX}{}-{:016x}",
            self.next(),
            fastrand::u64(..)
        );
        self.entra
            .lock()
            .expect("sim issued lock")
            .insert(token.clone(), SystemTime::now() + LIFETIME);
        token
    }
}

/// An expiry as AWS writes it: RFC 3339 in whole seconds, UTC.
fn aws_time(t: SystemTime) -> String {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    jiff::Timestamp::from_second(secs)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// A plain-text answer.
async fn text(sock: &mut Conn, status: u16, body: String) -> std::io::Result<()> {
    http::respond(sock, status, "text/plain", &[], body.as_bytes()).await
}

/// Where IMDS lists the instance's role, and under it serves the role's keys.
const IMDS_CREDENTIALS: &str = "/latest/meta-data/iam/security-credentials/";

/// Serves `req` if it is for a stand-in: `Ok(true)` when it was.
pub(super) async fn serve(
    sock: &mut Conn,
    req: &HttpRequest,
    issued: &Issued,
) -> std::io::Result<bool> {
    let (path, query) = req.path.split_once('?').unwrap_or((&req.path, ""));
    match (req.method.as_str(), path) {
        ("PUT", "/latest/api/token") => imds_token(sock, req, issued).await?,
        ("GET", p) if p.starts_with(IMDS_CREDENTIALS) => {
            let role = &p[IMDS_CREDENTIALS.len()..];
            imds_credentials(sock, req, issued, role).await?;
        }
        ("GET", "/container/credentials") => container_credentials(sock, req, issued).await?,
        ("POST", "/") => web_identity(sock, req, issued).await?,
        ("POST", p) if p.ends_with("/oauth2/v2.0/token") => entra(sock, req, issued).await?,
        ("GET", "/metadata/identity/oauth2/token") => {
            managed_identity(sock, req, issued, query).await?;
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// IMDSv2's session token, for as long as the request asks.
async fn imds_token(sock: &mut Conn, req: &HttpRequest, issued: &Issued) -> std::io::Result<()> {
    let Some(ttl) = req.header("x-aws-ec2-metadata-token-ttl-seconds") else {
        return text(sock, 400, "missing the token TTL header".into()).await;
    };
    let token = format!("sim-imds-token-{}", issued.next());
    issued
        .imds_tokens
        .lock()
        .expect("sim issued lock")
        .push(token.clone());
    let ttl = ("x-aws-ec2-metadata-token-ttl-seconds", ttl.to_string());
    http::respond(sock, 200, "text/plain", &[ttl], token.as_bytes()).await
}

/// IMDS's role (`role` empty), or the role's keys. IMDSv2 only: a request without a token it
/// issued is refused, as with HttpTokens=required.
async fn imds_credentials(
    sock: &mut Conn,
    req: &HttpRequest,
    issued: &Issued,
    role: &str,
) -> std::io::Result<()> {
    let token_ok = req.header("x-aws-ec2-metadata-token").is_some_and(|t| {
        issued
            .imds_tokens
            .lock()
            .expect("sim issued lock")
            .iter()
            .any(|i| i == t)
    });
    if !token_ok {
        return text(sock, 401, String::new()).await;
    }
    match role {
        "" => text(sock, 200, ROLE.to_string()).await,
        ROLE => {
            let (id, secret, token, expires) = issued.aws_keys("IMDS");
            let body = json!({
                "Code": "Success",
                "LastUpdated": aws_time(SystemTime::now()),
                "Type": "AWS-HMAC",
                "AccessKeyId": id,
                "SecretAccessKey": secret,
                "Token": token,
                "Expiration": aws_time(expires),
            });
            respond_json(sock, 200, &[], &body).await
        }
        _ => text(sock, 404, String::new()).await,
    }
}

/// ECS's and EKS Pod Identity's container credentials; the `Authorization` sent (Pod
/// Identity's token) is kept for tests.
async fn container_credentials(
    sock: &mut Conn,
    req: &HttpRequest,
    issued: &Issued,
) -> std::io::Result<()> {
    issued
        .container_auth
        .lock()
        .expect("sim issued lock")
        .push(req.header("authorization").map(str::to_string));
    let (id, secret, token, expires) = issued.aws_keys("ECS");
    let body = json!({
        "RoleArn": "arn:aws:iam::123456789012:role/sim-task-role",
        "AccessKeyId": id,
        "SecretAccessKey": secret,
        "Token": token,
        "Expiration": aws_time(expires),
    });
    respond_json(sock, 200, &[], &body).await
}

/// STS `AssumeRoleWithWebIdentity`, in STS's XML.
async fn web_identity(sock: &mut Conn, req: &HttpRequest, issued: &Issued) -> std::io::Result<()> {
    let form: HashMap<String, String> = url::form_urlencoded::parse(&req.body)
        .into_owned()
        .collect();
    let web_identity = form.get("Action").map(String::as_str) == Some("AssumeRoleWithWebIdentity")
        && form.get("WebIdentityToken").is_some_and(|t| !t.is_empty())
        && form.contains_key("RoleArn");
    if !web_identity {
        return text(sock, 400, "only AssumeRoleWithWebIdentity is served".into()).await;
    }
    let (id, secret, token, expires) = issued.aws_keys("STS");
    let xml = format!(
        r#"<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <Credentials>
      <AccessKeyId>{id}</AccessKeyId>
      <SecretAccessKey>{secret}</SecretAccessKey>
      <SessionToken>{token}</SessionToken>
      <Expiration>{}</Expiration>
    </Credentials>
    <AssumedRoleUser>
      <Arn>arn:aws:sts::123456789012:assumed-role/sim-web-identity-role/sim</Arn>
      <AssumedRoleId>AROASIM:sim</AssumedRoleId>
    </AssumedRoleUser>
    <SubjectFromWebIdentityToken>system:serviceaccount:default:llm-canary</SubjectFromWebIdentityToken>
  </AssumeRoleWithWebIdentityResult>
  <ResponseMetadata><RequestId>00000000-0000-4000-8000-000000000000</RequestId></ResponseMetadata>
</AssumeRoleWithWebIdentityResponse>"#,
        aws_time(expires)
    );
    http::respond(sock, 200, "text/xml", &[], xml.as_bytes()).await
}

/// Entra ID's token endpoint: client credentials with [`ENTRA_CLIENT_SECRET`], for Azure
/// OpenAI's scope.
async fn entra(sock: &mut Conn, req: &HttpRequest, issued: &Issued) -> std::io::Result<()> {
    let form: HashMap<String, String> = url::form_urlencoded::parse(&req.body)
        .into_owned()
        .collect();
    let field = |k: &str| form.get(k).map(String::as_str);
    if field("grant_type") != Some("client_credentials")
        || field("scope") != Some("https://cognitiveservices.azure.com/.default")
    {
        let body = json!({"error": "invalid_request"});
        respond_json(sock, 400, &[], &body).await
    } else if field("client_secret") != Some(ENTRA_CLIENT_SECRET)
        || field("client_id").is_none_or(str::is_empty)
    {
        let body = json!({"error": "invalid_client"});
        respond_json(sock, 401, &[], &body).await
    } else {
        let body = json!({
            "token_type": "Bearer",
            "expires_in": LIFETIME.as_secs(),
            "ext_expires_in": LIFETIME.as_secs(),
            "access_token": issued.entra_token(),
        });
        respond_json(sock, 200, &[], &body).await
    }
}

/// Azure's managed identity endpoint: `Metadata: true`, for Azure OpenAI's resource.
async fn managed_identity(
    sock: &mut Conn,
    req: &HttpRequest,
    issued: &Issued,
    query: &str,
) -> std::io::Result<()> {
    let metadata = req
        .header("metadata")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let resource = url::form_urlencoded::parse(query.as_bytes())
        .any(|(k, v)| k == "resource" && v == "https://cognitiveservices.azure.com");
    if !metadata || !resource {
        let body = json!({"error": "invalid_request"});
        return respond_json(sock, 400, &[], &body).await;
    }
    // The metadata service writes its numbers as strings.
    let body = json!({
        "token_type": "Bearer",
        "expires_in": LIFETIME.as_secs().to_string(),
        "resource": "https://cognitiveservices.azure.com",
        "access_token": issued.entra_token(),
    });
    respond_json(sock, 200, &[], &body).await
}
