//! An axum service behind a reverse proxy, limited per real client: the proxy appends the
//! address of its peer to `X-Forwarded-For`, and `ClientIp` charges that entry, read only
//! because the request comes from the trusted proxy. A client that forges the header is still
//! charged to its own address, through the proxy or straight to the service.
//!
//! ```sh
//! cargo run --example behind_proxy --features tower
//! ```
//!
//! Three parties on loopback, each on its own address, so that the service sees the proxy
//! as its peer and the proxy sees the client:
//!
//! * the service on 127.0.0.1, trusting the proxy at 127.0.0.3 and no one else;
//! * the proxy (a few lines of hyper, below) on 127.0.0.3, connecting to the service from
//!   127.0.0.3;
//! * the client, connecting from 127.0.0.2.
//!
//! On Linux the whole of 127.0.0.0/8 is loopback, so this runs as it is. macOS configures
//! 127.0.0.1 alone: add the two others first (`sudo ifconfig lo0 alias 127.0.0.2` and
//! `sudo ifconfig lo0 alias 127.0.0.3`).
//!
//! The limit is a burst of 2 per client. The client sends three requests through the proxy,
//! each forging another `X-Forwarded-For`, then one straight to the service: the first two
//! pass, the other two are refused, all charged to 127.0.0.2. The program prints each answer
//! and exits non-zero if any differs (`tests/examples.rs` runs it).

use admit::gate::Gate;
use admit::tower::{AdmitLayer, ClientIp};
use admit::{BucketConfig, Limiter};
use axum::extract::ConnectInfo;
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use http::header::HeaderValue;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::error::Error;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

type BoxError = Box<dyn Error + Send + Sync>;

const SERVICE: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 1);
const CLIENT: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
const PROXY: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 3);
const X_FORWARDED_FOR: &str = "x-forwarded-for";

/// The service: it answers with the chain it received, behind the layer.
fn service(gate: Arc<Gate>) -> Result<Router, BoxError> {
    // Headers are read from the proxy alone; any other peer is charged itself.
    let key = ClientIp::x_forwarded_for()
        .trust(&PROXY.to_string())?
        .from_extension::<ConnectInfo<SocketAddr>>();
    let layer = AdmitLayer::builder(key).gate(gate).build()?;
    let echo = |headers: HeaderMap| async move {
        let chain = headers.get_all(X_FORWARDED_FOR).iter();
        let chain: Vec<_> = chain.filter_map(|v| v.to_str().ok()).collect();
        format!("the service saw X-Forwarded-For: {}", chain.join(" | "))
    };
    Ok(Router::new().route("/", get(echo)).layer(layer))
}

/// A client whose connections leave from `local`.
fn client_from<B>(local: Ipv4Addr) -> Client<HttpConnector, B>
where
    B: hyper::body::Body + Send + Unpin + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let mut connector = HttpConnector::new();
    connector.set_local_address(Some(IpAddr::V4(local)));
    Client::builder(TokioExecutor::new()).build(connector)
}

/// The proxy's one job, as nginx's `$proxy_add_x_forwarded_for` does it: the chain the
/// request came with (every field line, joined), then the address of the proxy's peer.
async fn forward(
    upstream: Client<HttpConnector, Incoming>,
    service: SocketAddr,
    peer: SocketAddr,
    mut request: Request<Incoming>,
) -> Result<Response<Incoming>, BoxError> {
    let headers = request.headers_mut();
    let mut chain: Vec<String> = headers
        .get_all(X_FORWARDED_FOR)
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_owned))
        .collect();
    chain.push(peer.ip().to_string());
    headers.insert(X_FORWARDED_FOR, HeaderValue::from_str(&chain.join(", "))?);
    let path = request.uri().path_and_query().map_or("/", |p| p.as_str());
    *request.uri_mut() = format!("http://{service}{path}").parse()?;
    Ok(upstream.request(request).await?)
}

/// Serves the proxy on `PROXY`, forwarding to `service` from `PROXY`.
async fn proxy(service: SocketAddr) -> Result<SocketAddr, BoxError> {
    let listener = tokio::net::TcpListener::bind((PROXY, 0)).await?;
    let addr = listener.local_addr()?;
    let upstream = client_from::<Incoming>(PROXY);
    tokio::spawn(async move {
        while let Ok((stream, peer)) = listener.accept().await {
            let upstream = upstream.clone();
            let hop = hyper::service::service_fn(move |request| {
                forward(upstream.clone(), service, peer, request)
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), hop),
            );
        }
    });
    Ok(addr)
}

/// One GET to `to` from the client, forging `X-Forwarded-For: forged`.
async fn get_forging(
    client: &Client<HttpConnector, Empty<Bytes>>,
    to: SocketAddr,
    forged: &str,
) -> Result<StatusCode, BoxError> {
    let request = Request::get(format!("http://{to}/"))
        .header(X_FORWARDED_FOR, forged)
        .body(Empty::new())?;
    let response = client.request(request).await?;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    println!(
        "  -> {status}: {}",
        String::from_utf8_lossy(&body).trim_end()
    );
    Ok(status)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), BoxError> {
    let limiter = Limiter::builder().build([BucketConfig::per_minute(2)?])?;
    let gate = Arc::new(Gate::new().rate(limiter, 0));
    let listener = tokio::net::TcpListener::bind((SERVICE, 0)).await?;
    let service_addr = listener.local_addr()?;
    let app = service(Arc::clone(&gate))?;
    tokio::spawn(async move {
        let app = app.into_make_service_with_connect_info::<SocketAddr>();
        axum::serve(listener, app).await
    });
    let proxy_addr = proxy(service_addr).await?;
    println!(
        "service on {service_addr} trusting {PROXY}; proxy on {proxy_addr}; client from {CLIENT}"
    );

    let client = client_from::<Empty<Bytes>>(CLIENT);
    let mut answers = Vec::new();
    for forged in ["198.51.100.1", "198.51.100.2", "198.51.100.3"] {
        println!("through the proxy, forging X-Forwarded-For: {forged}");
        answers.push(get_forging(&client, proxy_addr, forged).await?);
    }
    println!("straight to the service, forging X-Forwarded-For: 198.51.100.4");
    answers.push(get_forging(&client, service_addr, "198.51.100.4").await?);

    // Every request was charged to the client's own address: its burst of 2 is spent, and
    // no forged address was touched.
    let (limiter, class) = gate.limiter().ok_or("the gate has a limiter")?;
    let own = limiter.try_acquire(&IpAddr::V4(CLIENT), class).is_err();
    let forged = limiter
        .try_acquire(&IpAddr::from([198, 51, 100, 1]), class)
        .is_ok();
    println!("charged to {CLIENT}: {own}; a forged address untouched: {forged}");
    let expected = [
        StatusCode::OK,
        StatusCode::OK,
        StatusCode::TOO_MANY_REQUESTS,
        StatusCode::TOO_MANY_REQUESTS,
    ];
    if answers != expected || !own || !forged {
        return Err(
            format!("expected {expected:?}, charged to {CLIENT} alone; got {answers:?}").into(),
        );
    }
    println!("the client was charged to its own address every time");
    Ok(())
}
