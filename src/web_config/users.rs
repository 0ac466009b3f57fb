//! `basic_auth_users`: who may read the endpoints, by bcrypt hash, and the check of a request's
//! credentials with the toolkit's cache, so a scrape pays bcrypt's cost once, not every time.

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;

use base64::Engine;
use hyper::header::{HeaderMap, AUTHORIZATION};
use serde_saphyr::Spanned;
use tokio::sync::Semaphore;

use crate::config::{ConfigError, FieldPath, Source};

/// Users and their bcrypt hashes; empty means no basic auth.
#[derive(Default)]
pub(super) struct Users(BTreeMap<String, String>);

/// A hash for users that do not exist, so that an unknown user costs a bcrypt run as a known
/// one does and the time of a refusal does not tell which users exist (the toolkit's way).
/// The password is no one's.
const NOBODY: &str = "$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi";

/// Successful checks remembered at most; past it the cache starts over.
const CACHED: usize = 100;

impl Users {
    pub(super) fn load(
        src: &Source,
        at: &FieldPath,
        raw: Option<BTreeMap<String, Spanned<String>>>,
    ) -> Result<Users, ConfigError> {
        let mut users = BTreeMap::new();
        for (user, hash) in raw.unwrap_or_default() {
            let field = at.key(&user);
            if user.contains(':') {
                return Err(src.err(
                    &field,
                    hash.referenced,
                    "a user name cannot hold a colon: basic auth splits user and password there",
                ));
            }
            match hash.value.parse::<bcrypt::HashParts>() {
                Ok(p) if (4..=31).contains(&p.get_cost()) => {}
                Ok(p) => {
                    return Err(src.err(
                        &field,
                        hash.referenced,
                        format!("bcrypt cost {} is out of range (4 to 31)", p.get_cost()),
                    ))
                }
                Err(e) => {
                    return Err(src.err(
                        &field,
                        hash.referenced,
                        format!(
                            "not a bcrypt hash ({e}): make one with htpasswd -nBC 10 \"\" | tr -d ':\\n'"
                        ),
                    ))
                }
            }
            users.insert(user, hash.value);
        }
        Ok(Users(users))
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The checks already passed, and the one lane bcrypt runs in.
pub(super) struct Checks {
    /// Digests of (user, hash, password) that passed. A digest, never the password: the cache
    /// holds nothing that would let a reader of the process's memory log in. Looked up by
    /// hashing a SHA-256 digest, whose bits an attacker cannot steer toward a timing.
    passed: Mutex<HashSet<[u8; 32]>>,
    /// bcrypt is costly by design: one check at a time, off the serving thread.
    lane: Semaphore,
}

impl Default for Checks {
    fn default() -> Self {
        Checks {
            passed: Mutex::new(HashSet::new()),
            lane: Semaphore::new(1),
        }
    }
}

impl Checks {
    /// Whether `headers` carry a user and password `users` accepts. With several
    /// `Authorization` headers (the admin endpoints' bearer token beside these credentials),
    /// the `Basic` one counts.
    pub(super) async fn admit(&self, users: &Users, headers: &HeaderMap) -> bool {
        let Some((user, password)) = headers
            .get_all(AUTHORIZATION)
            .iter()
            .find_map(|v| credentials(v.as_bytes()))
        else {
            return false;
        };
        let (known, hash) = match users.0.get(&user) {
            Some(h) => (true, h.clone()),
            None => (false, NOBODY.to_string()),
        };
        let key = digest(&user, &hash, &password);
        if known && self.passed.lock().expect("auth cache lock").contains(&key) {
            return true;
        }
        let Ok(_turn) = self.lane.acquire().await else {
            return false;
        };
        let ok = tokio::task::spawn_blocking(move || bcrypt::verify(password, &hash))
            .await
            .is_ok_and(|r| r.unwrap_or(false));
        if ok && known {
            let mut passed = self.passed.lock().expect("auth cache lock");
            if passed.len() >= CACHED {
                passed.clear();
            }
            passed.insert(key);
        }
        ok && known
    }
}

/// `Basic base64(user:password)` → the user and password.
fn credentials(value: &[u8]) -> Option<(String, Vec<u8>)> {
    let (scheme, rest) = std::str::from_utf8(value).ok()?.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(rest.trim())
        .ok()?;
    let colon = decoded.iter().position(|b| *b == b':')?;
    let user = String::from_utf8(decoded[..colon].to_vec()).ok()?;
    Some((user, decoded[colon + 1..].to_vec()))
}

fn digest(user: &str, hash: &str, password: &[u8]) -> [u8; 32] {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    // Lengths first, so no two triples run together into the same bytes.
    for part in [user.as_bytes(), hash.as_bytes(), password] {
        ctx.update(&(part.len() as u64).to_be_bytes());
        ctx.update(part);
    }
    let mut out = [0u8; 32];
    out.copy_from_slice(ctx.finish().as_ref());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    fn users(list: &[(&str, &str)]) -> Users {
        Users(
            list.iter()
                .map(|(u, h)| (u.to_string(), h.to_string()))
                .collect(),
        )
    }

    fn basic(user: &str, password: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        let v = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        h.append(AUTHORIZATION, HeaderValue::from_static("Bearer tok"));
        h.append(
            AUTHORIZATION,
            HeaderValue::from_str(&format!("Basic {v}")).unwrap(),
        );
        h
    }

    #[tokio::test]
    async fn a_right_password_passes_once_through_bcrypt_then_from_the_cache() {
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let u = users(&[("prom", &hash)]);
        let checks = Checks::default();
        assert!(checks.admit(&u, &basic("prom", "s3cret")).await);
        assert_eq!(checks.passed.lock().unwrap().len(), 1);
        // The cache holds a digest, not the password.
        let key = digest("prom", &hash, b"s3cret");
        assert!(checks.passed.lock().unwrap().contains(&key));
        assert!(checks.admit(&u, &basic("prom", "s3cret")).await);
        assert!(!checks.admit(&u, &basic("prom", "wrong")).await);
        assert!(!checks.admit(&u, &basic("nobody", "s3cret")).await);
        assert!(!checks.admit(&u, &HeaderMap::new()).await);
        assert_eq!(checks.passed.lock().unwrap().len(), 1);
    }

    #[test]
    fn credentials_are_read_from_a_basic_header_only() {
        assert_eq!(
            credentials(b"Basic dTpwOnE="),
            Some(("u".to_string(), b"p:q".to_vec()))
        );
        assert_eq!(credentials(b"Bearer dTpw"), None);
        assert_eq!(credentials(b"Basic !!"), None);
    }
}
