//! The rate-limit layer ([`RateLayer`]) with real parts: an axum server on a loopback
//! ephemeral port, driven over the socket by hyper-util's client (the harness of `tests.rs`),
//! under a `ManualClock` for exact counts: no test sleeps.

use super::tests::{by_actor, client, get_as, hello, run, send, serve, Answer, ACTOR};
use super::*;
use crate::gate::{Cost, GateConfigError, KeyKind, Limit};
use crate::{BucketConfig, Limiter, ManualClock, MonotonicClock};
use axum::extract::ConnectInfo;
use http::{Method, Request, StatusCode};
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tower_service::Service;

/// A limiter on `clock` with one class per `(burst, refill span)`.
fn limiter(clock: &ManualClock, classes: &[(u32, Duration)]) -> Limiter<ManualClock> {
    let configs: Vec<BucketConfig> = classes
        .iter()
        .map(|&(burst, span)| BucketConfig::new(burst, span).unwrap())
        .collect();
    Limiter::builder()
        .build_with_clock(configs, clock.clone())
        .unwrap()
}

/// The tokens `actor`'s bucket of limit `index` of `layer` holds now (the header's bytes, as
/// `HeaderKey` charges them).
fn tokens<X>(layer: &RateLayer<X, ManualClock>, index: usize, actor: &[u8]) -> u32 {
    let (limiter, limit) = layer.gate().limits().nth(index).unwrap();
    let now = limiter.clock().now_ns();
    limiter
        .peek_at(actor, limit.class(), 1, now)
        .unwrap()
        .available()
}

#[test]
fn admitted_until_the_burst_then_429_with_the_wait_rounded_up() {
    run(async {
        let clock = ManualClock::new();
        // Burst 2, one token back every 1.5 s: a drained bucket says "retry in 1.5 s" = 2.
        let layer = RateLayer::builder(by_actor())
            .rate(limiter(&clock, &[(2, Duration::from_millis(1_500))]), 0)
            .build()
            .unwrap();
        let addr = serve(hello().layer(layer.clone())).await;
        let client = client();

        for _ in 0..2 {
            let ok = get_as(&client, addr, "alice").await;
            assert_eq!(ok.status, StatusCode::OK);
            assert_eq!(ok.body, "hello", "the service's own response");
            assert_eq!(ok.retry_after(), None);
        }
        let refused = get_as(&client, addr, "alice").await;
        assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.retry_after(), Some("2"));
        // The refusal `AdmitLayer` writes, byte for byte: a twin bucket drained the same way.
        let twin = limiter(&clock, &[(2, Duration::from_millis(1_500))]);
        let _ = (twin.try_acquire("k", 0), twin.try_acquire("k", 0));
        let expected = AdmitRefused::Limiter(twin.try_acquire("k", 0).unwrap_err()).to_response();
        assert_eq!(refused.body, expected.body());
        assert_eq!(
            refused.header("content-type"),
            Some("text/plain; charset=utf-8")
        );
        assert_eq!(
            get_as(&client, addr, "bob").await.status,
            StatusCode::OK,
            "bob's own bucket"
        );

        clock.advance(Duration::from_millis(1_499));
        let early = get_as(&client, addr, "alice").await;
        assert_eq!(early.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(early.retry_after(), Some("1"), "1 ms, rounded up to 1 s");
        clock.advance(Duration::from_millis(1));
        assert_eq!(get_as(&client, addr, "alice").await.status, StatusCode::OK);
        assert_eq!(
            get_as(&client, addr, "alice").await.status,
            StatusCode::TOO_MANY_REQUESTS
        );
    });
}

/// Two limits of one limiter, and two limiters: a request the second refuses gives back the
/// first's token, so the first's bucket is as it was before the request.
#[test]
fn two_limits_are_all_or_nothing() {
    run(async {
        let clock = ManualClock::new();
        let ten_s = Duration::from_secs(10);
        let classes = limiter(&clock, &[(5, ten_s), (1, ten_s)]);
        let one_limiter = RateLayer::builder(by_actor())
            .rates(classes, [Limit::new("wide", 0), Limit::new("narrow", 1)])
            .build()
            .unwrap();
        let two_limiters = RateLayer::builder(by_actor())
            .rates(limiter(&clock, &[(5, ten_s)]), [Limit::new("wide", 0)])
            .rates(limiter(&clock, &[(1, ten_s)]), [Limit::new("narrow", 0)])
            .build()
            .unwrap();
        let client = client();
        for layer in [one_limiter, two_limiters] {
            let addr = serve(hello().layer(layer.clone())).await;
            assert_eq!(get_as(&client, addr, "alice").await.status, StatusCode::OK);
            assert_eq!(tokens(&layer, 0, b"alice"), 4);
            assert_eq!(tokens(&layer, 1, b"alice"), 0);
            for _ in 0..3 {
                let refused = get_as(&client, addr, "alice").await;
                assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
                assert_eq!(refused.retry_after(), Some("10"), "the narrow limit's wait");
                assert_eq!(
                    tokens(&layer, 0, b"alice"),
                    4,
                    "the wide limit's token was given back"
                );
            }
        }
    });
}

