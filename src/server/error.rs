//! Errors as OpenAI sends them: a status code and `{"error": {message, type, param, code}}`.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub kind: &'static str,
    pub message: String,
    pub param: Option<String>,
    pub code: Option<&'static str>,
    /// Seconds a client should wait before retrying (429).
    pub retry_after: Option<u32>,
}

impl ApiError {
    fn new(status: StatusCode, kind: &'static str, message: String) -> ApiError {
        ApiError {
            status,
            kind,
            message,
            param: None,
            code: None,
            retry_after: None,
        }
    }

    pub fn bad_request(message: String, param: Option<&str>) -> ApiError {
        ApiError {
            param: param.map(str::to_string),
            ..Self::new(StatusCode::BAD_REQUEST, "invalid_request_error", message)
        }
    }

    pub fn with_code(mut self, code: &'static str) -> ApiError {
        self.code = Some(code);
        self
    }

    pub fn unauthorized() -> ApiError {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "invalid_request_error",
            "missing or incorrect API key (send `Authorization: Bearer <key>`)".into(),
        )
        .with_code("invalid_api_key")
    }

    pub fn not_found(message: String) -> ApiError {
        Self::new(StatusCode::NOT_FOUND, "invalid_request_error", message)
    }

    pub fn busy(message: String) -> ApiError {
        ApiError {
            retry_after: Some(1),
            ..Self::new(StatusCode::TOO_MANY_REQUESTS, "rate_limit_error", message)
        }
        .with_code("rate_limit_exceeded")
    }

    /// 408: the client did not send its request in time.
    pub fn request_timeout(message: String) -> ApiError {
        Self::new(
            StatusCode::REQUEST_TIMEOUT,
            "invalid_request_error",
            message,
        )
    }

    pub fn timeout(message: String) -> ApiError {
        Self::new(StatusCode::GATEWAY_TIMEOUT, "timeout_error", message)
    }

    pub fn server(message: String) -> ApiError {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", message)
    }

    pub fn conflict(message: String) -> ApiError {
        Self::new(StatusCode::CONFLICT, "invalid_request_error", message)
    }

    pub fn not_implemented(message: String) -> ApiError {
        Self::new(StatusCode::NOT_IMPLEMENTED, "not_supported_error", message)
    }

    pub fn unavailable(message: String) -> ApiError {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "server_error", message)
    }

    pub fn body(&self) -> serde_json::Value {
        json!({
            "error": {
                "message": self.message,
                "type": self.kind,
                "param": self.param,
                "code": self.code,
            }
        })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (
            self.status,
            [(header::CONTENT_TYPE, "application/json")],
            self.body().to_string(),
        )
            .into_response();
        if let Some(secs) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}
