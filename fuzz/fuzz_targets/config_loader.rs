//! Arbitrary YAML through the strict config parser and its error positions: never a panic,
//! and an error is always one line.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    for msg in llm_canary::testing::config::check_yaml(text) {
        assert!(!msg.contains('\n'), "{msg}");
    }
});
