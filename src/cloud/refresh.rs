//! A credential held until shortly before it expires, then fetched anew on the next use: no
//! reload, no timer. When to refresh is ours (the probes' cadence, not a client SDK's); how to
//! fetch is the caller's.

use std::future::Future;
use std::time::{Duration, Instant, SystemTime};

/// How long before its expiry a credential is replaced at most: the cloud SDKs' own margin for
/// hour-long credentials.
const MAX_MARGIN: Duration = Duration::from_secs(300);

/// One credential and when it stops being good, on the monotonic clock.
struct Held<T> {
    value: T,
    /// When to fetch anew: before the expiry by half the credential's life, at most
    /// [`MAX_MARGIN`]; `None` for one that never expires.
    refresh_at: Option<Instant>,
    expires_at: Option<Instant>,
}

/// The latest credential. Concurrent users wait for one fetch rather than each making theirs.
pub(crate) struct Refreshing<T> {
    slot: tokio::sync::Mutex<Option<Held<T>>>,
}

impl<T> Default for Refreshing<T> {
    fn default() -> Self {
        Refreshing {
            slot: tokio::sync::Mutex::new(None),
        }
    }
}

/// When a credential that expires at `expiry` (a wall-clock time, as issuers write it), fetched
/// at `now`, is to be replaced, and when it expires, both on the monotonic clock.
fn deadlines(now: Instant, expiry: Option<SystemTime>) -> (Option<Instant>, Option<Instant>) {
    let Some(expiry) = expiry else {
        return (None, None);
    };
    let life = expiry
        .duration_since(SystemTime::now())
        .unwrap_or(Duration::ZERO);
    let margin = (life / 2).min(MAX_MARGIN);
    (Some(now + (life - margin)), Some(now + life))
}

impl<T: Clone> Refreshing<T> {
    /// The credential held, or a fresh one from `fetch` (the value and its expiry) when none is
    /// held or it is due for refresh. A failed refresh keeps serving the held credential until
    /// it expires: `Err` only when there is none still good.
    pub(super) async fn get<F, Fut, E>(&self, fetch: F) -> Result<T, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<(T, Option<SystemTime>), E>>,
        E: std::fmt::Display,
    {
        let mut slot = self.slot.lock().await;
        let now = Instant::now();
        if let Some(h) = slot.as_ref() {
            if h.refresh_at.is_none_or(|at| now < at) {
                return Ok(h.value.clone());
            }
        }
        match fetch().await {
            Ok((value, expiry)) => {
                let (refresh_at, expires_at) = deadlines(Instant::now(), expiry);
                *slot = Some(Held {
                    value: value.clone(),
                    refresh_at,
                    expires_at,
                });
                Ok(value)
            }
            Err(e) => match slot.as_ref() {
                Some(h) if h.expires_at.is_none_or(|at| Instant::now() < at) => {
                    tracing::warn!(error = %e, "credential refresh failed; the current one is still good");
                    Ok(h.value.clone())
                }
                _ => Err(e),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refreshes_at_half_life_for_short_credentials_and_five_minutes_before_for_long_ones() {
        let now = Instant::now();
        let (refresh, expires) = deadlines(now, Some(SystemTime::now() + Duration::from_secs(12)));
        let (refresh, expires) = (refresh.unwrap() - now, expires.unwrap() - now);
        assert!(expires <= Duration::from_secs(12) && expires > Duration::from_secs(11));
        assert!(refresh <= Duration::from_secs(6) && refresh > Duration::from_millis(5500));
        let (refresh, expires) =
            deadlines(now, Some(SystemTime::now() + Duration::from_secs(3600)));
        let before = expires.unwrap() - refresh.unwrap();
        assert_eq!(before, MAX_MARGIN);
        assert_eq!(deadlines(now, None), (None, None));
        // One already expired is due now.
        let (refresh, _) = deadlines(now, Some(SystemTime::now() - Duration::from_secs(1)));
        assert_eq!(refresh, Some(now));
    }

    #[tokio::test]
    async fn holds_a_credential_until_due_and_keeps_a_good_one_when_a_refresh_fails() {
        let cache: Refreshing<u32> = Refreshing::default();
        let far = || SystemTime::now() + Duration::from_secs(3600);
        let got = cache
            .get(|| async { Ok::<_, String>((1, Some(far()))) })
            .await;
        assert_eq!(got, Ok(1));
        // Not due: the fetch is not called.
        let got = cache
            .get(|| async { Err::<(u32, _), _>("must not be called".to_string()) })
            .await;
        assert_eq!(got, Ok(1));
        // Due (already past its refresh point) but not expired: a failed refresh keeps it.
        let cache: Refreshing<u32> = Refreshing::default();
        {
            let mut slot = cache.slot.lock().await;
            *slot = Some(Held {
                value: 7,
                refresh_at: Some(Instant::now()),
                expires_at: Some(Instant::now() + Duration::from_secs(60)),
            });
        }
        let got = cache
            .get(|| async { Err::<(u32, _), _>("down".to_string()) })
            .await;
        assert_eq!(got, Ok(7));
        let got = cache
            .get(|| async { Ok::<_, String>((8, Some(far()))) })
            .await;
        assert_eq!(got, Ok(8));
        // Expired and no fresh one: the error.
        {
            let mut slot = cache.slot.lock().await;
            *slot = Some(Held {
                value: 9,
                refresh_at: Some(Instant::now()),
                expires_at: Some(Instant::now()),
            });
        }
        let got = cache
            .get(|| async { Err::<(u32, _), _>("down".to_string()) })
            .await;
        assert_eq!(got, Err("down".to_string()));
    }
}
