//! Azure OpenAI: OpenAI chat under a deployment's own path
//! (`/v1/openai/deployments/<deployment>/chat/completions`, base URL `.../v1` here), whose door
//! checks that an Entra ID token the sim's stand-ins issued is still good.

use serde_json::json;

use super::{Refusal, Wire};
use crate::sim::credentials::Issued;
use crate::sim::http::HttpRequest;

/// OpenAI chat on Azure's path, behind Entra ID.
pub(super) struct Azure;

impl Wire for Azure {
    fn serves(&self, route: &str) -> bool {
        route.starts_with("/v1/openai/deployments/") && route.ends_with("/chat/completions")
    }

    fn route(&self) -> String {
        "Azure OpenAI's /v1/openai/deployments/<deployment>/chat/completions".into()
    }

    /// A bearer token the Entra stand-ins issued must not have expired; any other key is let in.
    fn admit(&self, req: &HttpRequest, issued: &Issued) -> Result<(), Refusal> {
        let bearer = req
            .header("authorization")
            .and_then(|a| a.strip_prefix("Bearer "));
        if bearer.and_then(|t| issued.entra_token_good(t)) == Some(false) {
            return Err(Refusal {
                status: 401,
                headers: vec![],
                body: json!({"error": {"code": "401", "message": "Unauthorized. Access token is missing, invalid, audience is incorrect, or have expired."}}),
            });
        }
        Ok(())
    }
}
