//! Bedrock's error answers: a `{"message"}` body, and the type in `x-amzn-ErrorType`, for a
//! scenario's status and for the door's refusals alike.

use serde_json::{json, Value};

/// Bedrock's error type for a status, and its message.
fn error_of(status: u16) -> (&'static str, &'static str) {
    match status {
        400 => (
            "ValidationException",
            "Input is too long for requested model.",
        ),
        401 | 403 => (
            "AccessDeniedException",
            "You don't have access to the model with the specified model ID.",
        ),
        404 => (
            "ResourceNotFoundException",
            "Could not resolve the foundation model from the provided model identifier.",
        ),
        429 => (
            "ThrottlingException",
            "Too many requests, please wait before trying again.",
        ),
        503 | 529 => ("ServiceUnavailableException", "Service unavailable."),
        _ => (
            "InternalServerException",
            "The server encountered an internal error while processing the request.",
        ),
    }
}

/// An error answer's body, for a status.
pub(super) fn error_body(status: u16) -> Value {
    json!({"message": error_of(status).1})
}

/// The header naming an error answer's type.
pub(super) fn error_type_header(status: u16) -> (&'static str, String) {
    error_type(error_of(status).0)
}

pub(super) fn error_type(ty: &str) -> (&'static str, String) {
    (
        "x-amzn-errortype",
        format!("{ty}:http://internal.amazon.com/coral/com.amazon.bedrock/"),
    )
}
