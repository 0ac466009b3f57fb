//! `GET /probe?target=T&probe=P`: runs one configured pair now and answers with its series,
//! blackbox_exporter's multi-target pattern, so a Prometheus scrape (with the usual relabeling
//! of `__address__` into `__param_target`) drives the runs. Never an open proxy: only the pairs
//! this agent is configured for. Runs share the scheduler's concurrency limit and its
//! no-overlap rule: a pair already in flight is not started again, and the answer carries its
//! latest recorded result.

use std::sync::Arc;

use super::firing::{Occasion, Runs};
use crate::config::{Pair, Selection, UnknownName};

/// Why a `/probe` request names no pair to run (a 400, with the names that would do).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(super) struct BadPair(String);

impl From<UnknownName> for BadPair {
    fn from(e: UnknownName) -> BadPair {
        BadPair(e.to_string())
    }
}

/// The (target, probe) a query names.
fn parse(query: Option<&str>) -> (Option<String>, Option<String>) {
    let (mut target, mut probe) = (None, None);
    // reqwest's Url decodes the form encoding (percent and `+`) as a browser sends it.
    if let Ok(url) = reqwest::Url::parse(&format!("http://agent/?{}", query.unwrap_or(""))) {
        for (k, v) in url.query_pairs() {
            match k.as_ref() {
                "target" => target = Some(v.into_owned()),
                "probe" => probe = Some(v.into_owned()),
                _ => {}
            }
        }
    }
    (target, probe)
}

/// Runs the pair the query names (unless it is in flight) and returns its series.
pub(super) async fn probe(runs: &Arc<Runs>, query: Option<&str>) -> Result<Vec<u8>, BadPair> {
    let shared = runs.shared();
    let cfg = shared.cfg();
    let targets = || cfg.targets.iter().map(|t| t.name.as_str());
    let probes = || cfg.probes.iter().map(|p| p.name.as_str());
    let (Some(target), Some(probe)) = parse(query) else {
        return Err(BadPair(format!(
            "usage: /probe?target=T&probe=P (targets: {}; probes: {})",
            targets().collect::<Vec<_>>().join(", "),
            probes().collect::<Vec<_>>().join(", ")
        )));
    };
    cfg.known_target("target", &target)?;
    let only = |names: &[String]| -> Result<Vec<Pair>, BadPair> {
        let sel = Selection {
            probes: std::slice::from_ref(&probe),
            targets: names,
            in_shard: true,
        };
        Ok(cfg.pairs(&sel)?)
    };
    let Some((p, t)) = only(std::slice::from_ref(&target))?.pop() else {
        let here: Vec<String> = only(&[])?.iter().map(|(_, t)| t.name.clone()).collect();
        return Err(BadPair(format!(
            "probe {probe:?} does not run on target {target:?} at this agent (its targets here: {})",
            here.join(", ")
        )));
    };
    let key = (probe.clone(), target.clone());
    if let Some(claim) = shared.claim(&key) {
        // Spawned, so a scraper that gives up does not cancel the run half-way: its result is
        // still recorded. The concurrency limit applies inside `fire`.
        let _ = tokio::spawn(runs.clone().fire(p, t, claim, Occasion::OnDemand)).await;
    } else {
        tracing::debug!(%probe, %target, "/probe: the pair is in flight; answering with its latest result");
    }
    Ok(shared.metrics().encode_pair(&probe, &target))
}

#[cfg(test)]
mod tests {
    #[test]
    fn queries_are_form_decoded() {
        assert_eq!(
            super::parse(Some("probe=capital&target=chat%2D7b&x=1")),
            (Some("chat-7b".into()), Some("capital".into()))
        );
        assert_eq!(super::parse(Some("target=a+b")).0.as_deref(), Some("a b"));
        assert_eq!(super::parse(None), (None, None));
    }
}
