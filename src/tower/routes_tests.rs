//! Per-route rules over a real axum server on loopback: each variant of `/login` in the
//! module's table is charged to the login rule exactly when axum's router ran the login
//! handler, and to the default rule otherwise.

use super::tests::{by_actor, client, run, serve, HttpClient};
use super::*;
use crate::gate::{Cost, Gate, KeyKind, Limit};
use crate::{BucketConfig, Limiter, ManualClock};
use axum::routing::{get, post};
use axum::Router;
use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::Full;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const BURST: u32 = 1_000;

/// A gate of one limit named `name`, `BURST` tokens an hour per actor, charging the weight.
fn gate(name: &str, clock: &ManualClock) -> Arc<Gate<ManualClock>> {
    let config = BucketConfig::new(BURST, Duration::from_secs(3_600)).unwrap();
    let limiter = Limiter::builder()
        .build_with_clock([config], clock.clone())
        .unwrap();
    let limit = Limit::new(name, 0)
        .keyed_by(KeyKind::Claim)
        .cost(Cost::Weight { min: 1 });
    Arc::new(Gate::new().rates(limiter, [limit]).unwrap())
}

/// Tokens `gate` has spent on the test's actor.
fn spent(gate: &Gate<ManualClock>) -> u32 {
    let (limiter, _) = gate.limiter().unwrap();
    let now = limiter.clock().now_ns();
    BURST
        - limiter
            .peek_at("alice".as_bytes(), 0, 1, now)
            .unwrap()
            .available()
}

struct Setup {
    addr: SocketAddr,
    login: Arc<Gate<ManualClock>>,
    default: Arc<Gate<ManualClock>>,
    ran: Arc<AtomicUsize>,
}

/// A router with `POST /login` (counting its runs) and `GET /`, the layer wrapping the whole
/// router (before it routes), with `rule` admitting through the login gate.
async fn setup(rule: Rule) -> Setup {
    setup_as(rule, Wrap::Router).await
}

/// Where the layer goes.
#[derive(Clone, Copy)]
enum Wrap {
    /// Around the whole router: it sees each request before the router matches it.
    Router,
    /// Added by `Router::layer`: axum wraps each route and the fallback with it.
    RouterLayer,
}

async fn setup_as(rule: Rule, wrap: Wrap) -> Setup {
    let clock = ManualClock::new();
    let login = gate("login", &clock);
    let default = gate("default", &clock);
    let routes = Routes::new(Arc::clone(&default))
        .unwrap()
        .rule(rule, Arc::clone(&login))
        .unwrap();
    let layer = AdmitLayer::builder(by_actor())
        .routes(routes)
        .build()
        .unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&ran);
    let router = Router::new().route("/", get(|| async { "hello" })).route(
        "/login",
        post(move || {
            counter.fetch_add(1, Ordering::Relaxed);
            async { "welcome" }
        }),
    );
    let app = match wrap {
        // An outer router with only a fallback hands every request on unchanged: the layer
        // then sees each request before the inner router matches it.
        Wrap::Router => Router::new().fallback_service(tower_layer::Layer::layer(&layer, router)),
        Wrap::RouterLayer => router.layer(layer),
    };
    let addr = serve(app).await;
    Setup {
        addr,
        login,
        default,
        ran,
    }
}

async fn send(client: &HttpClient, addr: SocketAddr, method: Method, path: &str) -> StatusCode {
    let request = Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"))
        .header("x-actor", "alice")
        .body(Full::new(Bytes::new()))
        .unwrap();
    client.request(request).await.unwrap().status()
}

/// Sends `path` to the login rule's server and checks the table's row: the handler ran as
/// `routed` says, the login rule charged exactly when it ran, the default rule otherwise.
fn row(method: Method, path: &'static str, routed: bool, status: StatusCode) {
    row_as(Wrap::Router, method, path, routed, status);
}

fn row_as(wrap: Wrap, method: Method, path: &'static str, routed: bool, status: StatusCode) {
    run(async move {
        let s = setup_as(Rule::exact("/login").method(Method::POST), wrap).await;
        let got = send(&client(), s.addr, method.clone(), path).await;
        assert_eq!(got, status, "{method} {path}");
        let ran = s.ran.load(Ordering::Relaxed) == 1;
        assert_eq!(ran, routed, "{method} {path}: did the handler run");
        assert_eq!(
            spent(&s.login) == 1,
            ran,
            "{method} {path}: login rule charged ⇔ ran"
        );
        assert_eq!(
            spent(&s.default) == 1,
            !ran,
            "{method} {path}: else the default"
        );
        assert_eq!(
            spent(&s.login) + spent(&s.default),
            1,
            "charged exactly once"
        );
    });
}

