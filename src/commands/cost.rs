//! `check`'s estimate of what probing costs: each probe's runs and tokens per day, and, for
//! targets with a `price:`, the cost of a month. An estimate: input tokens from the prompt's
//! characters at a stated ratio, output tokens at `max_tokens` (the most a run may generate).

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::config::Config;

/// Characters per token for the estimate: about right for English with today's tokenizers;
/// Chinese and Japanese text runs nearer 1-1.5 characters a token, so it is estimated low.
pub(super) const CHARS_PER_TOKEN: f64 = 4.0;

/// Days in the monthly estimate.
const MONTH_DAYS: f64 = 30.0;

/// Fire times of `schedule` in the day after `now` (in `tz`), counted up to one a second.
fn runs_per_day(
    schedule: &crate::schedule::Schedule,
    tz: &jiff::tz::TimeZone,
    now: &jiff::Timestamp,
) -> u64 {
    let start = now.to_zoned(tz.clone());
    let end = now
        .saturating_add(jiff::SignedDuration::from_hours(24))
        .unwrap_or(*now);
    let mut at = start;
    let mut n = 0;
    while let Some(next) = schedule.next_after(&at) {
        if next.timestamp() > end || n >= 86_400 {
            break;
        }
        n += 1;
        at = next;
    }
    n
}

/// The lines `check` prints: one per scheduled (probe, target) pair, then a total per currency.
pub(super) fn describe(cfg: &Config, now: &jiff::Timestamp) -> String {
    let mut s = String::new();
    let mut monthly: BTreeMap<&str, f64> = BTreeMap::new();
    for p in cfg.probes.iter() {
        let Some(schedule) = &p.schedule else {
            continue;
        };
        let firings = runs_per_day(schedule, &p.timezone, now) as f64;
        let chars: usize = p
            .prompt
            .messages
            .iter()
            .map(|m| m.content.chars().count())
            .sum();
        // A ladder's firing is a run per rung, each prompt its rung's size; a cache check's is
        // two runs, each with its prefix before the prompt.
        let (input, per_firing) = match (&p.ladder, p.cache_check) {
            (Some(l), _) => (l.sizes.iter().map(|&s| f64::from(s)).sum(), l.sizes.len()),
            (None, Some(c)) => (
                2.0 * ((chars + c.prefix_chars) as f64 / CHARS_PER_TOKEN).ceil(),
                2,
            ),
            (None, None) => ((chars as f64 / CHARS_PER_TOKEN).ceil(), 1),
        };
        let runs = firings * per_firing as f64;
        let input = input * firings;
        let output = f64::from(p.max_tokens) * runs;
        for t in cfg.targets.iter().filter(|t| p.targets.contains(&t.name)) {
            let cost = t.price.as_ref().map(|price| {
                let day = price.cost(input, output);
                *monthly.entry(price.currency.as_str()).or_default() += day * MONTH_DAYS;
                format!(", {:.2} {}/day", day, price.currency)
            });
            let _ = writeln!(
                s,
                "  {} -> {}: {runs} runs/day, about {input} input + {output} output tokens/day{}",
                p.name,
                t.name,
                cost.unwrap_or_default()
            );
        }
    }
    if s.is_empty() {
        return s;
    }
    let mut out = format!(
        "probing cost, estimated (input tokens: prompt characters / {CHARS_PER_TOKEN}; output tokens: max_tokens; warm-up runs left out):\n{s}"
    );
    for (currency, total) in monthly {
        let _ = writeln!(
            out,
            "  monthly estimate ({MONTH_DAYS} days): {total:.2} {currency}"
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(agent: &str, probe: &str) -> (tempfile::TempDir, Config) {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(dir.path().join("probes")).expect("mkdir");
        std::fs::create_dir_all(dir.path().join("prompts")).expect("mkdir");
        std::fs::write(dir.path().join("llm-canary.yaml"), agent).expect("write");
        std::fs::write(dir.path().join("probes/p.yaml"), probe).expect("write");
        // 400 characters: 100 tokens at 4 a token.
        std::fs::write(dir.path().join("prompts/q.txt"), "a".repeat(400)).expect("write");
        let cfg = crate::config::load(&dir.path().join("llm-canary.yaml")).expect("valid");
        (dir, cfg)
    }

    #[test]
    fn a_ladder_costs_its_rungs() {
        let (_d, cfg) = load(
            "targets:\n  - {name: t, base_url: \"http://127.0.0.1:9/v1\", model: m}\n",
            "name: p\nschedule: \"0 * * * *\"\nmax_tokens: 10\nladder: {sizes: [512, 2048]}\n",
        );
        let now: jiff::Timestamp = "2026-01-05T00:00:30Z".parse().expect("time");
        // 24 firings of two rungs: 24 x 2,560 input and 48 x 10 output tokens.
        let text = describe(&cfg, &now);
        assert!(
            text.contains("p -> t: 48 runs/day, about 61440 input + 480 output tokens/day"),
            "{text}"
        );
    }

    #[test]
    fn tokens_per_day_and_the_monthly_estimate() {
        let (_d, cfg) = load(
            "targets:\n  - name: paid\n    base_url: http://127.0.0.1:9/v1\n    model: m\n    price: {input: 1.0, output: 4.0, currency: EUR}\n  - {name: free, base_url: \"http://127.0.0.1:9/v1\", model: m}\n",
            "name: p\nschedule: \"*/10 * * * *\"\nprompt: q.txt\nmax_tokens: 50\n",
        );
        let now: jiff::Timestamp = "2026-01-05T00:00:30Z".parse().expect("time");
        let text = describe(&cfg, &now);
        // 144 runs a day: 14,400 input and 7,200 output tokens; 0.0144 + 0.0288 EUR a day.
        assert!(
            text.contains(
                "p -> paid: 144 runs/day, about 14400 input + 7200 output tokens/day, 0.04 EUR/day"
            ),
            "{text}"
        );
        assert!(
            text.contains("p -> free: 144 runs/day, about 14400 input + 7200 output tokens/day\n"),
            "{text}"
        );
        assert!(
            text.contains("monthly estimate (30 days): 1.30 EUR"),
            "{text}"
        );
        assert!(text.starts_with("probing cost, estimated"), "{text}");
    }

    #[test]
    fn a_cache_check_costs_two_runs_with_their_prefix() {
        let (_d, cfg) = load(
            "targets:\n  - {name: t, base_url: \"http://127.0.0.1:9/v1\", model: m}\n",
            "name: p\nschedule: \"*/10 * * * *\"\nprompt: q.txt\nmax_tokens: 50\ncache_check: {prefix_chars: 4000}\n",
        );
        let now: jiff::Timestamp = "2026-01-05T00:00:30Z".parse().expect("time");
        let text = describe(&cfg, &now);
        // 288 runs a day of (4,000 + 400) / 4 = 1,100 input tokens.
        assert!(
            text.contains("p -> t: 288 runs/day, about 316800 input + 14400 output tokens/day"),
            "{text}"
        );
    }

    #[test]
    fn unscheduled_probes_cost_nothing_here() {
        let (_d, cfg) = load(
            "targets:\n  - {name: t, base_url: \"http://127.0.0.1:9/v1\", model: m, price: {input: 1, output: 1}}\n",
            "name: p\nprompt: q.txt\n",
        );
        assert_eq!(describe(&cfg, &jiff::Timestamp::now()), "");
    }
}
