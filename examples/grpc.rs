//! A tonic gRPC service behind `admit`'s tower layer, the same layer as in front of axum.
//!
//! ```sh
//! cargo run --example grpc --features tower                  # serves 127.0.0.1:50051
//! cargo run --example grpc --features tower -- --once        # three calls, then exit
//! ```
//!
//! The layer maps its refusals to gRPC statuses itself: a request whose `content-type` is
//! `application/grpc…` (every tonic call) is refused with a "trailers-only" gRPC response,
//! `grpc-status: 8` (`RESOURCE_EXHAUSTED`) for a rate, in-flight or volume refusal (3,
//! `INVALID_ARGUMENT`, for a request without a key; 13, `INTERNAL`, for a server-side fault),
//! a `grpc-message`, and the wait as `grpc-retry-pushback-ms` beside `Retry-After`. A tonic
//! client reads it as `Code::ResourceExhausted`; nothing in the service has to translate.
//!
//! The service is tonic-health's standard health service (its generated server and client,
//! so no protobuf compiler is needed); yours goes where it is. Calls are keyed by their
//! `x-api-key` metadata (a gRPC header): 2 calls in a burst per key, one more every second,
//! and at most 8 in flight per key.
//!
//! With `--once`, the server binds a free loopback port, a real tonic client calls it three
//! times as one key over HTTP/2, the program prints each answer and exits, non-zero unless
//! the first two were served and the third refused with `RESOURCE_EXHAUSTED` (the test
//! `tests/examples.rs` runs it so).

use admit::fairness::Quotas;
use admit::gate::Gate;
use admit::tower::{AdmitLayer, HeaderKey};
use admit::{BucketConfig, Limiter};
use http::HeaderName;
use std::error::Error;
use std::net::SocketAddr;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Endpoint, Server};
use tonic::{Code, Request};
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

const API_KEY: HeaderName = HeaderName::from_static("x-api-key");

/// The layer: one gate in front of every gRPC method of the server.
fn layer() -> Result<AdmitLayer<HeaderKey>, Box<dyn Error>> {
    let gate = Gate::new()
        .in_flight(Quotas::builder().quota(8).build()?)
        .rate(
            Limiter::builder().build([BucketConfig::per_second(1)?.with_burst(2)?])?,
            0,
        );
    Ok(AdmitLayer::builder(HeaderKey::new(API_KEY))
        .gate(gate)
        .build()?)
}

/// One `Check` call as `key`: the gRPC code, and the retry pushback of a refusal.
async fn check(
    client: &mut HealthClient<tonic::transport::Channel>,
    key: &str,
) -> Result<(Code, Option<String>), Box<dyn Error>> {
    let mut request = Request::new(HealthCheckRequest {
        service: String::new(),
    });
    request.metadata_mut().insert("x-api-key", key.parse()?);
    Ok(match client.check(request).await {
        Ok(_) => (Code::Ok, None),
        Err(status) => {
            println!("  refused: {}", status.message());
            let pushback = status
                .metadata()
                .get("grpc-retry-pushback-ms")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            (status.code(), pushback)
        }
    })
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let once = std::env::args().skip(1).any(|arg| arg == "--once");
    let (_reporter, health) = tonic_health::server::health_reporter();
    let router = Server::builder().layer(layer()?).add_service(health);
    if !once {
        let addr: SocketAddr = "127.0.0.1:50051".parse()?;
        println!("serving gRPC on {addr}");
        router.serve(addr).await?;
        return Ok(());
    }

    // `--once`: a free loopback port, three calls from a real tonic client, then a clean stop.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    println!("serving gRPC on {addr}");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(router.serve_with_incoming_shutdown(
        TcpIncoming::from(listener),
        async {
            let _ = stopped.await;
        },
    ));
    let channel = Endpoint::from_shared(format!("http://{addr}"))?
        .connect()
        .await?;
    let mut client = HealthClient::new(channel);
    let mut answers = Vec::new();
    for call in 1..=3 {
        let (code, pushback) = check(&mut client, "key-1").await?;
        match &pushback {
            Some(ms) => println!("call {call}: {code:?}, retry in {ms} ms"),
            None => println!("call {call}: {code:?}"),
        }
        answers.push(code);
    }
    drop(client);
    let _ = stop.send(());
    server.await??;
    if answers != [Code::Ok, Code::Ok, Code::ResourceExhausted] {
        return Err(format!("expected Ok, Ok, ResourceExhausted; got {answers:?}").into());
    }
    Ok(())
}
