use super::*;

#[test]
fn check_warns_that_a_hosted_api_cannot_bust_caches_under_auto() {
    let dir = tempfile::tempdir().unwrap();
    for d in ["probes", "prompts"] {
        std::fs::create_dir_all(dir.path().join(d)).unwrap();
    }
    std::fs::write(
            dir.path().join("llm-canary.yaml"),
            "targets:\n  - {name: az, base_url: \"https://x.openai.azure.com\", api: azure-openai, model: gpt-4o}\n",
        )
        .unwrap();
    std::fs::write(dir.path().join("prompts/q.txt"), "hi").unwrap();
    let load = |bust: &str| {
        let probe = format!("name: p\nprompt: q.txt\ncache_bust: {bust}\n");
        std::fs::write(dir.path().join("probes/p.yaml"), probe).unwrap();
        crate::config::load(&dir.path().join("llm-canary.yaml"))
            .unwrap()
            .warnings
    };
    let w = load("auto");
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("hosted API `azure-openai`"), "{w:?}");
    assert!(load("prefix").is_empty());
}

fn timeouts(text: &str) -> Result<Timeouts, ConfigError> {
    let src = Source {
        path: Path::new("p.yaml"),
        text,
    };
    load_timeouts(&src, &FieldPath::root().key("timeouts"), src.parse()?)
}

#[test]
fn defaults_shrink_to_a_short_total() {
    let t = timeouts("total: 4s").unwrap();
    let s = Duration::from_secs;
    assert_eq!(
        (t.connect, t.ttft, t.stall, t.total),
        (s(3), s(4), s(4), s(4))
    );
    assert_eq!(timeouts("ttft: 30s").unwrap().ttft, s(30));
    assert_eq!(timeouts("{}").unwrap(), Timeouts::default());
}

#[test]
fn a_written_limit_above_total_is_refused() {
    let e = timeouts("connect: 5s\ntotal: 4s").unwrap_err().to_string();
    assert_eq!(
            e,
            "p.yaml:1:10: field timeouts.connect: connect 5s is longer than total 4s, which would always time out first"
        );
}
