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

/// A router with `GET /users/{id}`, `GET /users/{id}/avatar` and `GET /files/{*path}`
/// (handlers 0, 1, 2, each counting its runs), the layer wrapping it with `rule` admitting
/// through the rule's gate; then each of `paths`: the rule charged exactly when its route's
/// handler (`handler`) ran, and that handler ran as the row says.
fn route_rows(rule: Rule, handler: usize, paths: &[(&'static str, bool)]) {
    let paths = paths.to_vec();
    run(async move {
        let clock = ManualClock::new();
        let (ruled, default) = (gate("rule", &clock), gate("default", &clock));
        let routes = Routes::new(Arc::clone(&default))
            .unwrap()
            .rule(rule, Arc::clone(&ruled))
            .unwrap();
        let layer = AdmitLayer::builder(by_actor())
            .routes(routes)
            .build()
            .unwrap();
        let counters: [Arc<AtomicUsize>; 3] = Default::default();
        let [users, avatars, files] = counters.clone();
        let ran = Arc::clone(&counters[handler]);
        let router = Router::new()
            .route(
                "/users/{id}",
                get(move || {
                    users.fetch_add(1, Ordering::Relaxed);
                    async { "user" }
                }),
            )
            .route(
                "/users/{id}/avatar",
                get(move || {
                    avatars.fetch_add(1, Ordering::Relaxed);
                    async { "avatar" }
                }),
            )
            .route(
                "/files/{*path}",
                get(move || {
                    files.fetch_add(1, Ordering::Relaxed);
                    async { "file" }
                }),
            );
        let app = Router::new().fallback_service(tower_layer::Layer::layer(&layer, router));
        let addr = serve(app).await;
        let client = client();
        for (at, (path, routed)) in paths.into_iter().enumerate() {
            let before = (ran.load(Ordering::Relaxed), spent(&ruled), spent(&default));
            let status = send(&client, addr, Method::GET, path).await;
            let handler_ran = ran.load(Ordering::Relaxed) == before.0 + 1;
            assert_eq!(
                handler_ran, routed,
                "GET {path} ({status}): did the handler run"
            );
            let rule_charged = spent(&ruled) == before.1 + 1;
            assert_eq!(rule_charged, handler_ran, "GET {path}: rule charged ⇔ ran");
            assert_eq!(
                spent(&ruled) + spent(&default),
                at as u32 + 1,
                "GET {path}: once"
            );
        }
    });
}

#[test]
fn a_parameter_matches_one_non_empty_segment_as_axum_routes_it() {
    route_rows(
        Rule::route("/users/{id}"),
        0,
        &[
            ("/users/7", true),
            ("/users/7?x=1", true),
            ("/users/%37", true),
            ("/users/a;b", true),
            ("/users/", false),
            ("/users", false),
            ("/users/7/", false),
            ("/users/7/x", false),
            ("/users/7/avatar", false),
            ("//users/7", false),
            ("/USERS/7", false),
        ],
    );
}

/// Between two `/`, axum's router takes an empty segment for a parameter.
#[test]
fn a_parameter_between_slashes_may_be_empty_as_axum_routes_it() {
    route_rows(
        Rule::route("/users/{id}/avatar"),
        1,
        &[
            ("/users/7/avatar", true),
            ("/users//avatar", true),
            ("/users/7/avatar/", false),
            ("/users/7", false),
        ],
    );
}

#[test]
fn a_catch_all_matches_a_non_empty_remainder_as_axum_routes_it() {
    route_rows(
        Rule::route("/files/{*path}"),
        2,
        &[
            ("/files/a", true),
            ("/files/a/b/c.txt", true),
            ("/files/a/", true),
            ("/files//a", true),
            ("/files/", false),
            ("/files", false),
            ("/filesx/a", false),
        ],
    );
}

mod against_matchit {
    //! `Rule::route` against matchit, the router axum matches paths with: for routes in axum's
    //! syntax and arbitrary paths made of their pieces, the rule matches exactly when matchit
    //! routes the path to the route.

    use super::super::{RequestHead, Rule};
    use proptest::prelude::*;

    const ROUTES: &[&str] = &[
        "/login",
        "/users/{id}",
        "/users/{id}/avatar",
        "/files/{*path}",
        "/{*all}",
        "/a/{x}/{y}",
        "/img-{id}",
        "/v1/{id}/{*rest}",
        "/{{literal}}/{id}",
    ];

    const SEGMENTS: &[&str] = &[
        "",
        "login",
        "users",
        "7",
        "avatar",
        "files",
        "a",
        "x",
        "img-",
        "img-3",
        "v1",
        "{literal}",
        "%37",
        "a;b",
        "USERS",
        ".",
        "..",
    ];

    /// A path of arbitrary segments.
    fn any_path() -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(SEGMENTS), 0..5)
            .prop_map(|segments| format!("/{}", segments.join("/")))
    }

    /// A path near `route`: each parameter filled with 0 to 2 segments (so empty, one, or
    /// two), its literals kept, then perhaps a `/` more or a piece less at the end.
    fn near(route: &'static str) -> impl Strategy<Value = String> {
        let fills = prop::collection::vec(
            prop::collection::vec(prop::sample::select(SEGMENTS), 0..3),
            4,
        );
        (fills, 0..4usize).prop_map(move |(fills, end)| {
            let mut path = String::new();
            let mut fills = fills.into_iter();
            let mut rest = route.replace("{{", "\u{1}").replace("}}", "\u{2}");
            while let Some(open) = rest.find('{') {
                path.push_str(&rest[..open]);
                let close = rest[open..].find('}').unwrap() + open;
                path.push_str(&fills.next().unwrap_or_default().join("/"));
                rest = rest[close + 1..].to_owned();
            }
            path.push_str(&rest);
            let mut path = path.replace("\u{1}", "{").replace("\u{2}", "}");
            match end {
                0 => path.push('/'),
                1 => {
                    path.pop();
                }
                _ => {}
            }
            path
        })
    }

    fn route_and_path() -> impl Strategy<Value = (&'static str, String)> {
        prop::sample::select(ROUTES)
            .prop_flat_map(|route| (Just(route), prop_oneof![near(route), any_path()]))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_048))]
        #[test]
        fn route_rules_match_as_matchit_routes((route, path) in route_and_path()) {
            let mut router = matchit::Router::new();
            router.insert(route, ()).unwrap();
            let routed = router.at(&path).is_ok();
            // A path that is not a valid request target (no leading `/`) reaches no router.
            let Ok(request) = http::Request::get(&path).body(()) else { return Ok(()) };
            prop_assume!(path.starts_with('/'));
            let matched = Rule::route(route).matches(&RequestHead::of(&request));
            prop_assert_eq!(matched, routed, "route {} path {}", route, path);
        }
    }
}