#[test]
fn login_is_the_login_rule_s() {
    row(Method::POST, "/login", true, StatusCode::OK);
}

#[test]
fn the_query_is_not_part_of_the_path() {
    row(Method::POST, "/login?x=1", true, StatusCode::OK);
}

#[test]
fn a_trailing_slash_is_another_path() {
    row(Method::POST, "/login/", false, StatusCode::NOT_FOUND);
}

#[test]
fn a_doubled_slash_is_another_path() {
    row(Method::POST, "//login", false, StatusCode::NOT_FOUND);
}

#[test]
fn a_percent_encoded_letter_is_not_decoded() {
    row(Method::POST, "/%6Cogin", false, StatusCode::NOT_FOUND);
}

#[test]
fn paths_are_case_sensitive() {
    row(Method::POST, "/LOGIN", false, StatusCode::NOT_FOUND);
}

#[test]
fn a_semicolon_is_an_ordinary_byte() {
    row(Method::POST, "/login;x", false, StatusCode::NOT_FOUND);
}

#[test]
fn dot_dot_segments_are_not_resolved() {
    row(
        Method::POST,
        "/login/../login",
        false,
        StatusCode::NOT_FOUND,
    );
}

#[test]
fn dot_segments_are_not_resolved() {
    row(Method::POST, "/./login", false, StatusCode::NOT_FOUND);
}

#[test]
fn another_method_is_not_the_rule_s() {
    row(Method::GET, "/login", false, StatusCode::METHOD_NOT_ALLOWED);
}

/// Added by `Router::layer` instead, the rules read the same paths.
#[test]
fn the_rows_hold_with_router_layer_too() {
    for (method, path, routed, status) in [
        (Method::POST, "/login", true, StatusCode::OK),
        (Method::POST, "/login?x=1", true, StatusCode::OK),
        (Method::POST, "/login/", false, StatusCode::NOT_FOUND),
        (Method::POST, "/%6Cogin", false, StatusCode::NOT_FOUND),
        (
            Method::POST,
            "/login/../login",
            false,
            StatusCode::NOT_FOUND,
        ),
        (Method::GET, "/login", false, StatusCode::METHOD_NOT_ALLOWED),
    ] {
        row_as(Wrap::RouterLayer, method, path, routed, status);
    }
}

/// axum routes `HEAD` to a route's `GET` handler: a `GET` rule charges it too.
#[test]
fn head_is_charged_by_the_get_rule_as_axum_routes_it_to_get() {
    run(async {
        let s = setup(Rule::exact("/").method(Method::GET)).await;
        let client = client();
        assert_eq!(
            send(&client, s.addr, Method::HEAD, "/").await,
            StatusCode::OK
        );
        assert_eq!(spent(&s.login), 1, "the GET rule charged the HEAD");
        assert_eq!(
            send(&client, s.addr, Method::GET, "/").await,
            StatusCode::OK
        );
        assert_eq!(spent(&s.login), 2);
        assert_eq!(spent(&s.default), 0);
    });
}

/// A prefix rule charges its path and what lies under it (a 404 under it included), never a
/// sibling that merely starts with the same bytes.
#[test]
fn a_prefix_rule_charges_its_subtree_only() {
    run(async {
        let s = setup(Rule::prefix("/login/")).await;
        let client = client();
        for (path, status) in [
            ("/login", StatusCode::OK),
            ("/login/", StatusCode::NOT_FOUND),
            ("/login/x/y", StatusCode::NOT_FOUND),
        ] {
            assert_eq!(send(&client, s.addr, Method::POST, path).await, status);
        }
        assert_eq!(spent(&s.login), 3);
        assert_eq!(
            send(&client, s.addr, Method::POST, "/loginx").await,
            StatusCode::NOT_FOUND
        );
        assert_eq!(spent(&s.login), 3);
        assert_eq!(spent(&s.default), 1);
    });
}

