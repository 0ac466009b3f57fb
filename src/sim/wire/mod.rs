//! How the simulated replica speaks each API flavor: one [`Wire`] each, a unit struct in a file
//! of its own, whose default methods are OpenAI chat's (written in `openai`) and which a flavor
//! overrides where its API differs — the route it is served at, what its request asks (prompt,
//! token limit, streaming, tool, usage, model), its door, how it frames events, each event of
//! an answer (opening, content blocks, pieces, tool calls, closing), its errors and its
//! refusals, as the real servers send them. [`of_route`] is the one place a request's route
//! picks its flavor; nothing else in the sim asks which flavor it speaks.
//!
//! - `interface`: the trait, and what a door and a framing hand back; `event`: what an event
//!   and a stream's end are, and how lines are laid out;
//! - `openai`: OpenAI's shapes (chat's chunks, the usage chunk, `[DONE]`, its error and refusal
//!   bodies, the rate-limit headers) and SSE, which the defaults and the OpenAI-compatible
//!   flavors share;
//! - `chat`, `azure`, `completions`, `responses`, `messages`, `ollama`, `gemini`, [`bedrock`]:
//!   one flavor each.

mod azure;
pub mod bedrock;
mod chat;
mod completions;
mod event;
mod gemini;
mod interface;
mod messages;
mod ollama;
mod openai;
mod responses;

pub(super) use super::piece::{Call, Ending, PieceKind, Usage};
pub(super) use event::{named, plain, Event, Frame, Style};
pub(super) use interface::{Oversized, Refusal, Wire};

/// Every flavor the sim speaks: the registry. No route is served by two of them, so their
/// order is only the order `sim` lists them in.
static WIRES: [&dyn Wire; 8] = [
    &chat::Chat,
    &completions::Completions,
    &responses::Responses,
    &messages::Messages,
    &gemini::Gemini,
    &azure::Azure,
    &bedrock::Bedrock,
    &ollama::Ollama,
];

/// The flavor served at `route` (after any `/s/<scenario>` prefix, without the query).
pub(super) fn of_route(route: &str) -> Option<&'static dyn Wire> {
    WIRES.iter().copied().find(|w| w.serves(route))
}

/// Where every flavor is served, as `sim` lists them.
pub(super) fn routes() -> String {
    let all: Vec<String> = WIRES.iter().map(|w| w.route()).collect();
    match all.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{}, and {last}", rest.join(", ")),
        _ => all.concat(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No route is served by two flavors: the registry's order cannot pick one over another.
    #[test]
    fn each_route_picks_one_flavor() {
        for route in [
            "/v1/chat/completions",
            "/v1/completions",
            "/v1/responses",
            "/v1/messages",
            "/api/chat",
            "/v1/openai/deployments/d/chat/completions",
            "/v1beta/models/m:streamGenerateContent",
            "/v1/models/m:streamGenerateContent",
            "/v1/model/m/converse-stream",
            "/model/m/converse-stream",
        ] {
            let serving = WIRES.iter().filter(|w| w.serves(route)).count();
            assert_eq!(serving, 1, "{route}");
        }
        for route in [
            "/v1/models",
            "/api/tags",
            "/v1/openai/deployments/d/completions",
        ] {
            assert!(of_route(route).is_none(), "{route}");
        }
    }

    #[test]
    fn the_end_marker_is_a_line_of_its_own() {
        let lf = Style {
            crlf: false,
            space: true,
        };
        assert_eq!(chat::Chat.write(&Frame::Done, lf), b"data: [DONE]\n\n");
        let crlf = Style {
            crlf: true,
            space: false,
        };
        assert_eq!(chat::Chat.write(&Frame::Done, crlf), b"data:[DONE]\r\n\r\n");
    }
}
