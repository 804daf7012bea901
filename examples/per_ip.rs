//! An axum service limited per client IP: a rate limit and a cap on requests in flight, in
//! front of every route, through `admit`'s tower layer. This is the README's snippet, whole.
//!
//! ```sh
//! cargo run --example per_ip --features tower                  # serves 127.0.0.1:3000
//! cargo run --example per_ip --features tower -- 0.0.0.0:8080  # any address
//! cargo run --example per_ip --features tower -- --once        # one request, then exit
//! ```
//!
//! Per client IP (IPv6 masked to its /64), admitted together in this order:
//!
//! * at most 4 requests in flight (held until the response body is sent);
//! * 10 requests per second, in bursts of 20.
//!
//! A refused request is answered 429 with `Retry-After` in whole seconds, before the route
//! runs. With `--once` the server binds a free loopback port, a real HTTP client sends it one
//! request over the socket, the program prints the answer and exits (non-zero if it was not
//! 200): the test `tests/examples.rs` runs it so.

use admit::fairness::Quotas;
use admit::gate::Gate;
use admit::tower::{AdmitLayer, PeerIp};
use admit::{BucketConfig, Limiter};
use axum::extract::ConnectInfo;
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::error::Error;
use std::net::SocketAddr;

/// The service and its limits.
fn app() -> Result<Router, Box<dyn Error>> {
    let gate = Gate::new()
        .in_flight(Quotas::builder().quota(4).build()?) // held until the response body is sent
        .rate(
            Limiter::builder().build([BucketConfig::per_second(10)?.with_burst(20)?])?,
            0,
        );
    // axum hands each request its peer address as `ConnectInfo<SocketAddr>` when served with
    // `into_make_service_with_connect_info` (below); the layer keys by its IP.
    let layer = AdmitLayer::builder(PeerIp::new().from_extension::<ConnectInfo<SocketAddr>>())
        .gate(gate)
        .build()?;
    Ok(Router::new()
        .route("/", get(|| async { "hello" }))
        .layer(layer))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let mut once = false;
    let mut addr = "127.0.0.1:3000".to_owned();
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--once" => once = true,
            other => addr = other.to_owned(),
        }
    }
    let app = app()?;
    if !once {
        let listener = tokio::net::TcpListener::bind(&addr).await?;
        println!("listening on http://{}", listener.local_addr()?);
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await?;
        return Ok(());
    }

    // `--once`: a free loopback port, one request from a real client, then a clean stop.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    println!("listening on http://{addr}");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .with_graceful_shutdown(async {
            let _ = stopped.await;
        })
        .await
    });
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let response = client.get(format!("http://{addr}/").parse()?).await?;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    println!("GET / -> {status}: {}", String::from_utf8_lossy(&body));
    drop(client);
    let _ = stop.send(());
    server.await??;
    if status != http::StatusCode::OK {
        return Err(format!("expected 200 OK, got {status}").into());
    }
    Ok(())
}