/// Behind a trusted proxy (the test's client, on 127.0.0.1), `ClientIp` charges the address
/// the proxy appended, never the proxy.
#[test]
fn client_ip_behind_a_trusted_hop_charges_the_client_not_the_proxy() {
    run(async {
        let clock = ManualClock::new();
        let key = ClientIp::x_forwarded_for()
            .trust("127.0.0.1")
            .unwrap()
            .from_extension::<ConnectInfo<SocketAddr>>();
        let layer = RateLayer::builder(key)
            .rate(limiter(&clock, &[(1, Duration::from_secs(10))]), 0)
            .build()
            .unwrap();
        let addr = serve(hello().layer(layer.clone())).await;
        let client = client();
        let from = |chain: &'static str| {
            let client = client.clone();
            async move {
                let request = Request::get(format!("http://{addr}/"))
                    .header("x-forwarded-for", chain)
                    .body(http_body_util::Full::new(Bytes::new()))
                    .unwrap();
                client.request(request).await.unwrap().status()
            }
        };
        let charged = |ip: &str| {
            let (limiter, _) = layer.gate().limiter().unwrap();
            let ip: IpAddr = ip.parse().unwrap();
            let now = limiter.clock().now_ns();
            limiter.peek_at(&ip, 0, 1, now).unwrap().available() == 0
        };
        assert_eq!(from("198.51.100.1, 203.0.113.7").await, StatusCode::OK);
        assert!(charged("203.0.113.7"));
        assert!(!charged("127.0.0.1") && !charged("198.51.100.1"));
        assert_eq!(
            from("198.51.100.9, 203.0.113.7").await,
            StatusCode::TOO_MANY_REQUESTS,
            "a forged entry before the proxy's does not change who pays"
        );
        assert_eq!(from("203.0.113.8").await, StatusCode::OK, "another client");
        assert_eq!(
            from("127.0.0.1").await,
            StatusCode::BAD_REQUEST,
            "trusted hops alone: refused, not charged to the proxy"
        );
        assert!(!charged("127.0.0.1"));
    });
}

#[test]
fn shadow_mode_admits_and_counts() {
    run(async {
        let clock = ManualClock::new();
        let layer = RateLayer::builder(by_actor())
            .rate(limiter(&clock, &[(2, Duration::from_secs(10))]), 0)
            .build()
            .unwrap();
        let (limiter, _) = layer.gate().limiter().unwrap();
        limiter.set_shadow(0, true).unwrap();
        let addr = serve(hello().layer(layer.clone())).await;
        let client = client();
        for _ in 0..5 {
            assert_eq!(get_as(&client, addr, "alice").await.status, StatusCode::OK);
        }
        assert_eq!(
            limiter.shadow_admissions(0),
            Some(3),
            "enforcing, 3 refusals"
        );
        limiter.set_shadow(0, false).unwrap();
        assert_eq!(
            get_as(&client, addr, "alice").await.status,
            StatusCode::TOO_MANY_REQUESTS
        );
    });
}

#[test]
fn a_missing_key_is_refused_or_passed_as_the_policy_says() {
    run(async {
        let clock = ManualClock::new();
        let build = |policy| {
            RateLayer::builder(by_actor())
                .rate(limiter(&clock, &[(1, Duration::from_secs(10))]), 0)
                .missing_key(policy)
                .build()
                .unwrap()
        };
        let client = client();
        let refuse = serve(hello().layer(build(MissingKeyPolicy::Refuse))).await;
        let bare = |addr| send(&client, addr, Method::GET, "/", None, Bytes::new());
        let refused: Answer = bare(refuse).await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST);
        assert!(String::from_utf8_lossy(&refused.body).contains(ACTOR.as_str()));
        let pass = serve(hello().layer(build(MissingKeyPolicy::Pass))).await;
        for _ in 0..3 {
            assert_eq!(
                bare(pass).await.status,
                StatusCode::OK,
                "unchecked, uncounted"
            );
        }
    });
}

