//! Arbitrary bytes at arbitrary split points through the stream reader (the capping, stamping
//! body layer and eventsource-stream on top): never a panic, never more than the caps, the same
//! events whatever the splits.
#![no_main]

use libfuzzer_sys::fuzz_target;
use llm_canary::testing::probe::flavor::{gemini::Gemini, Flavor};
use llm_canary::testing::stream::{sse, StreamCaps};

const CAPS: StreamCaps = StreamCaps {
    max_line: 4096,
    max_body: 1 << 16,
};

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    // The first byte seeds the split points; the rest is the stream.
    let (seed, body) = (data[0], &data[1..]);
    let whole = sse::decode([body], CAPS);
    let step = usize::from(seed % 7) + 1;
    let split = sse::decode(body.chunks(step), CAPS);
    // A body breaks a cap whatever its splits (which cap trips first may differ); the events
    // of a body that fits do not depend on them.
    assert_eq!(whole.is_ok(), split.is_ok(), "{whole:?} vs {split:?}");
    if let (Ok(a), Ok(b)) = (&whole, &split) {
        assert_eq!(a, b, "split points changed the events");
    }
    for ev in whole.unwrap_or_default() {
        assert!(ev.len() <= CAPS.max_body);
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&ev) {
            let _ = llm_canary::testing::probe::flavor::openai_chat::delta(&v["choices"][0]);
            let _ = llm_canary::testing::probe::flavor::openai_completions::delta(&v["choices"][0]);
            let _ = Gemini.event("message", &v);
        }
    }
});
