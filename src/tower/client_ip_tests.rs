//! [`ClientIp`] against the spoofing table of [`crate::tower`]: each row a test, asserting
//! whom the extractor charges beside whom tower_governor's `SmartIpKeyExtractor` (the
//! leftmost rule) charges for the same request. Most rows build a `Request` with its peer
//! set; the rows marked so in the table also run over a real loopback socket (HTTP/1 through
//! axum, HTTP/2 through hyper), and the parser is fuzzed for panics and for any address other
//! than the proxy's own entry.

use super::tests::{client, hello, run, serve, HttpClient};
use super::*;
use crate::gate::Gate;
use crate::{BucketConfig, Limiter, ManualClock};
use axum::extract::ConnectInfo;
use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use proptest::prelude::*;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tower_governor::key_extractor::{KeyExtractor as GovernorKey, SmartIpKeyExtractor};

/// The trusted balancer's address in the rows.
const PROXY: &str = "10.0.0.1";
/// The client's real address, as the trusted proxy appends it.
const CLIENT: &str = "203.0.113.7";
/// What the client writes to be charged as someone else.
const FORGED: &str = "198.51.100.1";

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

fn trusting(key: ClientIp) -> ClientIp {
    key.trust("10.0.0.0/8")
        .unwrap()
        .from_extension::<ConnectInfo<SocketAddr>>()
}

fn xff() -> ClientIp {
    trusting(ClientIp::x_forwarded_for())
}

fn forwarded() -> ClientIp {
    trusting(ClientIp::forwarded())
}

/// Whom `key` charges for a request from `peer` carrying `headers` (one field line each, in
/// order), and whom the leftmost rule charges for the same request.
fn charged(
    key: &ClientIp,
    peer: &str,
    headers: &[(&str, &str)],
) -> (Result<IpAddr, MissingKey>, Option<IpAddr>) {
    let mut request = Request::get("/");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let mut request = request.body(()).unwrap();
    let peer = SocketAddr::new(ip(peer), 40_000);
    request.extensions_mut().insert(ConnectInfo(peer));
    let ours = KeyExtractor::extract(key, &request);
    let leftmost = GovernorKey::extract(&SmartIpKeyExtractor, &request).ok();
    (ours, leftmost)
}

/// Header field lines, in order.
type Lines<'a> = &'a [(&'a str, &'a str)];

fn refused(key: &ClientIp, why: UnreadableChain) -> Result<IpAddr, MissingKey> {
    Err(MissingKey::ForwardedChain {
        header: key.header().clone(),
        why,
    })
}

// ---- the rows ------------------------------------------------------------------------------

#[test]
fn row_client_written_xff_through_a_trusted_proxy() {
    let key = xff();
    let chain = format!("{FORGED}, {CLIENT}");
    let (ours, leftmost) = charged(&key, PROXY, &[("x-forwarded-for", &chain)]);
    assert_eq!(ours, Ok(ip(CLIENT)));
    assert_eq!(leftmost, Some(ip(FORGED)));
}

#[test]
fn row_a_direct_request_carrying_xff() {
    let (ours, leftmost) = charged(&xff(), CLIENT, &[("x-forwarded-for", FORGED)]);
    assert_eq!(ours, Ok(ip(CLIENT)), "an untrusted peer is charged itself");
    assert_eq!(leftmost, Some(ip(FORGED)));
}

#[test]
fn row_a_chain_longer_than_the_trusted_hops() {
    // client → CDN edge 192.0.2.10 (one trusted hop, not listed) → balancer 10.0.0.1.
    let key = xff().trust_hops(1).unwrap();
    let chain = format!("{FORGED}, {CLIENT}, 192.0.2.10");
    let (ours, leftmost) = charged(&key, PROXY, &[("x-forwarded-for", &chain)]);
    assert_eq!(ours, Ok(ip(CLIENT)));
    assert_eq!(leftmost, Some(ip(FORGED)));
    // Shorter than the hops: only the edge is named, and it is not the client.
    let (ours, leftmost) = charged(&key, PROXY, &[("x-forwarded-for", "192.0.2.10")]);
    assert_eq!(ours, refused(&key, UnreadableChain::OnlyTrusted));
    assert_eq!(leftmost, Some(ip("192.0.2.10")), "everyone behind the edge");
    // The hops are counted only behind a trusted peer.
    let (ours, _) = charged(&key, CLIENT, &[("x-forwarded-for", &chain)]);
    assert_eq!(ours, Ok(ip(CLIENT)));
}

