//! The layer with real parts: an axum server on a loopback ephemeral port, driven over the
//! socket by hyper-util's client. Exact counts run under a `ManualClock`; the one real-clock
//! test checks a bound. Every test is wrapped in a 5 s timeout and ends its server with its
//! runtime.

use super::*;
use crate::fairness::Quotas;
use crate::gate::Gate;
use crate::quota::{Quota, RateLimit};
use crate::{BucketConfig, Limiter, ManualClock};
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::routing::{get, post};
use axum::Router;
use http::{HeaderMap, HeaderName, Method, Request, StatusCode};
use http_body::Frame;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};
use tower_service::Service;

pub(super) type HttpClient = Client<HttpConnector, Full<Bytes>>;

pub(super) const ACTOR: HeaderName = HeaderName::from_static("x-actor");

/// Runs `test` on a fresh current-thread runtime, failing it after 5 s.
pub(super) fn run<F: Future<Output = ()>>(test: F) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime
        .block_on(async { tokio::time::timeout(Duration::from_secs(5), test).await })
        .expect("the test took more than 5 s");
}

/// Serves `app` on 127.0.0.1, an ephemeral port, recording each peer's address as axum's
/// `ConnectInfo`. The server task ends with the test's runtime.
pub(super) async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let app = app.into_make_service_with_connect_info::<SocketAddr>();
        axum::serve(listener, app).await.unwrap();
    });
    addr
}

pub(super) fn client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

/// What came back over the socket.
#[derive(Debug)]
pub(super) struct Answer {
    pub(super) status: StatusCode,
    pub(super) headers: HeaderMap,
    pub(super) body: Bytes,
}

impl Answer {
    pub(super) fn retry_after(&self) -> Option<&str> {
        self.headers.get("retry-after").map(|v| v.to_str().unwrap())
    }

    pub(super) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }
}

/// Sends one request as `actor` (no `x-actor` header if `None`) and reads the whole answer.
pub(super) async fn send(
    client: &HttpClient,
    addr: SocketAddr,
    method: Method,
    path: &str,
    actor: Option<&str>,
    body: Bytes,
) -> Answer {
    let mut request = Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"));
    if let Some(actor) = actor {
        request = request.header(ACTOR, actor);
    }
    let response = client
        .request(request.body(Full::new(body)).unwrap())
        .await
        .unwrap();
    let (parts, body) = response.into_parts();
    Answer {
        status: parts.status,
        headers: parts.headers,
        body: body.collect().await.unwrap().to_bytes(),
    }
}

pub(super) async fn get_as(client: &HttpClient, addr: SocketAddr, actor: &str) -> Answer {
    send(client, addr, Method::GET, "/", Some(actor), Bytes::new()).await
}

pub(super) fn hello() -> Router {
    Router::new().route("/", get(|| async { "hello" }))
}

pub(super) fn by_actor() -> HeaderKey {
    HeaderKey::new(ACTOR)
}

/// A gate of in-flight quotas alone (sharing `quotas`' counts), on the default clock type.
fn in_flight_gate(quotas: &Quotas) -> Gate {
    Gate::new().in_flight(quotas.clone())
}

// ---------------------------------------------------------------------------------------
// (a) Exact counts under a ManualClock, and Retry-After over the socket.

#[test]
fn manual_clock_script_gives_exact_counts_and_retry_after_rounded_up() {
    run(async {
        let clock = ManualClock::new();
        // Burst 2, one token back every 1.5 s: a drained bucket says "retry in 1.5 s" = 2.
        let config = BucketConfig::new(2, Duration::from_millis(1_500)).unwrap();
        let limiter = Limiter::builder()
            .build_with_clock([config], clock.clone())
            .unwrap();
        let gate = Arc::new(Gate::new().rate(limiter, 0));
        let layer = AdmitLayer::builder(by_actor())
            .gate(Arc::clone(&gate))
            .rate_limit_headers(true)
            .build()
            .unwrap();
        let addr = serve(hello().layer(layer)).await;
        let client = client();

        // (advance the clock by ms, actor, status, Retry-After)
        let script: &[(u64, &str, u16, Option<&str>)] = &[
            (0, "a", 200, None),
            (0, "a", 200, None),
            (0, "a", 429, Some("2")), // 1.5 s: rounded up
            (0, "b", 200, None),
            (0, "b", 200, None),
            (0, "b", 429, Some("2")),
            (1_000, "a", 429, Some("1")), // 0.5 s: rounded up to the floor of 1
            (500, "a", 200, None),        // a token back at 1.5 s
            (0, "a", 429, Some("2")),
            (0, "b", 200, None),
            (3_000, "a", 200, None), // t = 4.5 s: full again
            (0, "a", 200, None),
            (0, "a", 429, Some("2")),
        ];
        let (mut admitted, mut refused) = (HashMap::new(), HashMap::new());
        for (step, &(advance_ms, actor, status, retry_after)) in script.iter().enumerate() {
            clock.advance(Duration::from_millis(advance_ms));
            let answer = get_as(&client, addr, actor).await;
            assert_eq!(answer.status.as_u16(), status, "step {step}: {answer:?}");
            assert_eq!(answer.retry_after(), retry_after, "step {step}");
            let tally = if answer.status == StatusCode::OK {
                assert_eq!(answer.body, "hello");
                &mut admitted
            } else {
                assert!(String::from_utf8_lossy(&answer.body).contains("rate limited"));
                &mut refused
            };
            *tally.entry(actor).or_insert(0) += 1;
        }
        assert_eq!(admitted, HashMap::from([("a", 5), ("b", 3)]));
        assert_eq!(refused, HashMap::from([("a", 4), ("b", 1)]));

        // The layer charged the header's bytes exactly as a direct charge of them would: a's
        // bucket is the `[u8]` identity "a", drained; the `str` "a" is another identity.
        let (limiter, _) = gate.limiter().unwrap();
        assert!(limiter.try_acquire("a".as_bytes(), 0).is_err());
        assert!(limiter.try_acquire("a", 0).is_ok());
    });
}

