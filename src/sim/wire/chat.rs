//! OpenAI chat, as vLLM, SGLang and llama.cpp serve it at `/v1/chat/completions`: every default
//! of the [`Wire`] trait, which speaks OpenAI's shapes (`super::openai`).

use super::Wire;

pub(super) const ROUTE: &str = "/v1/chat/completions";

/// OpenAI chat: every default of [`Wire`].
pub(super) struct Chat;

impl Wire for Chat {
    fn serves(&self, route: &str) -> bool {
        route == ROUTE
    }

    fn route(&self) -> String {
        ROUTE.into()
    }
}
