//! `GET /probe?target=T&probe=P`: runs one configured pair now and answers with its series,
//! blackbox_exporter's multi-target pattern, so a Prometheus scrape (with the usual relabeling
//! of `__address__` into `__param_target`) drives the runs. Never an open proxy: only the pairs
//! this agent is configured for. Runs share the scheduler's concurrency limit and its
//! no-overlap rule: a pair already in flight is not started again, and the answer carries its
//! latest recorded result.

use std::sync::Arc;

use super::{fire, scheduled_pairs, Agent, Occasion};
use crate::util::unknown_name;

/// Why a `/probe` request names no pair to run (a 400, with the names that would do).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadPair(String);

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
pub async fn probe(agent: &Arc<Agent>, query: Option<&str>) -> Result<Vec<u8>, BadPair> {
    let cfg = agent.cfg();
    let targets = || cfg.targets.iter().map(|t| t.name.as_str());
    let probes = || cfg.probes.iter().map(|p| p.name.as_str());
    let (Some(target), Some(probe)) = parse(query) else {
        return Err(BadPair(format!(
            "usage: /probe?target=T&probe=P (targets: {}; probes: {})",
            targets().collect::<Vec<_>>().join(", "),
            probes().collect::<Vec<_>>().join(", ")
        )));
    };
    if cfg.target(&target).is_none() {
        return Err(BadPair(unknown_name("target", &target, targets())));
    }
    if !probes().any(|p| p == probe) {
        return Err(BadPair(unknown_name("probe", &probe, probes())));
    }
    let pairs = scheduled_pairs(&cfg);
    let Some((p, t)) = pairs
        .iter()
        .find(|(p, t)| p.name == probe && t.name == target)
        .cloned()
    else {
        let here: Vec<&str> = pairs
            .iter()
            .filter(|(p, _)| p.name == probe)
            .map(|(_, t)| t.name.as_str())
            .collect();
        return Err(BadPair(format!(
            "probe {probe:?} does not run on target {target:?} at this agent (its targets here: {})",
            here.join(", ")
        )));
    };
    let key = (probe.clone(), target.clone());
    if agent.claim(&key) {
        // Spawned, so a scraper that gives up does not cancel the run half-way (its claim
        // would never be released); the concurrency limit applies inside `fire`.
        let _ = tokio::spawn(fire(agent.clone(), p, t, key, Occasion::OnDemand)).await;
    } else {
        tracing::debug!(%probe, %target, "/probe: the pair is in flight; answering with its latest result");
    }
    Ok(agent.metrics().encode_pair(&probe, &target))
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