#[test]
fn rate_limit_fields_state_the_bucket() {
    run(async {
        let clock = ManualClock::new();
        let config = BucketConfig::new(2, Duration::from_millis(1_500)).unwrap();
        let limiter = Limiter::builder()
            .build_with_clock([config], clock.clone())
            .unwrap();
        let layer = AdmitLayer::builder(by_actor())
            .gate(Gate::new().rate(limiter, 0))
            .rate_limit_headers(true)
            .build()
            .unwrap();
        let addr = serve(hello().layer(layer)).await;
        let client = client();
        let first = get_as(&client, addr, "a").await;
        assert_eq!(first.header("ratelimit-policy"), Some("\"rate\";q=2;w=3"));
        assert_eq!(first.header("ratelimit"), Some("\"rate\";r=1;t=2"));
        let last = get_as(&client, addr, "a").await;
        assert_eq!(last.header("ratelimit"), Some("\"rate\";r=0;t=2"));
        let refused = get_as(&client, addr, "a").await;
        assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
        // Empty: `t` is the wait for the next token (1.5 s, rounded up), as `Retry-After`.
        assert_eq!(refused.header("ratelimit"), Some("\"rate\";r=0;t=2"));
        assert_eq!(refused.retry_after(), Some("2"));
        clock.advance(Duration::from_secs(3));
        let full = get_as(&client, addr, "a").await;
        assert_eq!(full.header("ratelimit"), Some("\"rate\";r=1;t=2"));
    });
}

// ---------------------------------------------------------------------------------------
// (b) The real clock: admitted requests stay within burst + elapsed × rate.

#[test]
fn real_clock_admits_within_burst_plus_elapsed_times_rate() {
    const BURST: u32 = 5;
    const RATE: u32 = 50; // per second: a token every 20 ms
    const TASKS_PER_KEY: usize = 2;
    const REQUESTS_PER_TASK: usize = 80;
    // Each task paces itself, so that the run spans several refills: about 0.5 s in all, each
    // key asked 8 times as fast as it refills.
    const PACE: Duration = Duration::from_millis(6);
    const KEYS: [&str; 2] = ["k0", "k1"];
    run(async {
        let config = BucketConfig::per_second(RATE)
            .unwrap()
            .with_burst(BURST)
            .unwrap();
        let limiter = Limiter::builder().build([config]).unwrap();
        let layer = AdmitLayer::builder(by_actor())
            .gate(Gate::new().rate(limiter, 0))
            .build()
            .unwrap();
        let addr = serve(hello().layer(layer)).await;
        let start = Instant::now();
        let deadline = start + Duration::from_millis(1_500);
        let mut tasks = Vec::new();
        for key in KEYS {
            for _ in 0..TASKS_PER_KEY {
                let client = client();
                tasks.push(tokio::spawn(async move {
                    let (mut ok, mut limited) = (0_u64, 0_u64);
                    for _ in 0..REQUESTS_PER_TASK {
                        if Instant::now() >= deadline {
                            break;
                        }
                        let answer = get_as(&client, addr, key).await;
                        match answer.status {
                            StatusCode::OK => ok += 1,
                            StatusCode::TOO_MANY_REQUESTS => {
                                let secs: u64 = answer.retry_after().unwrap().parse().unwrap();
                                assert!(secs >= 1);
                                limited += 1;
                            }
                            other => panic!("unexpected {other}"),
                        }
                        tokio::time::sleep(PACE).await;
                    }
                    (key, ok, limited)
                }));
            }
        }
        let (mut admitted, mut sent) = (HashMap::new(), 0);
        for task in tasks {
            let (key, ok, limited) = task.await.unwrap();
            *admitted.entry(key).or_insert(0_u64) += ok;
            sent += ok + limited;
        }
        let elapsed = start.elapsed().as_secs_f64();
        assert!(elapsed < 2.0, "bounded run took {elapsed} s");
        // +1 for the millisecond tick a charge's reading is rounded to.
        let bound = f64::from(BURST) + elapsed * f64::from(RATE) + 1.0;
        for key in KEYS {
            let ok = admitted.get(key).copied().unwrap_or(0);
            assert!(
                ok as f64 <= bound,
                "{key}: {ok} admitted in {elapsed:.3} s, above {bound:.1}"
            );
            assert!(
                ok > u64::from(BURST),
                "{key}: {ok} admitted, no refill seen"
            );
        }
        assert!(sent >= 200, "only {sent} requests sent");
    });
}

