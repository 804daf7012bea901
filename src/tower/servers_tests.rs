//! The layer under the two other servers users put it in front of (axum's tests are in
//! `tests.rs`), each driven over a loopback socket by a real client:
//!
//! * a tonic server, called by a tonic client (HTTP/2): the refusal a gRPC client reads is
//!   `RESOURCE_EXHAUSTED` with the wait as gRPC's retry pushback. The service is
//!   tonic-health's standard health service (its generated server and client), so the test
//!   needs no protobuf compiler;
//! * a plain hyper server (no framework: `service_fn` under the layer, served by hyper's
//!   HTTP/1 connection), called by hyper-util's client: 200s, then a 429 with `Retry-After`.

use super::*;
use crate::gate::Gate;
use crate::{BucketConfig, Limiter, ManualClock};
use std::time::Duration;
use tonic::transport::server::TcpIncoming;
use tonic::{Code, Request};
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

/// Calls `Check` as `actor`; the gRPC status code and, if refused, the retry pushback header.
async fn check(
    client: &mut HealthClient<tonic::transport::Channel>,
    actor: &str,
) -> (Code, Option<String>) {
    let mut request = Request::new(HealthCheckRequest {
        service: String::new(),
    });
    request
        .metadata_mut()
        .insert("x-actor", actor.parse().unwrap());
    match client.check(request).await {
        Ok(_) => (Code::Ok, None),
        Err(status) => {
            let pushback = status
                .metadata()
                .get("grpc-retry-pushback-ms")
                .map(|v| v.to_str().unwrap().to_owned());
            (status.code(), pushback)
        }
    }
}

#[test]
fn a_tonic_client_reads_resource_exhausted_with_the_retry_pushback() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(10), async {
            // Burst 2, one call back every 1.5 s, per actor.
            let clock = ManualClock::starting_at(1_000_000_000);
            let limiter = Limiter::builder()
                .build_with_clock(
                    [BucketConfig::new(2, Duration::from_millis(1_500)).unwrap()],
                    clock.clone(),
                )
                .unwrap();
            let layer =
                AdmitLayer::builder(HeaderKey::new(http::HeaderName::from_static("x-actor")))
                    .gate(Gate::new().rate(limiter, 0))
                    .build()
                    .unwrap();
            let (_reporter, health) = tonic_health::server::health_reporter();
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            tokio::spawn(
                tonic::transport::Server::builder()
                    .layer(layer)
                    .add_service(health)
                    .serve_with_incoming(TcpIncoming::from(listener)),
            );
            let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
                .unwrap()
                .connect()
                .await
                .unwrap();
            let mut client = HealthClient::new(channel);

            // The scripted sequence under the manual clock: exact answers per actor.
            assert_eq!(check(&mut client, "alice").await, (Code::Ok, None));
            assert_eq!(check(&mut client, "alice").await, (Code::Ok, None));
            assert_eq!(
                check(&mut client, "alice").await,
                (Code::ResourceExhausted, Some("1500".to_owned())),
                "the third call within the burst is refused, with the exact wait"
            );
            assert_eq!(
                check(&mut client, "bob").await,
                (Code::Ok, None),
                "bob's own bucket"
            );
            clock.advance(Duration::from_millis(1_499));
            assert_eq!(
                check(&mut client, "alice").await,
                (Code::ResourceExhausted, Some("1".to_owned())),
                "one millisecond early"
            );
            clock.advance(Duration::from_millis(1));
            assert_eq!(check(&mut client, "alice").await, (Code::Ok, None));
            // A call with no actor is a bad request, not a refusal of someone else.
            let bare = client
                .check(Request::new(HealthCheckRequest {
                    service: String::new(),
                }))
                .await
                .unwrap_err();
            assert_eq!(bare.code(), Code::InvalidArgument);
        })
        .await
        .expect("the test took more than 10 s");
    });
}

#[test]
fn a_plain_hyper_server_answers_429_with_retry_after() {
    use http_body_util::{BodyExt, Full};
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::service::TowerToHyperService;

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(10), async {
            let clock = ManualClock::starting_at(1_000_000_000);
            let limiter = Limiter::builder()
                .build_with_clock([BucketConfig::per_minute(2).unwrap()], clock.clone())
                .unwrap();
            let layer =
                AdmitLayer::builder(HeaderKey::new(http::HeaderName::from_static("x-actor")))
                    .gate(Gate::new().rate(limiter, 0))
                    .build()
                    .unwrap();
            // The layer hands the service the request with its body metered (by the volume
            // quota, when one is configured): the service is generic over the body.
            async fn hello<B>(
                _: http::Request<B>,
            ) -> Result<http::Response<Full<Bytes>>, std::convert::Infallible> {
                Ok(http::Response::new(Full::new(Bytes::from("hello"))))
            }
            let hello = tower::service_fn(hello);
            let service = tower::ServiceBuilder::new().layer(layer).service(hello);
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            tokio::spawn(async move {
                loop {
                    let (stream, _) = listener.accept().await.unwrap();
                    let service = TowerToHyperService::new(service.clone());
                    tokio::spawn(
                        hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service),
                    );
                }
            });
            let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
            let get = |actor: &str| {
                http::Request::get(format!("http://{addr}/"))
                    .header("x-actor", actor)
                    .body(Full::new(Bytes::new()))
                    .unwrap()
            };
            for _ in 0..2 {
                let ok = client.request(get("carol")).await.unwrap();
                assert_eq!(ok.status(), http::StatusCode::OK);
                let body = ok.into_body().collect().await.unwrap().to_bytes();
                assert_eq!(body, "hello");
            }
            let refused = client.request(get("carol")).await.unwrap();
            assert_eq!(refused.status(), http::StatusCode::TOO_MANY_REQUESTS);
            assert_eq!(refused.headers()["retry-after"], "30");
            clock.advance(Duration::from_secs(30));
            let again = client.request(get("carol")).await.unwrap();
            assert_eq!(again.status(), http::StatusCode::OK);
        })
        .await
        .expect("the test took more than 10 s");
    });
}