/// The gate and the rules are one setting: the last set decides every request.
#[test]
fn a_gate_set_after_the_rules_replaces_them_and_the_other_way_round() {
    let clock = ManualClock::new();
    let (ruled, default, plain) = (
        gate("rule", &clock),
        gate("default", &clock),
        gate("plain", &clock),
    );
    let routes = || {
        Routes::new(Arc::clone(&default))
            .unwrap()
            .rule(Rule::exact("/login"), Arc::clone(&ruled))
            .unwrap()
    };
    let service = || {
        tower::service_fn(|_: Request<MeteredBody<()>>| async {
            Ok::<_, std::convert::Infallible>(http::Response::new(()))
        })
    };
    let login = || {
        Request::post("/login")
            .header("x-actor", "alice")
            .body(())
            .unwrap()
    };
    run(async {
        let gate_last = AdmitLayer::builder(by_actor())
            .routes(routes())
            .gate(Arc::clone(&plain))
            .build()
            .unwrap();
        let mut app = tower_layer::Layer::layer(&gate_last, service());
        tower_service::Service::call(&mut app, login())
            .await
            .unwrap();
        assert_eq!((spent(&plain), spent(&ruled)), (1, 0));
        let routes_last = AdmitLayer::builder(by_actor())
            .gate(Arc::clone(&plain))
            .routes(routes())
            .build()
            .unwrap();
        let mut app = tower_layer::Layer::layer(&routes_last, service());
        tower_service::Service::call(&mut app, login())
            .await
            .unwrap();
        assert_eq!((spent(&plain), spent(&ruled)), (1, 1));
    });
}

/// A rule's gate keyed by the source's prefix needs a layer that reads the prefix.
#[test]
fn a_rule_keyed_by_the_source_prefix_needs_the_layer_to_read_it() {
    let clock = ManualClock::new();
    let limiter = Limiter::builder()
        .build_with_clock(
            [BucketConfig::new(3, Duration::from_secs(60)).unwrap()],
            clock.clone(),
        )
        .unwrap();
    let per_prefix = Gate::new()
        .rates(
            limiter,
            [Limit::new("per prefix", 0).keyed_by(KeyKind::SourcePrefix)],
        )
        .unwrap();
    let routes = Routes::new(gate("d", &clock))
        .unwrap()
        .rule(Rule::prefix("/signup"), per_prefix)
        .unwrap();
    let unread = AdmitLayer::builder(by_actor()).routes(routes).build();
    assert_eq!(
        unread.err(),
        Some(AdmitConfigError::SourcePrefixUnmatched {
            gate_keys_prefix: true
        })
    );
}
