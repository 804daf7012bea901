//! Limits per route behind one layer: a costly route, a login route charged only for its
//! failures, and a default rule for everything else. It starts on a loopback port, sends
//! itself a scripted sequence with a real HTTP client, prints each answer, then exits.
//!
//! ```sh
//! cargo run --example per_route --features tower
//! ```
//!
//! Requests are keyed by their `x-client` header. The rules, tried in order:
//!
//! * `POST /login`: 3 failed logins an hour per client, charged by outcome: a login answered
//!   401 costs a token once its response is known, a successful one costs nothing, and once
//!   the failures are spent even the right password is refused (429) before the handler;
//! * `/reports` and everything under it: 30 report units a minute per client, a report
//!   costing 10 (the rule's weight);
//! * the default rule, for every other request (a typo'd path, `//login`, a 404 alike): 20
//!   requests a minute per client. No route is left unlimited.

use admit::gate::{Cost, Gate, KeyKind, Limit};
use admit::tower::{AdmitLayer, HeaderKey, Routes, Rule};
use admit::{BucketConfig, Limiter};
use axum::extract::Path;
use axum::routing::{get, post};
use axum::Router;
use bytes::Bytes;
use http::{HeaderMap, HeaderName, Method, Request, StatusCode};
use http_body_util::Full;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::error::Error;
use std::net::SocketAddr;

type HttpClient = Client<HttpConnector, Full<Bytes>>;

const CLIENT: HeaderName = HeaderName::from_static("x-client");

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    // Each rule's gate: its own limiter, keyed by the client's claim (its `x-client`).
    let by_client = |name| Limit::new(name, 0).keyed_by(KeyKind::Claim);
    let default = Gate::new().rates(
        limiter(BucketConfig::per_minute(20)?)?,
        [by_client("requests")],
    )?;
    let reports = Gate::new().rates(
        limiter(BucketConfig::per_minute(30)?)?,
        [by_client("report units").cost(Cost::Weight { min: 1 })],
    )?;
    let logins = Gate::new().rates(
        limiter(BucketConfig::per_hour(3)?)?,
        [by_client("failed logins").by_outcome()],
    )?;
    let routes = Routes::new(default)?
        .rule(Rule::exact("/login").method(Method::POST), logins)?
        .rule(Rule::prefix("/reports").weight(10), reports)?;
    let layer = AdmitLayer::builder(HeaderKey::new(CLIENT))
        .routes(routes)
        .charge_outcome_when(|status| status == StatusCode::UNAUTHORIZED)
        .build()?;
    let app = Router::new()
        .route("/", get(|| async { "hello" }))
        .route("/login", post(login))
        .route(
            "/reports/{id}",
            get(|Path(id): Path<u32>| async move { format!("report {id}") }),
        )
        .layer(layer);

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = tokio::spawn(async move {
        let app = app.into_make_service_with_connect_info::<SocketAddr>();
        axum::serve(listener, app).await
    });
    println!("serving on http://{addr}\n");
    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    let call = |method: Method, path: &'static str, password: Option<&'static str>| {
        send(&client, addr, method, path, password)
    };

    println!("-- POST /login: 3 failures an hour, successes free");
    for _ in 0..4 {
        call(Method::POST, "/login", Some("right")).await?;
    }
    for _ in 0..3 {
        call(Method::POST, "/login", Some("wrong")).await?;
    }
    println!("   (three failures spent the budget: even the right password waits now)");
    call(Method::POST, "/login", Some("right")).await?;
    println!("   (a path the router does not route to /login is the default rule's)");
    call(Method::POST, "//login", Some("right")).await?;

    println!("\n-- /reports: 30 units a minute, a report costs 10");
    for id in ["/reports/1", "/reports/2", "/reports/3", "/reports/4"] {
        call(Method::GET, id, None).await?;
    }
    println!("   (the other routes keep their own budgets)");
    call(Method::GET, "/", None).await?;

    server.abort();
    Ok(())
}

/// A limiter of one class, `config` per client.
fn limiter(config: BucketConfig) -> Result<Limiter, Box<dyn Error>> {
    Ok(Limiter::builder().build([config])?)
}

/// 200 with the right password, 401 otherwise.
async fn login(headers: HeaderMap) -> StatusCode {
    if headers.get("x-password").is_some_and(|p| p == "right") {
        StatusCode::OK
    } else {
        StatusCode::UNAUTHORIZED
    }
}

/// Sends one request as client `c-1` and prints its status (and `Retry-After`, if any).
async fn send(
    client: &HttpClient,
    addr: SocketAddr,
    method: Method,
    path: &str,
    password: Option<&str>,
) -> Result<(), Box<dyn Error>> {
    let mut request = Request::builder()
        .method(method.clone())
        .uri(format!("http://{addr}{path}"))
        .header(CLIENT, "c-1");
    if let Some(password) = password {
        request = request.header("x-password", password);
    }
    let response = client
        .request(request.body(Full::new(Bytes::new()))?)
        .await?;
    let status = response.status();
    let retry = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(|s| format!(", retry after {s} s"))
        .unwrap_or_default();
    let with = password
        .map(|p| format!(" ({p} password)"))
        .unwrap_or_default();
    println!("{method} {path}{with} -> {status}{retry}");
    Ok(())
}
