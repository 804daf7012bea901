//! An axum service behind `admit`'s tower layer: it starts on a loopback port, sends itself a
//! short scripted burst with a real HTTP client, prints what was admitted, what was refused
//! and why, then exits.
//!
//! ```sh
//! cargo run --example http --features tower
//! ```
//!
//! Requests are keyed by their `x-api-key` header (`PeerIp` would key them all as 127.0.0.1
//! here). One gate (`admit::gate`) holds three defences, admitted together in this order:
//!
//! * at most 1 request per key in flight (a response not yet fully sent);
//! * a rate limit of 2 requests per second per key, in bursts of 3;
//! * at most 2 KiB of request bodies per key per minute, by `Content-Length`.
//!
//! A request refused by a later defence gives back what the earlier ones took: an upload the
//! volume quota refuses spends no rate token, so the key's next small request still passes.

use admit::fairness::Quotas;
use admit::gate::Gate;
use admit::quota::{Quota, RateLimit};
use admit::tower::{AdmitLayer, HeaderKey};
use admit::{BucketConfig, Limiter};
use axum::routing::{get, post};
use axum::Router;
use bytes::Bytes;
use http::{HeaderName, Method, Request};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::error::Error;
use std::net::SocketAddr;
use std::time::Duration;

type HttpClient = Client<HttpConnector, Full<Bytes>>;

const API_KEY: HeaderName = HeaderName::from_static("x-api-key");

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    // The defences, in one gate (the default clocks all read one process-wide time: the gate
    // reads it once for both), and the layer that puts the gate in front of the service.
    let rate = BucketConfig::per_second(2)?.with_burst(3)?;
    let volume = Quota::new(100, 2_048, Duration::from_secs(60))?;
    let gate = Gate::new()
        .in_flight(Quotas::builder().quota(1).build()?)
        .rate(Limiter::builder().build([rate])?, 0)
        .volume(RateLimit::new(volume));
    let layer = AdmitLayer::builder(HeaderKey::new(API_KEY))
        .gate(gate)
        .rate_limit_headers(true)
        .build()?;
    let app = Router::new()
        .route("/", get(|| async { "hello" }))
        .route("/report", get(slow_report))
        .route(
            "/upload",
            post(|body: Bytes| async move { format!("stored {} bytes", body.len()) }),
        )
        .layer(layer);

    // A real server on an ephemeral loopback port, in the background.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = tokio::spawn(async move {
        let app = app.into_make_service_with_connect_info::<SocketAddr>();
        axum::serve(listener, app).await
    });
    println!("serving on http://{addr}\n");
    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    let call = |method: Method, path: &'static str, key: Option<&'static str>, bytes: usize| {
        send(&client, addr, method, path, key, bytes)
    };

    println!("-- rate limit: 2/s per key, bursts of 3");
    for _ in 0..4 {
        call(Method::GET, "/", Some("alice"), 0).await?;
    }
    call(Method::GET, "/", Some("bob"), 0).await?;

    println!("\n-- in flight: 1 per key, until its response is sent (a second request 50 ms in)");
    let (first, second) = tokio::join!(call(Method::GET, "/report", Some("carol"), 0), async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        call(Method::GET, "/report", Some("carol"), 0).await
    });
    first?;
    second?;

    println!("\n-- volume: 2 KiB of request bodies per key per minute");
    for bytes in [1_500, 1_500, 5_000] {
        call(Method::POST, "/upload", Some("dave"), bytes).await?;
    }
    println!("   (the refused uploads gave their rate tokens back: dave's next request passes)");
    call(Method::GET, "/", Some("dave"), 0).await?;

    println!("\n-- no key");
    call(Method::GET, "/", None, 0).await?;

    server.abort();
    Ok(())
}

/// A report that takes 200 ms to produce: its request is in flight meanwhile.
async fn slow_report() -> &'static str {
    tokio::time::sleep(Duration::from_millis(200)).await;
    "report"
}

/// Sends one request and prints the answer: the status, and for a refusal its `Retry-After`
/// and the layer's reason.
async fn send(
    client: &HttpClient,
    addr: SocketAddr,
    method: Method,
    path: &str,
    key: Option<&str>,
    bytes: usize,
) -> Result<(), Box<dyn Error>> {
    let mut request = Request::builder()
        .method(method.clone())
        .uri(format!("http://{addr}{path}"));
    if let Some(key) = key {
        request = request.header(API_KEY, key);
    }
    let body = Full::new(Bytes::from(vec![b'x'; bytes]));
    let response = client.request(request.body(body)?).await?;
    let status = response.status();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let (retry_after, rate) = (header("retry-after"), header("ratelimit"));
    let text = response.into_body().collect().await?.to_bytes();
    let text = String::from_utf8_lossy(&text);
    let who = key.unwrap_or("(no key)");
    let size = if bytes > 0 {
        format!(" ({bytes} B)")
    } else {
        String::new()
    };
    if status.is_success() {
        let rate = rate
            .map(|r| format!("  [RateLimit: {r}]"))
            .unwrap_or_default();
        println!(
            "{who:>8} {method} {path}{size}: admitted, {status}: {}{rate}",
            text.trim()
        );
    } else {
        let retry = retry_after.map_or_else(
            || "no Retry-After".to_owned(),
            |s| format!("Retry-After: {s}"),
        );
        println!(
            "{who:>8} {method} {path}{size}: REFUSED, {status}, {retry}\n{:>10}why: {}",
            "",
            text.trim()
        );
    }
    Ok(())
}
