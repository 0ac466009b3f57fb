//! The mutating endpoints' guard, `POST /-/maintenance`'s request and `POST /-/reload`'s
//! channel to the daemon. A request is let through when it carries `Authorization: Bearer
//! <agent.admin_token>`, or when the listener is loopback-only (whoever can reach it already
//! runs on this host). Behind a web config's basic auth, both must pass: the request carries
//! its `Basic` credentials and the `Bearer` token as two `Authorization` headers. The token is compared in constant time and never logged.

use std::time::Duration;

use hyper::header::AUTHORIZATION;
use hyper::HeaderMap;
use serde::Deserialize;
use tokio::sync::oneshot;

use crate::config::{self, duration::parse_duration};
use crate::secret::Secret;

/// How `POST /-/reload` hears whether the daemon reloaded.
pub(super) type ReloadReply = oneshot::Sender<Result<(), ReloadError>>;

/// Why a reload did not happen; the running config stays either way.
#[derive(Debug, thiserror::Error)]
pub(super) enum ReloadError {
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    #[error("the agent is shutting down")]
    ShuttingDown,
}

/// Why a mutating request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(super) enum Refused {
    #[error("this endpoint needs the admin token (Authorization: Bearer ...)")]
    NoToken,
    #[error("the admin token does not match")]
    WrongToken,
    #[error("no admin token is configured (agent.admin_token_env or admin_token_file) and the listener is not loopback-only: mutating endpoints are off")]
    NotConfigured,
}

/// Lets a mutating request through, or says why not: `loopback_only` when the listener takes
/// only loopback connections, `token` the configured admin token.
pub(super) fn authorize(
    loopback_only: bool,
    token: Option<&Secret>,
    headers: &HeaderMap,
) -> Result<(), Refused> {
    if loopback_only {
        return Ok(());
    }
    let Some(token) = token else {
        return Err(Refused::NotConfigured);
    };
    // Behind basic auth a request carries two Authorization headers, Basic and Bearer.
    let presented = headers
        .get_all(AUTHORIZATION)
        .iter()
        .find_map(|v| v.as_bytes().strip_prefix(b"Bearer "))
        .ok_or(Refused::NoToken)?;
    if token.matches(presented) {
        Ok(())
    } else {
        Err(Refused::WrongToken)
    }
}

/// `POST /-/maintenance`'s JSON body: `{"target": "chat-7b", "duration": "30m", "reason": "..."}`.
/// A duration of `0s` ends the target's announced window.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    target: String,
    duration: String,
    reason: Option<String>,
}

#[derive(Debug, PartialEq, Eq)]
pub(super) struct Announcement {
    pub target: String,
    pub duration: Duration,
    pub reason: Option<String>,
}

/// The longest reason kept: it is shown on the status page.
const MAX_REASON: usize = 200;

/// The announcement a body asks for, or what is wrong with it (unknown targets are named with
/// the known ones).
pub(super) fn announcement(body: &[u8], known: &[&str]) -> Result<Announcement, String> {
    let b: Body = serde_json::from_slice(body)
        .map_err(|e| format!("the body must be JSON like {{\"target\": \"t\", \"duration\": \"30m\", \"reason\": \"deploy\"}}: {e}"))?;
    if !known.contains(&b.target.as_str()) {
        return Err(crate::util::unknown_name(
            "target",
            &b.target,
            known.iter().copied(),
        ));
    }
    let duration = parse_duration(&b.duration)?;
    let reason = b
        .reason
        .map(|r| crate::util::clip(&r).chars().take(MAX_REASON).collect());
    Ok(Announcement {
        target: b.target,
        duration,
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announcements_name_a_known_target_and_a_duration() {
        let known = ["a", "b"];
        assert_eq!(
            announcement(
                br#"{"target":"a","duration":"30m","reason":"deploy v3"}"#,
                &known
            ),
            Ok(Announcement {
                target: "a".into(),
                duration: Duration::from_secs(1800),
                reason: Some("deploy v3".into()),
            })
        );
        assert_eq!(
            announcement(br#"{"target":"b","duration":"0s"}"#, &known)
                .unwrap()
                .duration,
            Duration::ZERO
        );
        let e = announcement(br#"{"target":"c","duration":"1m"}"#, &known).unwrap_err();
        assert_eq!(e, "unknown target \"c\" (known: a, b)");
        let e = announcement(br#"{"target":"a","duration":"soon"}"#, &known).unwrap_err();
        assert!(e.contains("invalid duration"), "{e}");
        let e = announcement(br#"{"target":"a","duration":"1m","who":"me"}"#, &known).unwrap_err();
        assert!(e.contains("unknown field"), "{e}");
        assert!(announcement(b"target=a", &known).is_err());
    }
}