// ---------------------------------------------------------------------------------------
// (c) A slow streaming response holds its in-flight place until its last byte.

/// A body of `left` chunks, the first at once and each next one `STEP` later.
struct SlowBody {
    left: u32,
    delay: Option<Pin<Box<tokio::time::Sleep>>>,
}

const STEP: Duration = Duration::from_millis(100);

impl http_body::Body for SlowBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        if let Some(delay) = self.delay.as_mut() {
            ready!(delay.as_mut().poll(cx));
        }
        self.left -= 1;
        self.delay = Some(Box::pin(tokio::time::sleep(STEP)));
        let chunk = Bytes::from(format!("chunk, {} to go\n", self.left));
        Poll::Ready(Some(Ok(Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0
    }
}

fn slow_app(quotas: &Quotas) -> Router {
    let layer = AdmitLayer::builder(by_actor())
        .gate(in_flight_gate(quotas))
        .build()
        .unwrap();
    slow_app_behind(layer)
}

/// `/slow` behind `layer`.
fn slow_app_behind(layer: AdmitLayer<HeaderKey>) -> Router {
    let slow = || async {
        Body::new(SlowBody {
            left: 4,
            delay: None,
        })
    };
    Router::new().route("/slow", get(slow)).layer(layer)
}

/// Opens a `/slow` response as `actor`, its body not yet read.
async fn open(client: &HttpClient, addr: SocketAddr, actor: &str) -> http::Response<Body> {
    let request = Request::get(format!("http://{addr}/slow"))
        .header(ACTOR, actor)
        .body(Full::new(Bytes::new()))
        .unwrap();
    client.request(request).await.unwrap().map(Body::new)
}

#[test]
fn a_streaming_body_holds_its_place_until_its_last_byte() {
    run(async {
        let quotas = Quotas::builder().quota(1).build().unwrap();
        let addr = serve(slow_app(&quotas)).await;
        let client = client();
        let started = Instant::now();

        let first = open(&client, addr, "x").await;
        assert_eq!(first.status(), StatusCode::OK);
        let mut body = first.into_body();
        let chunk = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(chunk, "chunk, 3 to go\n");
        // The handler returned long ago; three chunks are still to come.
        assert_eq!(quotas.in_flight("x".as_bytes()), 1);

        let second = send(&client, addr, Method::GET, "/slow", Some("x"), Bytes::new()).await;
        assert_eq!(second.status, StatusCode::TOO_MANY_REQUESTS, "{second:?}");
        assert_eq!(second.retry_after(), Some("1"));
        let other = send(&client, addr, Method::GET, "/slow", Some("y"), Bytes::new()).await;
        assert_eq!(
            other.status,
            StatusCode::OK,
            "another actor is not held back"
        );

        let rest = body.collect().await.unwrap().to_bytes();
        assert_eq!(rest, "chunk, 2 to go\nchunk, 1 to go\nchunk, 0 to go\n");
        // The last chunk was handed to the server before it reached us: the place is free.
        assert_eq!(quotas.in_flight("x".as_bytes()), 0);
        let third = send(&client, addr, Method::GET, "/slow", Some("x"), Bytes::new()).await;
        assert_eq!(third.status, StatusCode::OK);
        assert!(started.elapsed() < Duration::from_secs(2));
    });
}

/// A gate that lives for the whole process: the body holds a pass that borrows it (no
/// reference count), and frees the place at the last byte all the same.
#[test]
fn a_static_gate_holds_the_place_in_the_body_until_its_last_byte() {
    run(async {
        let quotas = Quotas::builder().quota(1).build().unwrap();
        let gate: &'static Gate = Box::leak(Box::new(in_flight_gate(&quotas)));
        let layer = AdmitLayer::builder(by_actor())
            .static_gate(gate)
            .build()
            .unwrap();
        let addr = serve(slow_app_behind(layer)).await;
        let client = client();
        let mut body = open(&client, addr, "x").await.into_body();
        body.frame().await.unwrap().unwrap();
        assert_eq!(quotas.in_flight("x".as_bytes()), 1, "held by the body");
        let second = send(&client, addr, Method::GET, "/slow", Some("x"), Bytes::new()).await;
        assert_eq!(second.status, StatusCode::TOO_MANY_REQUESTS, "{second:?}");
        body.collect().await.unwrap();
        assert_eq!(
            quotas.in_flight("x".as_bytes()),
            0,
            "the last byte freed it"
        );
        let third = send(&client, addr, Method::GET, "/slow", Some("x"), Bytes::new()).await;
        assert_eq!(third.status, StatusCode::OK);
    });
}

#[test]
fn a_client_gone_mid_stream_frees_the_place() {
    run(async {
        let quotas = Quotas::builder().quota(1).build().unwrap();
        let addr = serve(slow_app(&quotas)).await;
        let client = client();
        let mut body = open(&client, addr, "x").await.into_body();
        body.frame().await.unwrap().unwrap();
        assert_eq!(quotas.in_flight("x".as_bytes()), 1);
        drop(body); // the client closes the connection mid-stream
        drop(client);
        // The server notices on its next write (within one STEP) and drops the body.
        let deadline = Instant::now() + Duration::from_secs(2);
        while quotas.in_flight("x".as_bytes()) != 0 {
            assert!(Instant::now() < deadline, "the place was never freed");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
}

// ---------------------------------------------------------------------------------------
// (d) Peer-IP keying, IPv6 masked to its /64.

#[test]
fn ipv6_is_masked_to_the_prefix_and_ipv4_is_kept_whole() {
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    let peer = PeerIp::new();
    assert_eq!(
        peer.key_of(ip("2001:db8:1:2:3:4:5:6")),
        ip("2001:db8:1:2::")
    );
    assert_eq!(
        peer.key_of(ip("2001:db8:1:2::1")),
        peer.key_of(ip("2001:db8:1:2:ffff::"))
    );
    assert_ne!(
        peer.key_of(ip("2001:db8:1:2::1")),
        peer.key_of(ip("2001:db8:1:3::1"))
    );
    assert_eq!(peer.key_of(ip("192.0.2.7")), ip("192.0.2.7"));
    assert_eq!(peer.key_of(ip("::ffff:192.0.2.7")), ip("192.0.2.7"));

    let addr = "2001:db8:1:2ff:3:4:5:7";
    let cases = [
        (0, "::"),
        (16, "2001::"),
        (48, "2001:db8:1::"),
        (56, "2001:db8:1:200::"),
        (64, "2001:db8:1:2ff::"),
        (127, "2001:db8:1:2ff:3:4:5:6"),
        (128, addr),
    ];
    for (bits, expected) in cases {
        let peer = PeerIp::new().ipv6_prefix(bits).unwrap();
        assert_eq!(peer.key_of(ip(addr)), ip(expected), "/{bits}");
    }
    // Every prefix length against a bit-by-bit reference.
    let v6: Ipv6Addr = "fedc:ba98:7654:3210:0123:4567:89ab:cdef".parse().unwrap();
    for bits in 0..=128 {
        let peer = PeerIp::new().ipv6_prefix(bits).unwrap();
        assert_eq!(
            peer.key_of(IpAddr::V6(v6)),
            IpAddr::V6(mask_reference(v6, bits)),
            "/{bits}"
        );
    }
    assert_eq!(
        PeerIp::new().ipv6_prefix(129).unwrap_err(),
        AdmitConfigError::Ipv6PrefixTooLong { bits: 129 }
    );
}

/// A bit-by-bit reference for the mask.
fn mask_reference(ip: Ipv6Addr, bits: u8) -> Ipv6Addr {
    let mut octets = ip.octets();
    for (i, octet) in octets.iter_mut().enumerate() {
        for bit in 0..8 {
            if i * 8 + bit >= usize::from(bits) {
                *octet &= !(0x80 >> bit);
            }
        }
    }
    Ipv6Addr::from(octets)
}

#[test]
fn peer_ip_keys_a_loopback_client_over_the_socket() {
    run(async {
        let clock = ManualClock::new();
        let config = BucketConfig::new(1, Duration::from_secs(10)).unwrap();
        let limiter = Limiter::builder()
            .build_with_clock([config], clock.clone())
            .unwrap();
        let gate = Arc::new(Gate::new().rate(limiter, 0));
        let peer = PeerIp::new().from_extension::<ConnectInfo<SocketAddr>>();
        let layer = AdmitLayer::builder(peer)
            .gate(Arc::clone(&gate))
            .build()
            .unwrap();
        let addr = serve(hello().layer(layer)).await;
        let client = client();
        // Two connections' worth of requests: the port differs, the identity does not.
        assert_eq!(
            get_as(&client, addr, "ignored").await.status,
            StatusCode::OK
        );
        let refused = get_as(&client, addr, "ignored").await;
        assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.retry_after(), Some("10"));
        let loopback = IpAddr::from([127, 0, 0, 1]);
        let (limiter, _) = gate.limiter().unwrap();
        assert!(
            limiter.try_acquire(&loopback, 0).is_err(),
            "the layer charged 127.0.0.1"
        );
        assert!(limiter
            .try_acquire(&IpAddr::from([127, 0, 0, 2]), 0)
            .is_ok());
    });
}

#[test]
fn a_missing_peer_address_is_refused_by_default_or_passed_if_asked() {
    run(async {
        let quotas = Quotas::new();
        // `PeerIp::new()` reads a bare `SocketAddr`; axum records `ConnectInfo` instead.
        let refuse = AdmitLayer::builder(PeerIp::new())
            .gate(in_flight_gate(&quotas))
            .build()
            .unwrap();
        let pass = AdmitLayer::builder(PeerIp::new())
            .gate(in_flight_gate(&quotas))
            .missing_key(MissingKeyPolicy::Pass)
            .build()
            .unwrap();
        let client = client();
        let refused = get_as(&client, serve(hello().layer(refuse)).await, "a").await;
        assert_eq!(refused.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(refused.retry_after(), None);
        assert!(
            String::from_utf8_lossy(&refused.body).contains("into_make_service_with_connect_info")
        );
        let passed = get_as(&client, serve(hello().layer(pass)).await, "a").await;
        assert_eq!(passed.status, StatusCode::OK);
        assert_eq!(quotas.total_in_flight(), 0);
    });
}

#[test]
fn a_missing_header_is_a_bad_request() {
    run(async {
        let layer = AdmitLayer::builder(by_actor())
            .gate(in_flight_gate(&Quotas::new()))
            .build()
            .unwrap();
        let addr = serve(hello().layer(layer)).await;
        let answer = send(&client(), addr, Method::GET, "/", None, Bytes::new()).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST);
        assert!(String::from_utf8_lossy(&answer.body).contains("x-actor"));
    });
}

// ---------------------------------------------------------------------------------------
// (e) The volume quota, charged by Content-Length.

/// A gate with only a volume quota: 100 writes and 1,000 bytes a minute per actor.
fn volume_gate(clock: &ManualClock) -> Arc<Gate<ManualClock>> {
    let quota = Quota::new(100, 1_000, Duration::from_secs(60)).unwrap();
    Arc::new(Gate::new().volume(RateLimit::with_clock(quota, clock.clone())))
}

/// `POST /upload` answers how many bytes its handler read, `GET /` says hello, both behind
/// `gate`, keyed by `x-actor`.
fn upload_app(gate: &Arc<Gate<ManualClock>>) -> Router {
    let layer = AdmitLayer::builder(by_actor())
        .gate(Arc::clone(gate))
        .build()
        .unwrap();
    Router::new()
        .route(
            "/upload",
            post(|body: Bytes| async move { format!("{} bytes", body.len()) }),
        )
        .route("/", get(|| async { "hello" }))
        .layer(layer)
}

#[test]
fn volume_is_charged_by_content_length_over_the_socket() {
    run(async {
        let clock = ManualClock::new();
        let gate = volume_gate(&clock);
        let addr = serve(upload_app(&gate)).await;
        let client = client();
        let upload = |actor: &'static str, bytes: usize| {
            let client = client.clone();
            async move {
                let body = Bytes::from(vec![b'x'; bytes]);
                send(&client, addr, Method::POST, "/upload", Some(actor), body).await
            }
        };
        assert_eq!(upload("a", 400).await.body, "400 bytes");
        assert_eq!(upload("a", 400).await.status, StatusCode::OK);
        let over = upload("a", 400).await;
        assert_eq!(over.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(over.retry_after(), Some("60"), "the window turns in 60 s");
        assert!(String::from_utf8_lossy(&over.body).contains("bytes quota"));
        let huge = upload("b", 2_000).await;
        assert_eq!(huge.status, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(huge.retry_after(), None, "no wait admits it");
        assert_eq!(
            upload("b", 400).await.status,
            StatusCode::OK,
            "b has its own budget"
        );
        // No body, no Content-Length: one event of 0 bytes.
        assert_eq!(get_as(&client, addr, "a").await.status, StatusCode::OK);
        let limit = gate.volume_quota().unwrap();
        assert_eq!(limit.usage("a".as_bytes()).bytes, 800);
        assert_eq!(limit.usage("a".as_bytes()).events, 3);
        clock.advance(Duration::from_millis(59_500));
        assert_eq!(
            upload("a", 400).await.retry_after(),
            Some("1"),
            "0.5 s rounds up to 1"
        );
        clock.advance(Duration::from_millis(500));
        assert_eq!(
            upload("a", 400).await.status,
            StatusCode::OK,
            "a new window"
        );
    });
}

/// A request body with no declared length, one frame per element: hyper sends it chunked.
struct Chunked(Vec<Bytes>);

impl http_body::Body for Chunked {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Poll::Ready(if self.0.is_empty() {
            None
        } else {
            Some(Ok(Frame::data(self.0.remove(0))))
        })
    }
}

#[test]
fn a_chunked_body_is_counted_as_it_streams_and_ended_at_the_bytes_limit() {
    run(async {
        let clock = ManualClock::new();
        let gate = volume_gate(&clock);
        let addr = serve(upload_app(&gate)).await;
        let client = Client::builder(TokioExecutor::new()).build_http::<Chunked>();
        let upload = |actor: &'static str| {
            let client = client.clone();
            async move {
                let chunks = Chunked(vec![Bytes::from(vec![b'x'; 200]); 3]);
                let request = Request::post(format!("http://{addr}/upload"))
                    .header(ACTOR, actor)
                    .body(chunks)
                    .unwrap();
                let response = client.request(request).await.unwrap();
                let status = response.status();
                let body = response.into_body().collect().await.unwrap().to_bytes();
                (status, body)
            }
        };
        let limit = gate.volume_quota().unwrap();
        // 600 bytes, chunked: admitted as one write, its bytes counted as they arrive.
        assert_eq!(
            upload("a").await,
            (StatusCode::OK, Bytes::from("600 bytes"))
        );
        let usage = limit.usage("a".as_bytes());
        assert_eq!((usage.events, usage.bytes), (1, 600));
        // 600 more: the body ends when it would pass 1,000; the handler never sees the rest.
        let (status, _) = upload("a").await;
        assert_eq!(
            status,
            StatusCode::BAD_REQUEST,
            "axum's answer to a failed body"
        );
        let usage = limit.usage("a".as_bytes());
        assert_eq!(usage.events, 2);
        assert!(
            (801..=1_000).contains(&usage.bytes),
            "counted past the limit, or stopped early: {}",
            usage.bytes
        );
        // Another actor's budget is its own.
        assert_eq!(upload("b").await.0, StatusCode::OK);
    });
}

#[test]
fn a_volume_refusal_does_not_spend_the_rate_token() {
    run(async {
        let clock = ManualClock::new();
        // Two tokens a minute; 1,000 bytes a minute. Both read one clock.
        let rate = BucketConfig::new(2, Duration::from_secs(30)).unwrap();
        let limiter = Limiter::builder()
            .build_with_clock([rate], clock.clone())
            .unwrap();
        let quota = Quota::new(100, 1_000, Duration::from_secs(60)).unwrap();
        let quotas = Quotas::builder().quota(1).build().unwrap();
        let gate = Arc::new(
            Gate::new()
                .in_flight(quotas.clone())
                .rate(limiter, 0)
                .volume(RateLimit::with_clock(quota, clock)),
        );
        let layer = AdmitLayer::builder(by_actor())
            .gate(Arc::clone(&gate))
            .build()
            .unwrap();
        let app = Router::new()
            .route(
                "/upload",
                post(|body: Bytes| async move { format!("{} bytes", body.len()) }),
            )
            .route("/", get(|| async { "hello" }))
            .layer(layer);
        let addr = serve(app).await;
        let client = client();
        let upload = |bytes: usize| {
            let body = Bytes::from(vec![b'x'; bytes]);
            send(&client, addr, Method::POST, "/upload", Some("a"), body)
        };

        // The first token and 600 bytes.
        assert_eq!(upload(600).await.body, "600 bytes");
        // The second token is taken, then the volume quota refuses 600 more bytes: the layer
        // answers for the volume quota, and the gate refunds the token.
        let over = upload(600).await;
        assert_eq!(over.status, StatusCode::TOO_MANY_REQUESTS, "{over:?}");
        assert_eq!(over.retry_after(), Some("60"), "the window turns in 60 s");
        assert!(String::from_utf8_lossy(&over.body).contains("bytes quota"));
        // So the next small request of the same key still has a token. Without the refund the
        // bucket would be empty, and this would be refused for rate (Retry-After 30).
        let small = get_as(&client, addr, "a").await;
        assert_eq!(small.status, StatusCode::OK, "{small:?}");
        // Now both tokens are spent, and the refusal is the rate limiter's.
        let limited = get_as(&client, addr, "a").await;
        assert_eq!(limited.status, StatusCode::TOO_MANY_REQUESTS);
        assert!(String::from_utf8_lossy(&limited.body).contains("rate limited"));

        let limit = gate.volume_quota().unwrap();
        assert_eq!(
            limit.usage("a".as_bytes()).bytes,
            600,
            "the refused bytes not counted"
        );
        assert_eq!(quotas.total_in_flight(), 0, "no refusal kept a place");
    });
}

#[test]
fn a_malformed_content_length_is_refused_before_any_charge() {
    run(async {
        let quotas = Quotas::new();
        let layer = AdmitLayer::builder(by_actor())
            .gate(
                Gate::new()
                    .in_flight(quotas.clone())
                    .volume(RateLimit::new(Quota::default())),
            )
            .build()
            .unwrap();
        // hyper refuses to send or parse such a request, so call the service directly.
        let mut app = layer.layer(hello());
        let request = Request::get("/")
            .header(ACTOR, "a")
            .header("content-length", "12 bytes")
            .body(Body::empty())
            .unwrap();
        let response = app.call(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        assert_eq!(
            response.extensions().get::<AdmitRefused>(),
            Some(&AdmitRefused::BadContentLength)
        );
        assert!(response.body().is_refusal());
        assert_eq!(quotas.total_in_flight(), 0);
    });
}

// ---------------------------------------------------------------------------------------
// The layer's own rules.

#[test]
fn a_volume_reading_ahead_is_a_server_error() {
    // `build` refuses a gate whose limiter clock runs ahead of its volume quota's, so this is
    // only reachable with a custom clock that drifts; it is the server's fault, not the
    // client's, and no wait cures it.
    let limit = RateLimit::with_clock(Quota::default(), ManualClock::new());
    let refused = AdmitRefused::Volume(limit.try_acquire_at("a", 1, u64::MAX).unwrap_err());
    assert_eq!(refused.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(refused.retry_after_secs(), None);
    assert_eq!(refused.to_response().headers().get("retry-after"), None);
}

#[test]
fn a_custom_refusal_is_sent_with_the_layer_s_headers() {
    run(async {
        let clock = ManualClock::new();
        let config = BucketConfig::new(1, Duration::from_secs(1)).unwrap();
        let limiter = Limiter::builder()
            .build_with_clock([config], clock)
            .unwrap();
        let layer = AdmitLayer::builder(by_actor())
            .gate(Gate::new().rate(limiter, 0))
            .rate_limit_headers(true)
            .on_refusal(|refused| {
                let mut response = http::Response::new(Bytes::from(r#"{"error":"slow down"}"#));
                *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                let secs = refused.retry_after_secs().unwrap_or(1);
                response.headers_mut().insert("retry-after", secs.into());
                response
            })
            .build()
            .unwrap();
        let addr = serve(hello().layer(layer)).await;
        let client = client();
        get_as(&client, addr, "a").await;
        let refused = get_as(&client, addr, "a").await;
        assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(refused.body, r#"{"error":"slow down"}"#);
        assert_eq!(refused.retry_after(), Some("1"));
        assert_eq!(refused.header("ratelimit"), Some("\"rate\";r=0;t=1"));
    });
}

#[test]
fn a_refusal_after_the_in_flight_charge_gives_the_place_back() {
    run(async {
        let quotas = Quotas::builder().quota(1).build().unwrap();
        let config = BucketConfig::new(1, Duration::from_secs(60)).unwrap();
        let limiter = Limiter::builder()
            .build_with_clock([config], ManualClock::new())
            .unwrap();
        let layer = AdmitLayer::builder(by_actor())
            .gate(Gate::new().in_flight(quotas.clone()).rate(limiter, 0))
            .build()
            .unwrap();
        let addr = serve(hello().layer(layer)).await;
        let client = client();
        assert_eq!(get_as(&client, addr, "a").await.status, StatusCode::OK);
        for _ in 0..3 {
            let refused = get_as(&client, addr, "a").await;
            assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
            assert!(String::from_utf8_lossy(&refused.body).contains("rate limited"));
        }
        assert_eq!(quotas.total_in_flight(), 0);
    });
}

#[test]
fn builds_are_checked() {
    let limiter = Limiter::builder()
        .build([BucketConfig::per_second(1).unwrap()])
        .unwrap();
    let error = AdmitLayer::builder(by_actor())
        .gate(Gate::new().rate(limiter, 1))
        .build()
        .unwrap_err();
    assert_eq!(
        error,
        AdmitConfigError::UnknownClass {
            class: 1,
            classes: 1
        }
    );
    assert!(error.to_string().contains("class 1"));
    assert_eq!(
        AdmitLayer::builder(by_actor()).build().unwrap_err(),
        AdmitConfigError::NoDefence
    );
    let open: Gate = Gate::new();
    assert_eq!(
        AdmitLayer::builder(by_actor())
            .gate(open)
            .build()
            .unwrap_err(),
        AdmitConfigError::NoDefence
    );
    // The gate hands the limiter's reading to the volume quota: a limiter clock 5 s ahead
    // would have every volume charge refused, so the build is.
    let ahead = Limiter::builder()
        .build_with_clock(
            [BucketConfig::per_second(1).unwrap()],
            ManualClock::starting_at(5_000_000_000),
        )
        .unwrap();
    let volume = RateLimit::with_clock(Quota::default(), ManualClock::new());
    let error = AdmitLayer::builder(by_actor())
        .gate(Gate::new().rate(ahead, 0).volume(volume))
        .build()
        .unwrap_err();
    assert_eq!(
        error,
        AdmitConfigError::ClocksApart {
            ahead_by: Duration::from_secs(5)
        }
    );
    assert!(error.to_string().contains("one clock"));
    fn is_static_error<E: std::error::Error + Clone + Send + Sync + 'static>() {}
    is_static_error::<AdmitRefused>();
    is_static_error::<AdmitConfigError>();
    is_static_error::<MissingKey>();
    fn is_send_sync<T: Send + Sync>() {}
    is_send_sync::<AdmitLayer<PeerIp>>();
    is_send_sync::<Admit<Router, HeaderKey>>();
    fn is_send<T: Send>() {}
    is_send::<AdmitBody<Body>>(); // as Send as the body it wraps (axum's is not Sync)
    is_send_sync::<AdmitBody<String>>();
}

// ---------------------------------------------------------------------------------------
// gRPC clients: a refusal they can read.

/// A gRPC request refused by the rate limiter is answered the way a gRPC client reads a
/// refusal: HTTP 200, `grpc-status: 8` (RESOURCE_EXHAUSTED), the message, and the retry
/// pushback; a plain HTTP request from the same key still gets its 429.
#[test]
fn a_grpc_refusal_is_resource_exhausted_with_retry_pushback() {
    run(async {
        let clock = ManualClock::starting_at(1_000_000_000);
        let limiter = Limiter::builder()
            .build_with_clock([BucketConfig::per_minute(1).unwrap()], clock)
            .unwrap();
        let layer = AdmitLayer::builder(by_actor())
            .gate(Gate::new().rate(limiter, 0))
            .build()
            .unwrap();
        let app = Router::new().route("/svc.Echo/Say", post(|| async { "ok" }));
        let addr = serve(app.layer(layer)).await;
        let client = client();
        let grpc = || {
            Request::builder()
                .method(Method::POST)
                .uri(format!("http://{addr}/svc.Echo/Say"))
                .header(ACTOR, "caller")
                .header("content-type", "application/grpc+proto")
                .body(Full::new(Bytes::new()))
                .unwrap()
        };
        let first = client.request(grpc()).await.unwrap();
        assert_eq!(first.status(), StatusCode::OK);
        assert!(first.headers().get("grpc-status").is_none(), "admitted");
        let refused = client.request(grpc()).await.unwrap();
        assert_eq!(
            refused.status(),
            StatusCode::OK,
            "gRPC carries its status in headers"
        );
        let h = refused.headers();
        assert_eq!(h["grpc-status"], "8");
        assert_eq!(h["grpc-retry-pushback-ms"], "60000");
        assert_eq!(h["retry-after"], "60");
        assert_eq!(h["content-type"], "application/grpc");
        assert!(!h["grpc-message"].is_empty());
        let plain = send(
            &client,
            addr,
            Method::POST,
            "/svc.Echo/Say",
            Some("caller"),
            Bytes::new(),
        )
        .await;
        assert_eq!(plain.status, StatusCode::TOO_MANY_REQUESTS);
    });
}

#[test]
fn grpc_messages_are_percent_encoded() {
    let refused = AdmitRefused::BadContentLength;
    let response = refused.to_grpc_response();
    let message = response.headers()["grpc-message"].to_str().unwrap();
    assert!(message.contains("Content-Length"));
    assert!(!message.contains(' ') || message.bytes().all(|b| (0x20..=0x7e).contains(&b)));
    assert_eq!(
        super::response::grpc_percent_encode_for_test("50% é"),
        "50%25 %C3%A9"
    );
}

#[test]
fn a_refused_body_stays_ended_however_often_it_is_polled() {
    use super::meter::MeteredBody;
    let chunks = Chunked(vec![Bytes::from_static(b"abc"); 4]);
    // A meter that admits 6 bytes in all.
    let budget = std::sync::atomic::AtomicU64::new(6);
    let meter: super::meter::Meter = Box::new(move |n| {
        let left = budget.load(std::sync::atomic::Ordering::Relaxed);
        if n > left {
            let limit = RateLimit::new(Quota::new(1, 1, Duration::from_secs(60)).unwrap());
            return Err(limit
                .try_acquire_bytes(&crate::HashedActor::new("x"), 2)
                .unwrap_err()
                .into());
        }
        budget.store(left - n, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    });
    let mut body = std::pin::pin!(MeteredBody::new(chunks, Some(meter)));
    let waker = std::task::Waker::noop();
    let mut cx = Context::from_waker(waker);
    let mut poll = || match http_body::Body::poll_frame(body.as_mut(), &mut cx) {
        Poll::Ready(Some(Ok(frame))) => Some(Ok(frame.into_data().unwrap().len())),
        Poll::Ready(Some(Err(e))) => Some(Err(e.to_string())),
        Poll::Ready(None) => None,
        Poll::Pending => panic!("ready at once"),
    };
    assert_eq!(poll(), Some(Ok(3)));
    assert_eq!(poll(), Some(Ok(3)));
    let refused = poll().unwrap().unwrap_err();
    assert!(refused.contains("after 6 bytes"), "{refused}");
    assert_eq!(
        poll(),
        None,
        "the fourth frame was handed on after the refusal"
    );
    assert_eq!(poll(), None);
}

/// A decision refused while a limit change landed is no misconfiguration: 503 with
/// `Retry-After: 1`, not the 500 of a reading ahead of the clock.
#[test]
fn a_refusal_while_a_change_lands_is_503_and_says_ask_again() {
    use crate::clock::Horizon;
    use crate::limiter::{InvalidCharge, LimiterRefused};
    let clock = ManualClock::starting_at(5_000_000);
    let horizon = Horizon::new();
    let frozen = horizon.freeze(&clock);
    clock.advance_ns(10_000_000);
    let landing = horizon.admit(frozen.bound() + 1, &clock).unwrap_err();
    let refused = AdmitRefused::Limiter(LimiterRefused::Invalid(InvalidCharge::ReadingAhead(
        landing,
    )));
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.retry_after_secs(), Some(1));
    assert_eq!(refused.to_response().headers()["retry-after"], "1");
    drop(frozen);
    let ahead = horizon.admit(u64::MAX, &clock).unwrap_err();
    let misconfigured =
        AdmitRefused::Limiter(LimiterRefused::Invalid(InvalidCharge::ReadingAhead(ahead)));
    assert_eq!(misconfigured.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(misconfigured.retry_after_secs(), None);
}