#[test]
fn a_grpc_request_is_refused_as_grpc() {
    run(async {
        let clock = ManualClock::new();
        let layer = RateLayer::builder(by_actor())
            .rate(limiter(&clock, &[(1, Duration::from_millis(1_500))]), 0)
            .build()
            .unwrap();
        let addr = serve(hello().layer(layer)).await;
        let client = client();
        let call = || {
            let request = Request::get(format!("http://{addr}/"))
                .header(ACTOR, "alice")
                .header("content-type", "application/grpc+proto")
                .body(http_body_util::Full::new(Bytes::new()))
                .unwrap();
            client.request(request)
        };
        assert_eq!(call().await.unwrap().status(), StatusCode::OK);
        let refused = call().await.unwrap();
        assert_eq!(
            refused.status(),
            StatusCode::OK,
            "gRPC answers in its trailers"
        );
        assert_eq!(refused.headers()["grpc-status"], "8");
        assert_eq!(refused.headers()["grpc-retry-pushback-ms"], "1500");
        assert_eq!(refused.headers()["retry-after"], "2");
    });
}

/// Polls a future that is ready at once.
fn ready_now<F: Future<Output = Result<T, E>>, T, E: std::fmt::Debug>(future: F) -> T {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match std::pin::pin!(future).poll(&mut cx) {
        std::task::Poll::Ready(out) => out.unwrap(),
        std::task::Poll::Pending => panic!("ready at once"),
    }
}

/// The admitted request reaches the service as it came (its own body type), the service's
/// response comes back as it was; a refusal carries the [`AdmitRefused`] in its extensions,
/// and its future, polled again, never completes twice.
#[test]
fn admitted_requests_and_responses_pass_unchanged() {
    let clock = ManualClock::new();
    let layer = RateLayer::builder(by_actor())
        .on_refusal(|refused: &AdmitRefused| {
            let mut response = refused.to_response();
            *response.body_mut() = Bytes::from_static(b"slow down");
            response
        })
        .rate(limiter(&clock, &[(1, Duration::from_secs(10))]), 0)
        .build()
        .unwrap();
    let echo = tower::service_fn(|request: Request<String>| async move {
        let mut response = http::Response::new(Bytes::from(request.into_body()));
        response
            .headers_mut()
            .insert("x-echo", "1".parse().unwrap());
        Ok::<_, std::convert::Infallible>(response)
    });
    let mut service = tower_layer::Layer::layer(&layer, echo);
    let request = || {
        Request::get("/")
            .header(ACTOR, "alice")
            .body("ping".to_owned())
            .unwrap()
    };
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    let admitted = ready_now(service.call(request()));
    assert_eq!(admitted.body(), "ping");
    assert_eq!(admitted.headers()["x-echo"], "1");
    // The refusal's own future: polled again after it completed, it never completes again
    // (the admitted one is the service's, which does what the service's does).
    let mut refusing = std::pin::pin!(service.call(request()));
    let std::task::Poll::Ready(Ok(refused)) = refusing.as_mut().poll(&mut cx) else {
        panic!("ready at once");
    };
    assert!(refusing.as_mut().poll(&mut cx).is_pending());
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.body(), "slow down");
    assert_eq!(refused.headers()["retry-after"], "10");
    assert!(matches!(
        refused.extensions().get::<AdmitRefused>(),
        Some(AdmitRefused::Limiter(_))
    ));
}

