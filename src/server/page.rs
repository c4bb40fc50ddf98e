//! The chat page at `/`: static files compiled into the binary (no CDN, nothing fetched from
//! elsewhere: the Content-Security-Policy allows this origin only). The page talks to
//! `/v1/chat/completions` like any client and keeps its conversations in the browser's
//! localStorage. Its markdown renderer and code highlighter (marked, highlight.js) are pinned
//! in web/package-lock.json and compiled in by build.rs, their licences at `/licenses.txt`.

use axum::http::header;
use axum::response::{IntoResponse, Response};

const INDEX: &str = include_str!("page/index.html");
const SCRIPT: &str = include_str!("page/app.js");
const STYLE: &str = include_str!("page/app.css");
const ICON: &str = include_str!("page/favicon.svg");
const LIBRARIES: &str = include_str!(concat!(env!("OUT_DIR"), "/page-libraries.js"));
const HIGHLIGHT_STYLE: &str = include_str!(concat!(env!("OUT_DIR"), "/page-highlight.css"));
const LICENSES: &str = include_str!(concat!(env!("OUT_DIR"), "/page-licenses.txt"));

fn file(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; frame-ancestors 'none'",
            ),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

pub async fn index() -> Response {
    file("text/html; charset=utf-8", INDEX)
}

pub async fn script() -> Response {
    file("text/javascript; charset=utf-8", SCRIPT)
}

pub async fn style() -> Response {
    file("text/css; charset=utf-8", STYLE)
}

pub async fn icon() -> Response {
    file("image/svg+xml", ICON)
}

pub async fn libraries() -> Response {
    file("text/javascript; charset=utf-8", LIBRARIES)
}

pub async fn highlight_style() -> Response {
    file("text/css; charset=utf-8", HIGHLIGHT_STYLE)
}

pub async fn licenses() -> Response {
    file("text/plain; charset=utf-8", LICENSES)
}
