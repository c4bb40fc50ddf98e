//! The accept loop, written out rather than `axum::serve` so that hostile clients cannot
//! exhaust the server: a cap on open connections (those past it are closed at once), a
//! deadline for each request's headers and for its body, and a graceful stop that lets
//! requests in flight finish within a grace period.

use std::future::Future;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

use super::error::ApiError;
use super::request_log::ClientAddr;
use super::state::AppState;

/// How long requests in flight may run on after a stop signal.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Connections open at once; more are closed as soon as they are accepted.
    pub max_connections: usize,
    /// Time a client has to send a request's headers, and then its body.
    pub read_timeout: Duration,
}

/// Serves `router` on `listener` until `stop` resolves, then waits for the connections still
/// serving a request (at most [`SHUTDOWN_GRACE`]); idle keep-alive connections close at once.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    app: Arc<AppState>,
    stop: impl Future<Output = ()>,
) {
    let open = Arc::new(Semaphore::new(limits.max_connections));
    let (stopping_tx, stopping) = watch::channel(false);
    let mut connections = JoinSet::new();
    tokio::pin!(stop);
    loop {
        let (stream, client) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                // Out of file descriptors and the like: pause rather than spin.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        let Ok(permit) = Arc::clone(&open).try_acquire_owned() else {
            app.connections_refused.fetch_add(1, Relaxed);
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        // Each request knows its client, for the request log.
        let router = router.clone().layer(axum::Extension(ClientAddr(client)));
        let service = TowerToHyperService::new(router);
        let mut stopping = stopping.clone();
        connections.spawn(async move {
            let _permit = permit;
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(TokioTimer::new())
                .header_read_timeout(limits.read_timeout);
            let connection = http.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                _ = stopping.changed() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
        });
        // Finished connections leave the set as new ones come.
        while connections.try_join_next().is_some() {}
    }
    drop(listener);
    let _ = stopping_tx.send(true);
    let drain = async { while connections.join_next().await.is_some() {} };
    if tokio::time::timeout(SHUTDOWN_GRACE, drain).await.is_err() {
        eprintln!(
            "kolibri serve: requests still running after {}s were cancelled",
            SHUTDOWN_GRACE.as_secs()
        );
        connections.abort_all();
    }
}

/// Reads the whole request body within the read timeout before the handler runs, so a client
/// that trickles its body holds neither a handler nor a slot. Bodies past `max_body` are a
/// 413, as the handlers' own limit answers.
pub async fn body_in_time(
    read_timeout: Duration,
    max_body: usize,
    req: Request,
    next: Next,
) -> Response {
    let (parts, body) = req.into_parts();
    let read = tokio::time::timeout(read_timeout, axum::body::to_bytes(body, max_body)).await;
    let bytes: Bytes = match read {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(e)) if is_length_limit(&e) => {
            return ApiError {
                status: axum::http::StatusCode::PAYLOAD_TOO_LARGE,
                ..ApiError::bad_request(
                    format!("the request body is larger than {max_body} bytes"),
                    None,
                )
            }
            .into_response()
        }
        Ok(Err(e)) => {
            return ApiError::bad_request(format!("cannot read the request body: {e}"), None)
                .into_response()
        }
        Err(_) => {
            return ApiError::request_timeout(format!(
                "the request body did not arrive within {}s",
                read_timeout.as_secs_f32()
            ))
            .into_response()
        }
    };
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

fn is_length_limit(e: &axum::Error) -> bool {
    let mut source: Option<&dyn std::error::Error> = Some(e);
    while let Some(s) = source {
        if s.to_string().contains("length limit exceeded") {
            return true;
        }
        source = s.source();
    }
    false
}