#[test]
fn builds_are_checked() {
    let clock = ManualClock::new();
    let one = || limiter(&clock, &[(5, Duration::from_secs(1))]);
    let build = |limits: Vec<Limit>| RateLayer::builder(by_actor()).rates(one(), limits).build();
    assert_eq!(
        RateLayer::<HeaderKey, ManualClock>::builder(by_actor())
            .build()
            .unwrap_err(),
        RateConfigError::NoLimit
    );
    assert!(matches!(
        build(vec![Limit::new("outcome", 0).by_outcome()]),
        Err(RateConfigError::ByOutcome { limit }) if &*limit == "outcome"
    ));
    assert!(matches!(
        build(vec![Limit::new("prefix", 0).keyed_by(KeyKind::SourcePrefix)]),
        Err(RateConfigError::KeyedBySourcePrefix { limit }) if &*limit == "prefix"
    ));
    assert!(matches!(
        build(vec![Limit::new("bulk", 0).cost(Cost::Tokens(6))]),
        Err(RateConfigError::Limits(
            GateConfigError::CostExceedsBurst { .. }
        ))
    ));
    assert!(matches!(
        build(vec![Limit::new("daily", 1)]),
        Err(RateConfigError::Limits(
            GateConfigError::UnknownClass { .. }
        ))
    ));
    // Two unnamed limits share the name `rate`: named in the refusal.
    let twice = RateLayer::builder(by_actor())
        .rate(one(), 0)
        .rate(one(), 0)
        .build()
        .unwrap_err();
    assert!(matches!(
        &twice,
        RateConfigError::Limits(GateConfigError::DuplicateName { limit }) if &**limit == "rate"
    ));
    assert!(std::error::Error::source(&twice).is_some());
    // The first refusal is the one reported, whatever follows.
    let first = RateLayer::builder(by_actor())
        .rates(one(), [Limit::new("a", 0).by_outcome()])
        .rates(one(), [Limit::new("b", 0).keyed_by(KeyKind::SourcePrefix)])
        .build()
        .unwrap_err();
    assert!(matches!(first, RateConfigError::ByOutcome { .. }));
    // Two clocks with two origins: the first's readings would be refused by the second.
    let ahead = Limiter::builder()
        .build_with_clock(
            [BucketConfig::per_second(1).unwrap()],
            ManualClock::starting_at(5_000_000_000),
        )
        .unwrap();
    let apart = RateLayer::builder(by_actor())
        .rate(ahead, 0)
        .rates(one(), [Limit::new("second", 0)])
        .build()
        .unwrap_err();
    assert_eq!(
        apart,
        RateConfigError::ClocksApart {
            ahead_by: Duration::from_secs(5)
        }
    );
    for refused in [
        RateConfigError::NoLimit,
        first,
        twice,
        apart,
        RateConfigError::KeyedBySourcePrefix { limit: "p".into() },
    ] {
        assert!(!refused.to_string().is_empty());
    }
    // One clock, handed to both: accepted.
    let clock = MonotonicClock::new();
    let on = |clock| {
        Limiter::builder()
            .build_with_clock([BucketConfig::per_second(1).unwrap()], clock)
            .unwrap()
    };
    let layer = RateLayer::builder(PeerIp::new())
        .rates(on(clock), [Limit::new("first", 0)])
        .rates(on(clock), [Limit::new("second", 0)])
        .build()
        .unwrap();
    assert!(format!("{layer:?}").contains("second"));
}

/// A gate a `LiveLimits` built: the layer charges its running limits, and a reload changes
/// them while it serves. A file with an in-flight quota is refused, naming it.
#[cfg(feature = "config")]
#[test]
fn a_live_gate_follows_its_reloads() {
    use crate::live::LiveLimits;
    run(async {
        let file = |burst: u32| {
            format!(
                "[[admit.limit]]\nname = \"per actor\"\nkey = \"claim\"\nrate = \"1/h\"\n\
                 burst = {burst}\n"
            )
        };
        let live = LiveLimits::from_toml_str(&file(2)).unwrap();
        let layer = RateLayer::builder(by_actor())
            .gate(live.gate().unwrap())
            .build()
            .unwrap();
        let addr = serve(hello().layer(layer)).await;
        let client = client();
        for _ in 0..2 {
            assert_eq!(get_as(&client, addr, "alice").await.status, StatusCode::OK);
        }
        let refused = get_as(&client, addr, "alice").await;
        assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
        live.reload_str(&file(3)).unwrap();
        assert_eq!(
            get_as(&client, addr, "alice").await.status,
            StatusCode::OK,
            "the reload's third token"
        );
        assert_eq!(
            get_as(&client, addr, "alice").await.status,
            StatusCode::TOO_MANY_REQUESTS
        );

        let with_in_flight = format!("{}\n[admit.in_flight]\nquota = 8\n", file(2));
        let live = LiveLimits::from_toml_str(&with_in_flight).unwrap();
        let refused = RateLayer::builder(by_actor())
            .gate(live.gate().unwrap())
            .build()
            .unwrap_err();
        assert_eq!(
            refused,
            RateConfigError::NotRatesAlone {
                defence: "in-flight quota"
            }
        );
        assert!(refused.to_string().contains("AdmitLayer"));
    });
}