/// The rule's weight is what its `Cost::Weight` limit charges; the default's is 1.
#[test]
fn a_rule_s_weight_is_its_cost() {
    run(async {
        let s = setup(
            Rule::when(|head: &RequestHead<'_>| head.uri().query() == Some("big")).weight(25),
        )
        .await;
        let client = client();
        assert_eq!(
            send(&client, s.addr, Method::GET, "/?big").await,
            StatusCode::OK
        );
        assert_eq!(spent(&s.login), 25);
        assert_eq!(
            send(&client, s.addr, Method::GET, "/?small").await,
            StatusCode::OK
        );
        assert_eq!(spent(&s.default), 1);
    });
}

/// Rules are tried in order: the first that matches decides, and a spent rule refuses its
/// route while the others pass.
#[test]
fn the_first_matching_rule_decides_and_each_rule_spends_its_own_budget() {
    let clock = ManualClock::new();
    let small = |name: &str| {
        let limiter = Limiter::builder()
            .build_with_clock(
                [BucketConfig::new(2, Duration::from_secs(3_600)).unwrap()],
                clock.clone(),
            )
            .unwrap();
        Arc::new(Gate::new().rates(limiter, [Limit::new(name, 0)]).unwrap())
    };
    let (login, api, default) = (small("login"), small("api"), small("default"));
    let routes = Routes::new(Arc::clone(&default))
        .unwrap()
        .rule(Rule::exact("/api/login"), Arc::clone(&login))
        .unwrap()
        .rule(Rule::prefix("/api"), Arc::clone(&api))
        .unwrap();
    let layer = AdmitLayer::builder(by_actor())
        .routes(routes)
        .build()
        .unwrap();
    let service = tower::service_fn(|_: Request<MeteredBody<()>>| async {
        Ok::<_, std::convert::Infallible>(http::Response::new(()))
    });
    let mut app = tower_layer::Layer::layer(&layer, service);
    run(async move {
        let mut status = |path: &str| {
            let request = Request::post(path)
                .header("x-actor", "alice")
                .body(())
                .unwrap();
            let future = tower_service::Service::call(&mut app, request);
            async move { future.await.unwrap().status() }
        };
        for _ in 0..2 {
            assert_eq!(status("/api/login").await, StatusCode::OK);
        }
        let refused = status("/api/login").await;
        assert_eq!(
            refused,
            StatusCode::TOO_MANY_REQUESTS,
            "the login rule is spent"
        );
        assert_eq!(
            status("/api/items").await,
            StatusCode::OK,
            "the api rule is not"
        );
        assert_eq!(status("/other").await, StatusCode::OK, "nor the default");
    });
}

/// Each rule's gate is checked when the rule is added, and the refusal names the rule.
#[test]
fn a_rule_s_unusable_gate_is_refused_naming_the_rule() {
    let clock = ManualClock::new();
    let open: Gate<ManualClock> = Gate::new();
    let refused = Routes::new(gate("d", &clock))
        .unwrap()
        .rule(Rule::exact("/a"), gate("a", &clock))
        .unwrap()
        .rule(Rule::exact("/b"), open)
        .err()
        .unwrap();
    assert_eq!(
        refused,
        RuleRefused {
            rule: RuleId::Rule(1),
            why: AdmitConfigError::NoDefence
        }
    );
    assert_eq!(
        refused.to_string(),
        format!("rule 1: {}", AdmitConfigError::NoDefence)
    );
}

/// Limits charged by outcome in any rule's gate need the outcomes that count, and outcomes
/// that count need such a limit in some rule's gate.
#[test]
fn outcomes_are_checked_across_the_rules() {
    let clock = ManualClock::new();
    let by_outcome = || {
        let limiter = Limiter::builder()
            .build_with_clock(
                [BucketConfig::new(3, Duration::from_secs(60)).unwrap()],
                clock.clone(),
            )
            .unwrap();
        Gate::new()
            .rates(limiter, [Limit::new("failures", 0).by_outcome()])
            .unwrap()
    };
    let routes = || {
        Routes::new(gate("d", &clock))
            .unwrap()
            .rule(Rule::exact("/login"), by_outcome())
            .unwrap()
    };
    let unmatched = AdmitLayer::builder(by_actor()).routes(routes()).build();
    assert_eq!(
        unmatched.err(),
        Some(AdmitConfigError::OutcomeUnmatched {
            gate_has_limits: true
        })
    );
    let matched = AdmitLayer::builder(by_actor())
        .routes(routes())
        .charge_outcome_when(|status| status == StatusCode::UNAUTHORIZED)
        .build();
    assert!(matched.is_ok());
    let none = Routes::new(gate("d", &clock)).unwrap();
    let unmatched = AdmitLayer::builder(by_actor())
        .routes(none)
        .charge_outcome_when(|status| status == StatusCode::UNAUTHORIZED)
        .build();
    assert_eq!(
        unmatched.err(),
        Some(AdmitConfigError::OutcomeUnmatched {
            gate_has_limits: false
        })
    );
}
