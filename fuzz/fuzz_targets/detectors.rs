//! Arbitrary UTF-8 through the content checks and degeneration detectors: never a panic, and
//! the score stays within 0..1.
#![no_main]

use libfuzzer_sys::fuzz_target;
use llm_canary::testing::checks::{self, repetition, CheckSpec};

fuzz_target!(|text: &str| {
    let r = repetition::analyze(text, &repetition::Thresholds::default());
    assert!((0.0..=1.0).contains(&r.measures.score), "{r:?}");
    let spec = CheckSpec {
        min_chars: Some(3),
        max_chars: Some(100),
        repetition: Some(repetition::Thresholds::default()),
        ..CheckSpec::default()
    };
    let answer = checks::Answer {
        text,
        finish_reason: Some("length"),
        tool_calls: &[],
        stopped_early: false,
        show_text: true,
    };
    let v = checks::judge(&spec, &answer);
    assert_eq!(v.output_chars, text.chars().count());
});