#[test]
fn row_several_xff_field_lines() {
    let key = xff();
    let lines = [("x-forwarded-for", FORGED), ("x-forwarded-for", CLIENT)];
    let (ours, leftmost) = charged(&key, PROXY, &lines);
    assert_eq!(ours, Ok(ip(CLIENT)), "the proxy's line is the last");
    assert_eq!(leftmost, Some(ip(FORGED)));
    // A trusted second proxy's entry on the last line is passed over.
    let lines = [
        ("x-forwarded-for", FORGED),
        ("x-forwarded-for", "203.0.113.7, 10.0.0.9"),
    ];
    assert_eq!(charged(&key, PROXY, &lines).0, Ok(ip(CLIENT)));
}

#[test]
fn row_forwarded_quoted_ipv6_with_a_port() {
    let key = forwarded();
    let lines = [("forwarded", r#"for="[2001:db8::1]:4711""#)];
    let (ours, leftmost) = charged(&key, PROXY, &lines);
    assert_eq!(ours, Ok(ip("2001:db8::")), "masked to its /64");
    assert_eq!(leftmost, Some(ip("2001:db8::1")));
}

#[test]
fn row_forwarded_mixed_case_for() {
    let key = forwarded();
    let value = format!("for={FORGED}, For={CLIENT};Proto=https");
    let (ours, leftmost) = charged(&key, PROXY, &[("forwarded", &value)]);
    assert_eq!(ours, Ok(ip(CLIENT)));
    assert_eq!(leftmost, Some(ip(FORGED)));
}

#[test]
fn row_forwarded_hidden_or_unknown() {
    let key = forwarded();
    for hidden in [
        "for=_hidden",
        "for=unknown",
        r#"for="_gazonk:_8080""#,
        "proto=https",
    ] {
        let value = format!("for={FORGED}, {hidden}");
        let (ours, leftmost) = charged(&key, PROXY, &[("forwarded", &value)]);
        assert_eq!(ours, refused(&key, UnreadableChain::Hidden), "{hidden}");
        assert_eq!(leftmost, Some(ip(FORGED)), "{hidden}");
    }
}

#[test]
fn row_ports_whitespace_and_zone_ids() {
    let key = xff();
    let chain = format!(" {FORGED} ,\t{CLIENT}:5555 ");
    let (ours, leftmost) = charged(&key, PROXY, &[("x-forwarded-for", &chain)]);
    assert_eq!(ours, Ok(ip(CLIENT)));
    assert_eq!(leftmost, Some(ip(FORGED)));
    let (ours, _) = charged(&key, PROXY, &[("x-forwarded-for", "[2001:db8::7]:443")]);
    assert_eq!(ours, Ok(ip("2001:db8::")));
    // A zone id names an address on the proxy's own link: no client to charge. The leftmost
    // rule skips the entry it cannot parse and falls back to the proxy.
    let (ours, leftmost) = charged(&key, PROXY, &[("x-forwarded-for", "fe80::1%eth0")]);
    assert_eq!(ours, refused(&key, UnreadableChain::Malformed));
    assert_eq!(leftmost, Some(ip(PROXY)), "everyone behind the proxy");
    let key = forwarded();
    let (ours, _) = charged(&key, PROXY, &[("forwarded", r#"for="[fe80::1%25eth0]""#)]);
    assert_eq!(ours, refused(&key, UnreadableChain::Malformed));
    let (ours, _) = charged(
        &key,
        PROXY,
        &[("forwarded", r#" by=_lb ;for="203.0.113.7:80" ; "#)],
    );
    assert_eq!(ours, Ok(ip(CLIENT)));
}

#[test]
fn row_ipv4_mapped_ipv6() {
    let key = xff();
    let (ours, leftmost) = charged(
        &key,
        "::ffff:10.0.0.1",
        &[("x-forwarded-for", "::ffff:203.0.113.7")],
    );
    assert_eq!(
        ours,
        Ok(ip(CLIENT)),
        "the mapped peer is trusted, the mapped client is IPv4"
    );
    assert_eq!(
        leftmost,
        Some(ip("::ffff:203.0.113.7")),
        "another bucket than 203.0.113.7"
    );
}

#[test]
fn row_forwarded_and_xff_disagree() {
    let forwarded_for = format!("for={CLIENT}");
    let lines = [
        ("x-forwarded-for", FORGED),
        ("forwarded", forwarded_for.as_str()),
    ];
    let (ours, leftmost) = charged(&forwarded(), PROXY, &lines);
    assert_eq!(ours, Ok(ip(CLIENT)), "the configured header alone is read");
    assert_eq!(leftmost, Some(ip(FORGED)), "X-Forwarded-For first");
    let (ours, _) = charged(&xff(), PROXY, &lines);
    assert_eq!(
        ours,
        Ok(ip(FORGED)),
        "configured for the other header, it reads that one"
    );
}

#[test]
fn row_unreadable_chains_are_refused() {
    let key = xff();
    // The field lines, why they are refused, and whom the leftmost rule charges instead.
    let cases: &[(Lines, UnreadableChain, &str)] = &[
        (&[], UnreadableChain::Absent, PROXY),
        (
            &[("x-forwarded-for", "10.0.0.2")],
            UnreadableChain::OnlyTrusted,
            "10.0.0.2",
        ),
        (
            &[("x-forwarded-for", "203.0.113.7, lb.internal")],
            UnreadableChain::Malformed,
            CLIENT,
        ),
        (
            &[("x-forwarded-for", "unknown")],
            UnreadableChain::Hidden,
            PROXY,
        ),
    ];
    for (lines, why, leftmost_charges) in cases {
        let (ours, leftmost) = charged(&key, PROXY, lines);
        assert_eq!(ours, refused(&key, *why), "{lines:?}");
        assert_eq!(leftmost, Some(ip(leftmost_charges)), "{lines:?}");
    }
    // Over the stated length, across lines: more trusted entries than the walk reads. A
    // long client-written part left of the client's entry is never read.
    let long = vec!["10.0.0.2"; ClientIp::MAX_ENTRIES].join(",");
    let lines = [
        ("x-forwarded-for", CLIENT),
        ("x-forwarded-for", long.as_str()),
        ("x-forwarded-for", "10.0.0.3"),
    ];
    assert_eq!(
        charged(&key, PROXY, &lines).0,
        refused(&key, UnreadableChain::TooLong)
    );
    let forged = vec![FORGED; 3 * ClientIp::MAX_ENTRIES].join(",");
    let lines = [
        ("x-forwarded-for", forged.as_str()),
        ("x-forwarded-for", CLIENT),
    ];
    assert_eq!(charged(&key, PROXY, &lines).0, Ok(ip(CLIENT)));
    let key = forwarded();
    let long = vec!["for=10.0.0.2"; ClientIp::MAX_ENTRIES + 1].join(",");
    assert_eq!(
        charged(&key, PROXY, &[("forwarded", &long)]).0,
        refused(&key, UnreadableChain::TooLong)
    );
    let key = xff();
    // Not a visible-ASCII header value.
    let mut headers = HeaderMap::new();
    headers.insert(
        "x-forwarded-for",
        http::HeaderValue::from_bytes(b"203.0.113.\xff").unwrap(),
    );
    assert_eq!(
        key.client_of(ip(PROXY), &headers),
        refused(&key, UnreadableChain::Malformed)
    );

    let key = forwarded();
    for malformed in [
        r#"for="203.0.113.7"#,
        "for=203.0.113.7;for=198.51.100.1",
        "for",
        "=203.0.113.7",
        r#"for="203.0.113\.7""#,
        "for=203.0.113.7 x",
        "for = 203.0.113.7",
    ] {
        let (ours, _) = charged(&key, PROXY, &[("forwarded", malformed)]);
        assert_eq!(
            ours,
            refused(&key, UnreadableChain::Malformed),
            "{malformed}"
        );
    }
    // An empty element is allowed by the list syntax.
    let (ours, _) = charged(
        &key,
        PROXY,
        &[("forwarded", "for=198.51.100.1, , for=203.0.113.7,")],
    );
    assert_eq!(ours, Ok(ip(CLIENT)));
}

#[test]
fn row_a_cdn_header_from_a_trusted_peer_only() {
    let key = trusting(ClientIp::single_header(http::HeaderName::from_static(
        "cf-connecting-ip",
    )));
    let (ours, _) = charged(&key, PROXY, &[("cf-connecting-ip", CLIENT)]);
    assert_eq!(ours, Ok(ip(CLIENT)));
    let (ours, _) = charged(&key, CLIENT, &[("cf-connecting-ip", FORGED)]);
    assert_eq!(ours, Ok(ip(CLIENT)), "an untrusted peer is charged itself");
    let two = [("cf-connecting-ip", FORGED), ("cf-connecting-ip", CLIENT)];
    assert_eq!(
        charged(&key, PROXY, &two).0,
        refused(&key, UnreadableChain::NotOneValue)
    );
    let list = format!("{FORGED}, {CLIENT}");
    let (ours, _) = charged(&key, PROXY, &[("cf-connecting-ip", &list)]);
    assert_eq!(ours, refused(&key, UnreadableChain::NotOneValue));
    let (ours, _) = charged(&key, PROXY, &[("cf-connecting-ip", "10.0.0.3")]);
    assert_eq!(ours, refused(&key, UnreadableChain::OnlyTrusted));
    let (ours, _) = charged(&key, PROXY, &[("cf-connecting-ip", " ")]);
    assert_eq!(ours, refused(&key, UnreadableChain::Absent));
    assert_eq!(
        charged(&key, PROXY, &[]).0,
        refused(&key, UnreadableChain::Absent)
    );
    // Other headers are not read.
    let (ours, _) = charged(&key, PROXY, &[("x-forwarded-for", CLIENT)]);
    assert_eq!(ours, refused(&key, UnreadableChain::Absent));
}

#[test]
fn a_missing_peer_address_is_a_server_fault() {
    let request = Request::get("/")
        .header("x-forwarded-for", CLIENT)
        .body(())
        .unwrap();
    assert_eq!(
        KeyExtractor::extract(&xff(), &request),
        Err(MissingKey::PeerAddr)
    );
}

#[test]
fn configuration_is_checked_and_refusals_are_readable() {
    let base = ClientIp::x_forwarded_for;
    assert_eq!(
        base().trust("lb.internal").unwrap_err(),
        AdmitConfigError::ProxyNotCidr
    );
    assert_eq!(
        base().trust("10.0.0.0/33").unwrap_err(),
        AdmitConfigError::ProxyNotCidr
    );
    assert_eq!(
        base().trust("::/0").unwrap_err(),
        AdmitConfigError::TrustsEveryAddress
    );
    assert_eq!(
        base().trust("::ffff:0.0.0.0/96").unwrap_err(),
        AdmitConfigError::TrustsEveryAddress
    );
    let too_many = ClientIp::MAX_ENTRIES + 1;
    assert_eq!(
        base().trust_hops(too_many).unwrap_err(),
        AdmitConfigError::TooManyHops { hops: too_many }
    );
    assert_eq!(
        base().ipv6_prefix(129).unwrap_err(),
        AdmitConfigError::Ipv6PrefixTooLong { bits: 129 }
    );
    // An IPv4-mapped range trusts the IPv4 peers it maps; a host address is a /32.
    let key = base()
        .trust("::ffff:10.0.0.0/104")
        .unwrap()
        .trust(" 192.0.2.7 ")
        .unwrap();
    let mut headers = HeaderMap::new();
    headers.insert("x-forwarded-for", CLIENT.parse().unwrap());
    assert_eq!(key.client_of(ip("10.9.9.9"), &headers), Ok(ip(CLIENT)));
    assert_eq!(key.client_of(ip("192.0.2.7"), &headers), Ok(ip(CLIENT)));
    assert_eq!(
        key.client_of(ip("192.0.2.8"), &headers),
        Ok(ip("192.0.2.8"))
    );
    // Without a trusted range no header is read, whatever the hops.
    let untrusting = base().trust_hops(3).unwrap();
    assert_eq!(untrusting.client_of(ip(PROXY), &headers), Ok(ip(PROXY)));
    // The messages name the header and the setting.
    let message = refused(&key, UnreadableChain::OnlyTrusted)
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("x-forwarded-for") && message.contains("trusted proxy"),
        "{message}"
    );
    assert!(UnreadableChain::TooLong.to_string().contains("32"));
    assert!(AdmitConfigError::ProxyNotCidr
        .to_string()
        .contains("10.0.0.0/8"));
    assert!(format!("{key:?}").contains("x-forwarded-for"));
    let refusal = AdmitRefused::MissingKey(refused(&key, UnreadableChain::Hidden).unwrap_err());
    assert_eq!(refusal.status(), StatusCode::BAD_REQUEST);
}

// ---- the parser, fuzzed --------------------------------------------------------------------

/// Header text with the separators and quotes over-represented.
fn header_text() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            Just("\"".to_owned()),
            Just(",".to_owned()),
            Just(";".to_owned()),
            Just("=".to_owned()),
            Just("\\".to_owned()),
            Just("for=".to_owned()),
            Just("[".to_owned()),
            Just("]".to_owned()),
            Just(":".to_owned()),
            Just(" ".to_owned()),
            Just("_x".to_owned()),
            Just("198.51.100.1".to_owned()),
            Just("2001:db8::1".to_owned()),
            "[ -~]{1,6}",
        ],
        0..12,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    /// Whatever the client writes before the proxy's entry, on the same line or a line of
    /// its own, the charge is the proxy's entry or a refusal: never an address the client
    /// wrote, never a panic.
    #[test]
    fn a_client_prefix_never_steers_the_charge(prefix in header_text(), same_line in any::<bool>()) {
        for (key, appended) in [(xff(), CLIENT.to_owned()), (forwarded(), format!("for={CLIENT}"))] {
            let mut headers = HeaderMap::new();
            let Ok(written) = prefix.parse() else { return Ok(()) };
            if same_line {
                let Ok(line) = format!("{prefix}, {appended}").parse() else { return Ok(()) };
                headers.append(key.header().clone(), line);
            } else {
                headers.append(key.header().clone(), written);
                headers.append(key.header().clone(), appended.parse().unwrap());
            }
            match key.client_of(ip(PROXY), &headers) {
                Ok(charged) => prop_assert_eq!(charged, ip(CLIENT), "{:?}", headers),
                Err(MissingKey::ForwardedChain { why, .. }) => prop_assert!(
                    matches!(why, UnreadableChain::Malformed | UnreadableChain::TooLong),
                    "{:?}: {:?}", headers, why
                ),
                Err(other) => prop_assert!(false, "{:?}", other),
            }
        }
    }

    /// The fast IPv4 path reads exactly what the standard parser reads.
    #[test]
    fn the_ipv4_fast_path_agrees_with_std(text in "[0-9.]{0,17}|[0-9]{1,4}(\\.[0-9]{1,4}){3}") {
        prop_assert_eq!(super::client_ip::ipv4(text.as_bytes()), text.parse().ok());
    }

    /// Any header text: an answer, never a panic.
    #[test]
    fn any_header_is_answered(text in header_text()) {
        let Ok(value) = text.parse::<http::HeaderValue>() else { return Ok(()) };
        for key in [xff(), forwarded(), xff().trust_hops(2).unwrap()] {
            let mut headers = HeaderMap::new();
            headers.insert(key.header().clone(), value.clone());
            let _ = key.client_of(ip(PROXY), &headers);
        }
    }
}

// ---- over real sockets ---------------------------------------------------------------------

/// A gate of one token per identity, refilled every 10 s of a clock that does not move.
fn one_token_gate() -> Arc<Gate<ManualClock>> {
    let config = BucketConfig::new(1, Duration::from_secs(10)).unwrap();
    let limiter = Limiter::builder()
        .build_with_clock([config], ManualClock::new())
        .unwrap();
    Arc::new(Gate::new().rate(limiter, 0))
}

/// Whether `gate` has charged `ip` (its one token is gone).
fn is_charged(gate: &Gate<ManualClock>, ip: &str) -> bool {
    let (limiter, _) = gate.limiter().unwrap();
    let now = limiter.clock().now_ns();
    limiter
        .peek_at(&self::ip(ip), 0, 1, now)
        .unwrap()
        .available()
        == 0
}

async fn get_with(client: &HttpClient, addr: SocketAddr, lines: &[(&str, &str)]) -> StatusCode {
    let mut request = Request::get(format!("http://{addr}/"));
    for (name, value) in lines {
        request = request.header(*name, *value);
    }
    let response = client
        .request(request.body(Full::new(Bytes::new())).unwrap())
        .await
        .unwrap();
    response.status()
}

/// An axum server on loopback behind the layer keyed by `X-Forwarded-For`, trusting
/// `proxy` alone, over [`one_token_gate`].
async fn serve_trusting(proxy: &str) -> (Arc<Gate<ManualClock>>, SocketAddr) {
    let gate = one_token_gate();
    let key = ClientIp::x_forwarded_for()
        .trust(proxy)
        .unwrap()
        .from_extension::<ConnectInfo<SocketAddr>>();
    let layer = AdmitLayer::builder(key)
        .gate(Arc::clone(&gate))
        .build()
        .unwrap();
    (gate, serve(hello().layer(layer)).await)
}

#[test]
fn over_http1_a_trusted_peer_has_its_appended_entry_charged() {
    run(async {
        // The test's client is the trusted proxy here: it connects from 127.0.0.1.
        let (gate, addr) = serve_trusting("127.0.0.1").await;
        let client = client();
        let chain = format!("{FORGED}, {CLIENT}");
        let lines = [
            ("x-forwarded-for", chain.as_str()),
            ("x-forwarded-for", "127.0.0.1"),
        ];
        assert_eq!(get_with(&client, addr, &lines).await, StatusCode::OK);
        assert!(is_charged(&gate, CLIENT));
        assert!(!is_charged(&gate, FORGED) && !is_charged(&gate, "127.0.0.1"));
        assert_eq!(
            get_with(&client, addr, &lines).await,
            StatusCode::TOO_MANY_REQUESTS
        );
        // From the trusted peer, a chain of trusted entries alone is refused, not charged to it.
        let only_proxy = [("x-forwarded-for", "127.0.0.1")];
        assert_eq!(
            get_with(&client, addr, &only_proxy).await,
            StatusCode::BAD_REQUEST
        );
        assert!(!is_charged(&gate, "127.0.0.1"));
    });
}

#[test]
fn over_http1_a_direct_client_forging_xff_is_charged_itself() {
    run(async {
        // Only 127.0.0.3 is a trusted proxy; the client connects from 127.0.0.2 (on Linux
        // the whole of 127.0.0.0/8 is loopback).
        let (gate, addr) = serve_trusting("127.0.0.3").await;
        let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
        connector.set_local_address(Some(ip("127.0.0.2")));
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build(connector);
        let lines = [("x-forwarded-for", CLIENT)];
        assert_eq!(get_with(&client, addr, &lines).await, StatusCode::OK);
        assert!(is_charged(&gate, "127.0.0.2"));
        assert!(!is_charged(&gate, CLIENT));
    });
}

#[test]
fn over_http2_several_fields_are_walked_from_the_right() {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::service::TowerToHyperService;
    use tower::ServiceExt;
    run(async {
        let gate = one_token_gate();
        let key = ClientIp::x_forwarded_for().trust("127.0.0.1").unwrap();
        let layer = AdmitLayer::builder(key)
            .gate(Arc::clone(&gate))
            .build()
            .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // What the leftmost rule picks from each request the server receives.
        let leftmost_seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = Arc::clone(&leftmost_seen);
        // A plain hyper HTTP/2 server, recording each connection's peer as a `SocketAddr`.
        tokio::spawn(async move {
            loop {
                let Ok((stream, peer)) = listener.accept().await else {
                    return;
                };
                async fn hi<B>(
                    _: Request<B>,
                ) -> Result<http::Response<Full<Bytes>>, std::convert::Infallible> {
                    Ok(http::Response::new(Full::new(Bytes::from("hi"))))
                }
                let service = tower::service_fn(hi);
                let leftmost = Arc::clone(&leftmost_seen);
                let service = layer.layer(service).map_request(
                    move |mut request: Request<hyper::body::Incoming>| {
                        request.extensions_mut().insert(peer);
                        let pick = GovernorKey::extract(&SmartIpKeyExtractor, &request).ok();
                        leftmost.lock().unwrap().push(pick);
                        request
                    },
                );
                tokio::spawn(
                    hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service)),
                );
            }
        });
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (mut sender, connection) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
                .await
                .unwrap();
        tokio::spawn(connection);
        for expected in [StatusCode::OK, StatusCode::TOO_MANY_REQUESTS] {
            let request = Request::get(format!("http://{addr}/"))
                .header("x-forwarded-for", FORGED)
                .header("x-forwarded-for", CLIENT)
                .body(Full::new(Bytes::new()))
                .unwrap();
            let response = sender.send_request(request).await.unwrap();
            assert_eq!(response.version(), http::Version::HTTP_2);
            assert_eq!(response.status(), expected);
            let _ = response.into_body().collect().await.unwrap();
        }
        assert!(is_charged(&gate, CLIENT));
        assert!(!is_charged(&gate, FORGED));
        assert_eq!(*seen.lock().unwrap(), [Some(ip(FORGED)); 2]);
    });
}
