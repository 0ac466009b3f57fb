//! Arbitrary bytes at arbitrary split points through the SSE decoder and the chunk reader:
//! never a panic, never more than the caps, the same events whatever the splits.
#![no_main]

use std::time::Instant;

use libfuzzer_sys::fuzz_target;
use llm_canary::stream::SseDecoder;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    // The first byte seeds the split points; the rest is the stream.
    let (seed, body) = (data[0], &data[1..]);
    let decode = |cuts: &mut dyn Iterator<Item = usize>| {
        let mut d = SseDecoder::new(4096, 1 << 16);
        let mut out = Vec::new();
        let now = Instant::now();
        let mut at = 0;
        for c in cuts.chain(std::iter::once(body.len())) {
            let c = c.clamp(at, body.len());
            if d.feed(&body[at..c], now, &mut out).is_err() {
                return None;
            }
            at = c;
        }
        d.finish(now, &mut out).ok()?;
        Some(out.into_iter().map(|e| e.data).collect::<Vec<_>>())
    };
    let whole = decode(&mut std::iter::empty());
    let step = usize::from(seed % 7) + 1;
    let split = decode(&mut (step..body.len()).step_by(step));
    assert_eq!(whole, split, "split points changed the events");
    for ev in whole.unwrap_or_default() {
        assert!(ev.len() <= 4096);
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&ev) {
            let _ = llm_canary::probe::openai_chat::delta(&v["choices"][0]);
            let _ = llm_canary::probe::openai_completions::delta(&v["choices"][0]);
        }
    }
});
