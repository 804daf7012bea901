//! A tower [`Layer`] that puts a [`Gate`] (the crate's three defences, admitted together) in
//! front of any HTTP service (feature `tower`).
//!
//! [`AdmitLayer`] wraps any `Service<http::Request<B>>` (an axum `Router`, a hyper service, a
//! tonic server) and answers a request itself, before the service sees it, when its gate
//! refuses. The gate holds any of the three defences, each charging the request's key:
//!
//! | defence | set on the gate with | charges | refusal |
//! |---|---|---|---|
//! | in-flight quota | [`Gate::in_flight`] | one place of a [`Quotas`], held until the response body is fully sent | 429, `Retry-After: 1` |
//! | keyed rate limit | [`Gate::rate`] | one token of one class of a [`Limiter`] | 429, `Retry-After` = the wait |
//! | volume quota | [`Gate::volume`] | one event of `Content-Length` bytes of a [`RateLimit`]; without a `Content-Length`, one event of 0 bytes, then the body's bytes as they arrive | 429, `Retry-After` = until the window turns; 413 if larger than a window's limit; a streamed body past the limit ends with a [`BodyRefused`] error (axum answers 400) |
//!
//! For keyed rate limits alone, [`RateLayer`] is lighter: the same key extractors and
//! refusals, the request and the service's response passed through unchanged, and none of
//! the in-flight place, the volume, the outcome charges, the rules or the IETF fields (see
//! [`rate`](mod@rate) for when to choose which).
//!
//! [`AdmitLayer`] is a thin layer over the gate's public API: every decision is one
//! [`Gate::try_acquire`], and the layer adds only the HTTP (what the key is, what the answer
//! looks like). The gate is shared: hand the builder an `Arc<Gate>` and keep a clone to read
//! its defences ([`Gate::quotas`], [`Gate::limiter`], [`Gate::volume_quota`]) or to admit the
//! same identities from elsewhere.
//!
//! * **The key** is taken by a [`KeyExtractor`]: the peer's IP ([`PeerIp`], IPv6 masked to
//!   its /64), the client behind trusted proxies ([`ClientIp`], see "Behind proxies" below),
//!   a header ([`HeaderKey`]), or a closure ([`KeyFn`]). A request without one is
//!   refused by default ([`MissingKeyPolicy::Refuse`]: 400, or 500 when the server records no
//!   peer address), since letting it pass would let anyone skip every defence by omitting it.
//! * **The claim and the source.** The key is the request's claim, and by default its source
//!   too. [`AdmitLayerBuilder::source`] reads the source with an extractor of its own (the
//!   client's address: [`ClientIp`], [`PeerIp`]): the gate's limits keyed by the source
//!   charge it, the defences keyed by the claim charge the key (see [`source`] and "The claim
//!   and the source" in [`crate::gate`]). Each key is hashed once per request.
//! * **The source's prefix.** [`AdmitLayerBuilder::source_prefix`] widens an address source
//!   to its network ([`IpPrefix`]: a /24, a /48) for the gate's limits keyed by
//!   [`KeyKind::SourcePrefix`](crate::gate::KeyKind::SourcePrefix): given first, such a limit
//!   refuses a client rotating addresses inside its prefix before it claims an entry per
//!   address, so newcomers keep entries of their own (see "When newcomers keep
//!   their budget" on [`IpPrefix`]).
//! * **Charging by outcome.** A gate's limit charged by outcome
//!   ([`Limit::by_outcome`](crate::gate::Limit::by_outcome)) is only checked at admission;
//!   [`AdmitLayerBuilder::charge_outcome_when`] says which response statuses count (a failed
//!   login's 401), and the layer charges those when the response's head comes back: successes
//!   cost nothing, failures are never forgiven.
//! * **`Retry-After`** is in whole seconds, rounded up, at least 1: a 1.5 s wait says `2`,
//!   never an invitation to retry at once.
//! * **The in-flight place** lives in the response body ([`AdmitBody`], which holds the gate's
//!   [`Pass`](crate::gate::Pass)): it is freed when the body yields its last frame, fails, or is dropped (the
//!   client went away), not when the handler returns. A slow streaming response holds its
//!   place for as long as it streams; an upgraded connection (a WebSocket) holds none once the
//!   upgrade response is sent.
//! * **The volume quota is charged by the declared `Content-Length`**, at admission, all or
//!   nothing; a malformed one is refused with 400 before anything is charged. A request
//!   without one (a chunked upload, a gRPC stream, a GET) is admitted as one event of 0
//!   bytes, and its body ([`MeteredBody`], what the inner service receives) counts each data
//!   frame's bytes before handing it on. The first frame over the actor's bytes limit ends the
//!   body with a [`BodyRefused`] error instead: the handler never reads past the limit, and
//!   the actor is never counted past it.
//! * **The order and the rollback are the gate's** (see [`crate::gate`]): the in-flight place,
//!   then the rate token, then the volume charge, all or none. A request refused by a later
//!   defence gives back what the earlier ones took: a request the volume quota refuses keeps
//!   neither its place nor its rate token.
//! * **One clock.** The gate reads its limiter's clock once and hands that reading to the
//!   volume quota too, so the two must read one time: the default
//!   [`RecentClock`]s do (one process-wide time), as do clones of one
//!   `ManualClock`, or one `MonotonicClock` handed to both (it is `Copy`);
//!   [`AdmitLayerBuilder::build`] refuses a gate whose limiter's clock is ahead of its volume
//!   quota's ([`AdmitConfigError::ClocksApart`]).
//! * **Optional IETF fields.** With [`AdmitLayerBuilder::rate_limit_headers`], every response
//!   a defence of the gate decided carries `RateLimit-Policy` and `RateLimit` as
//!   draft-ietf-httpapi-ratelimit-headers-09 writes them: one item per defence of the gate
//!   that decided the request, numbered from what the admission's own charges left (the
//!   in-flight CAS, each limit's grant, the volume's commit), at the decision's one reading;
//!   no table is read a second time. See "The IETF fields" below.
//! * **gRPC clients** (a request whose `content-type` is `application/grpc…`, as tonic sends)
//!   get a refusal they can read: HTTP 200 with `grpc-status: 8` (`RESOURCE_EXHAUSTED`; 3 or
//!   13 for a bad request or a server fault), `grpc-message`, and the wait as gRPC's
//!   `grpc-retry-pushback-ms` beside `Retry-After` ([`AdmitRefused::to_grpc_response`]). A
//!   tonic server takes the layer as it is (`Server::builder().layer(layer)`); a tonic client
//!   reads the refusal as `Code::ResourceExhausted` (tested over loopback HTTP/2 with tonic's
//!   own server and client).
//! * **Custom refusals.** [`AdmitLayerBuilder::on_refusal`] writes the response from the typed
//!   [`AdmitRefused`]; [`AdmitRefused::to_response`] is the default to start from.
//!
//! # The IETF fields
//!
//! | item | `RateLimit-Policy` | `RateLimit` |
//! |---|---|---|
//! | `"in-flight"` (the in-flight quota) | `q` = the key's quota, `qu="concurrent-requests"`, no `w` (no window) | `r` = places the key has left once this request holds one; `t` = 0 while `r` > 0, else 1 |
//! | each rate limit, by its name | `q` = the burst, `w` = seconds to refill it | `r` = tokens left; `t` = seconds until full, or with none left the wait for the next one |
//! | `"volume"` (the volume quota's bytes) | `q` = bytes a window, `qu="content-bytes"`, `w` = the window | `r` = bytes left in this window, `t` = seconds until it turns |
//! | `"volume-requests"` (its requests) | `q` = requests a window, `w` = the window | `r` = requests left, `t` = as above |
//!
//! * **Names.** A rate limit's item is its [`Limit`](crate::gate::Limit)'s name (in a
//!   `[admit]` file, its `[[admit.limit]]` `name`), so a reload that changes its rate changes
//!   its `q` and `w`, never its name. A limit whose name cannot be one item's (another limit
//!   of the gate has it too, as two [`Gate::rate`] limits both named `rate` do; it is one of
//!   the three names above; or it is empty or not printable ASCII without `"` and `\`) is
//!   `l<index>` instead, its place in the gate's order (`l0`, `l1`…).
//! * **In flight has no window**, so its `t` says when to try again: 0 while the key has a
//!   place left, 1 when it has none: a place frees when one of the key's responses completes,
//!   which no clock foretells, and the `Retry-After` of an in-flight refusal says 1 too.
//! * **A refusal** states the refusing item with the `t` its `Retry-After` says (the limiter:
//!   `r=0` and the wait; the volume: what was left of the limit it hit, and the time until
//!   the window turns; in flight: `r=0;t=1`), the defences before it as their give-back left
//!   them, and none after it (never reached). Every policy item is listed whatever happened.
//! * **No identity** is written: the items are the configuration's names and numbers, and
//!   no partition key (`pk`) is sent: each response describes the buckets of the request's
//!   own keys, so the client knows whose they are.
//! * **Cost.** The admission records each take's numbers as it goes, and the fields are two
//!   strings formatted once a request; with the fields off, the admission records nothing.
//!
//! # In front of an axum service
//!
//! ```no_run
//! use admit::fairness::Quotas;
//! use admit::gate::Gate;
//! use admit::tower::{AdmitLayer, PeerIp};
//! use admit::{BucketConfig, Limiter};
//! use axum::{extract::ConnectInfo, routing::get, Router};
//! use std::net::SocketAddr;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
//! let gate = Gate::new()
//!     .in_flight(Quotas::builder().quota(4).build()?)
//!     .rate(Limiter::builder().build([BucketConfig::per_second(10)?.with_burst(20)?])?, 0);
//! let layer = AdmitLayer::builder(PeerIp::new().from_extension::<ConnectInfo<SocketAddr>>())
//!     .gate(gate)
//!     .build()?;
//! let app = Router::new().route("/", get(|| async { "hello" })).layer(layer);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Per-route rules
//!
//! One layer can hold a gate per route: [`AdmitLayerBuilder::routes`] with [`Routes`], a
//! default gate and [`Rule`]s tried in order, each a method (or any) and an exact path
//! ([`Rule::exact`]), an axum route with parameters ([`Rule::route`]), a path prefix
//! ([`Rule::prefix`]) or a closure over the request's head
//! ([`Rule::when`]), with its gate and its weight (what its gate's
//! [`Cost::Weight`](crate::gate::Cost::Weight) limits charge, never below their `min`). A
//! request no rule matches is admitted by the default gate, which [`Routes::new`] requires:
//! no route is silently unlimited. See [`routes`](mod@routes) for sharing primitives between
//! the rules' gates.
//!
//! ## Matching what the router routes: the layer runs before it
//!
//! The rules read the request's path as the router will (`uri().path()`, undecoded), and
//! match it as axum's router matches a literal route: exactly, byte for byte. Nothing is
//! normalised, because axum normalises nothing: a path it would not route to the `/login`
//! handler is not the `/login` rule's, and a path it would is. What axum 0.8 does with the
//! variants of `/login` (a `post` route, the layer wrapping the whole router), each row a test
//! over a real axum server and client on 127.0.0.1 that checks the rule charged exactly when
//! the handler ran (`src/tower/routes_tests.rs`):
//!
//! | request | axum routes it to the `/login` handler | `Rule::exact("/login")` charges it |
//! |---|---|---|
//! | `POST /login` | yes | yes |
//! | `POST /login?x=1` | yes: the query is not part of the path | yes |
//! | `POST /login/` | no: 404, no trailing-slash redirect | no (the default rule) |
//! | `POST //login` | no: 404, an empty segment is a segment | no |
//! | `POST /%6Cogin` | no: 404, the path is matched undecoded | no |
//! | `POST /LOGIN` | no: 404, paths are case-sensitive | no |
//! | `POST /login;x` | no: 404, `;` is an ordinary byte | no |
//! | `POST /login/../login` | no: 404, dot segments are not resolved | no |
//! | `POST /./login` | no: 404 | no |
//! | `GET /login` | no: 405 | no (the rule is `POST`'s) |
//! | `HEAD /` (a `get` route, `Rule::exact("/").method(Method::GET)`) | yes: axum routes `HEAD` to the `GET` handler | yes: a `GET` rule matches `HEAD` |
//!
//! A client may resolve dot segments before sending (a browser, curl without
//! `--path-as-is`); what reaches the server is what both the rules and the router read. A
//! proxy in front that decodes or normalises paths changes what both see, alike. A layer
//! added inside a nested router (`Router::nest`) sees the path with the nest's prefix
//! stripped, as the nested router does: write its rules' paths as the nested router's.
//!
//! A route with parameters is matched by [`Rule::route`], in axum's syntax, as axum's
//! router matches it (each row a test the same way, with `GET /users/{id}`,
//! `GET /users/{id}/avatar` and `GET /files/{*path}`; and a property test holds the rule to
//! matchit, axum's path router, on paths made from the routes' own pieces):
//!
//! | request | routed, and charged by the rule |
//! |---|---|
//! | `/users/7`, `/users/7?x=1`, `/users/%37`, `/users/a;b` | yes (`Rule::route("/users/{id}")`) |
//! | `/users/`, `/users`, `/users/7/`, `/users/7/x`, `//users/7`, `/USERS/7` | no: 404 (`/users/7/avatar` is the other route's), the default rule |
//! | `/users/7/avatar`, `/users//avatar` (an empty parameter between two `/`) | yes (`Rule::route("/users/{id}/avatar")`) |
//! | `/users/7/avatar/`, `/users/7` | no (the latter is `/users/{id}`'s) |
//! | `/files/a`, `/files/a/b/c.txt`, `/files/a/`, `/files//a` | yes (`Rule::route("/files/{*path}")`) |
//! | `/files/`, `/files`, `/filesx/a` | no: 404, the default rule |
//!
//! Every path not routed to `/login` above is charged to the default rule, never to nothing.
//! The same holds with the layer added by `Router::layer`, which axum applies to each route
//! and to the fallback: the path the rules read is the request's, unchanged.
//!
//! # Behind proxies
//!
//! Behind a balancer or a CDN the socket's peer is the proxy, so [`PeerIp`] would put every
//! client in one bucket. [`ClientIp`] reads the address the proxies append, and only from a
//! peer you trust: `ClientIp::x_forwarded_for().trust("10.0.0.0/8")?` (or
//! [`ClientIp::forwarded`] for RFC 7239, [`ClientIp::single_header`] for a CDN's
//! `CF-Connecting-IP`). Configure the one header your proxy writes (nginx's
//! `$proxy_add_x_forwarded_for` appends to `X-Forwarded-For`); the other is never read, so a
//! client cannot choose between them. The `behind_proxy` example runs it behind a real proxy
//! hop on loopback.
//!
//! What each trick is charged to, beside the leftmost rule (the first `X-Forwarded-For`
//! entry, then `X-Real-IP`, then `Forwarded`, then the peer: tower_governor's
//! `SmartIpKeyExtractor`, measured on the same requests). The balancer is 10.0.0.1, trusted
//! as `10.0.0.0/8`; the client is 203.0.113.7 and forges 198.51.100.1. Every row is a test
//! (`src/tower/client_ip_tests.rs`); those marked *socket* also run over loopback.
//!
//! | the request | [`ClientIp`] charges | the leftmost rule charges |
//! |---|---|---|
//! | through the balancer, the client wrote `X-Forwarded-For: 198.51.100.1`, the balancer appended: `198.51.100.1, 203.0.113.7` (*socket*) | 203.0.113.7 | 198.51.100.1, the forgery |
//! | straight to the server from 203.0.113.7, carrying `X-Forwarded-For: 198.51.100.1` (*socket*) | 203.0.113.7: an untrusted peer's headers are not read | 198.51.100.1 |
//! | a chain longer than the trusted hops: `trust_hops(1)` for a CDN edge, `198.51.100.1, 203.0.113.7, 192.0.2.10` | 203.0.113.7 | 198.51.100.1 |
//! | shorter than the hops: `192.0.2.10` alone | refused, [`UnreadableChain::OnlyTrusted`] | 192.0.2.10: everyone behind the edge in one bucket |
//! | two field lines, `X-Forwarded-For: 198.51.100.1` (the client's) then `X-Forwarded-For: 203.0.113.7` (the balancer's) | 203.0.113.7: every line, from the right | 198.51.100.1: the first line |
//! | `Forwarded: for="[2001:db8::1]:4711"` | 2001:db8:: (its /64) | 2001:db8::1: each address of the /64 a fresh bucket |
//! | `Forwarded: for=198.51.100.1, For=203.0.113.7;Proto=https` | 203.0.113.7 | 198.51.100.1 |
//! | `Forwarded: for=198.51.100.1, for=_hidden` (or `for=unknown`, or an element without `for`) | refused, [`UnreadableChain::Hidden`] | 198.51.100.1 |
//! | ports and whitespace (spaces, a tab): ` 198.51.100.1 , 203.0.113.7:5555 ` | 203.0.113.7 | 198.51.100.1 |
//! | a zone id: `fe80::1%eth0` | refused, [`UnreadableChain::Malformed`] | 10.0.0.1, the balancer: everyone in one bucket |
//! | IPv4-mapped IPv6: peer `::ffff:10.0.0.1`, `X-Forwarded-For: ::ffff:203.0.113.7` | 203.0.113.7: the peer is trusted, the client is the IPv4 bucket | `::ffff:203.0.113.7`: a second bucket for the same client |
//! | `Forwarded: for=203.0.113.7` from the balancer beside a forged `X-Forwarded-For: 198.51.100.1`, with [`ClientIp::forwarded`] | 203.0.113.7: the configured header alone is read (configured for `X-Forwarded-For`, it reads that one) | 198.51.100.1: `X-Forwarded-For` first |
//! | trusted entries alone: `10.0.0.2` | refused, [`UnreadableChain::OnlyTrusted`] | 10.0.0.2, a proxy |
//! | no header from the balancer | refused, [`UnreadableChain::Absent`] | 10.0.0.1, the balancer |
//! | `unknown` | refused, [`UnreadableChain::Hidden`] | 10.0.0.1, the balancer |
//! | a name: `203.0.113.7, lb.internal` | refused, [`UnreadableChain::Malformed`] | 203.0.113.7 |
//! | a long forged prefix: 96 forged entries on the client's line, then the balancer's line | 203.0.113.7: nothing left of it is read | 198.51.100.1 |
//! | more than [`ClientIp::MAX_ENTRIES`] trusted entries to walk before the client (or more `Forwarded` elements than that in all) | refused, [`UnreadableChain::TooLong`] | the first line's first entry |
//! | HTTP/2, two `x-forwarded-for` fields, the forgery first (*socket*) | 203.0.113.7 | 198.51.100.1 |
//!
//! A refusal is [`MissingKey::ForwardedChain`], answered 400 under the default
//! [`MissingKeyPolicy::Refuse`]. Whatever a client writes before the balancer's entry, the
//! charge is that entry or a refusal (a property test over arbitrary prefixes).
//!
//! [`Quotas`]: crate::fairness::Quotas
//! [`Limiter`]: crate::limiter::Limiter
//! [`RateLimit`]: crate::quota::RateLimit

#[cfg(test)]
mod adaptive_tests;
mod body;
mod client_ip;
#[cfg(test)]
mod client_ip_tests;
mod decide;
#[cfg(test)]
mod fields_tests;
mod key;
mod meter;
#[cfg(test)]
mod outcome_tests;
#[cfg(test)]
mod prefix_tests;
pub mod rate;
#[cfg(test)]
mod rate_tests;
mod response;
pub mod routes;
#[cfg(test)]
mod routes_tests;
#[cfg(test)]
mod servers_tests;
mod service;
pub mod source;
#[cfg(test)]
mod source_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod weight_tests;

pub use body::AdmitBody;
pub use client_ip::{ClientIp, UnreadableChain};
pub use key::{HeaderKey, KeyExtractor, KeyFn, MissingKey, PeerIp};
pub use meter::{BodyRefused, MeteredBody};
pub use rate::{RateConfigError, RateLayer, RateLayerBuilder, Rated, RatedFuture};
pub use response::AdmitRefused;
pub use routes::{RequestHead, Routes, Rule, RuleId, RuleRefused};
pub use service::{Admit, ResponseFuture};
pub use source::{IpSource, SameAsClaim, Source, SourceExtractor, SourceFrom, SourceWithPrefix};

use crate::clock::Clock;
use crate::clock::RecentClock;
use crate::fairness::Quotas;
use crate::gate::{Gate, InFlight};
use crate::prefix::IpPrefix;
use bytes::Bytes;
use decide::Shared;
use http::{Response, StatusCode};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tower_layer::Layer;

/// Writes the response to a refused request.
type OnRefusal = Arc<dyn Fn(&AdmitRefused) -> Response<Bytes> + Send + Sync>;

/// The server's choice of a request's priority class (see [`AdmitLayerBuilder::priority_by`]
/// and [`AdmitLayerBuilder::priority_from_header`]): the headers are read only through the
/// latter, and only from a trusted peer.
type PriorityOf = Arc<
    dyn Fn(
            &http::Method,
            &http::Uri,
            &http::HeaderMap,
            &http::Extensions,
        ) -> crate::fairness::Priority
        + Send
        + Sync,
>;

/// The class header `name` states: one field line of `critical`, `normal` or `sheddable`,
/// optional whitespace around it; `None` when absent, repeated or anything else.
fn header_priority(
    headers: &http::HeaderMap,
    name: &http::HeaderName,
) -> Option<crate::fairness::Priority> {
    let mut lines = headers.get_all(name).iter();
    let line = lines.next()?;
    if lines.next().is_some() {
        return None;
    }
    let value = std::str::from_utf8(line.as_bytes())
        .ok()?
        .trim_matches([' ', '\t']);
    crate::fairness::Priority::ALL
        .into_iter()
        .find(|class| class.as_str() == value)
}

/// What the layer does with a request whose key cannot be extracted.
///
/// ```
/// use admit::tower::MissingKeyPolicy;
///
/// assert_eq!(MissingKeyPolicy::default(), MissingKeyPolicy::Refuse);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MissingKeyPolicy {
    /// Refuse it ([`AdmitRefused::MissingKey`]): 400, or 500 when the server records no peer
    /// address. The default: passing would let a client skip every defence by sending no key.
    #[default]
    Refuse,
    /// Let it through to the service unchecked and uncounted (for a key that only some routes
    /// carry, with another layer guarding the rest).
    Pass,
}

/// Why an [`AdmitLayer`] (or one of its key extractors) could not be built. Each variant
/// names the setting to change.
///
/// ```
/// use admit::gate::Gate;
/// use admit::tower::{AdmitConfigError, AdmitLayer, PeerIp};
///
/// let unguarded = AdmitLayer::builder(PeerIp::new()).build();
/// assert_eq!(unguarded.unwrap_err(), AdmitConfigError::NoDefence);
/// let open: Gate = Gate::new(); // a gate with no defence admits everything
/// let unguarded = AdmitLayer::builder(PeerIp::new()).gate(open).build();
/// assert_eq!(unguarded.unwrap_err(), AdmitConfigError::NoDefence);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdmitConfigError {
    /// No gate was set, or the gate has no defence: the layer would only extract keys.
    NoDefence,
    /// The gate's limiter has no such class.
    UnknownClass {
        /// The class asked for.
        class: usize,
        /// How many classes the limiter has (valid classes are `0..classes`).
        classes: usize,
    },
    /// The gate's limiter reads a clock ahead of its volume quota's, which would refuse every
    /// reading the gate hands it (see [`Gate::check_clocks`]).
    ClocksApart {
        /// How far the limiter's clock is ahead.
        ahead_by: Duration,
    },
    /// An IPv6 prefix longer than an address.
    Ipv6PrefixTooLong {
        /// The prefix length asked for.
        bits: u8,
    },
    /// A trusted proxy given to [`ClientIp::trust`] is neither an IP address nor a CIDR.
    ProxyNotCidr,
    /// A trusted proxy range holds every address (`0.0.0.0/0`, `::/0`).
    TrustsEveryAddress,
    /// More trusted hops than [`ClientIp::MAX_ENTRIES`].
    TooManyHops {
        /// The count asked for.
        hops: usize,
    },
    /// The gate has limits charged by outcome ([`Limit::by_outcome`](crate::gate::Limit::by_outcome))
    /// but the layer was not told which outcomes count
    /// ([`AdmitLayerBuilder::charge_outcome_when`]), or the other way round: either way
    /// those limits would never be charged.
    OutcomeUnmatched {
        /// Whether the gate has limits charged by outcome.
        gate_has_limits: bool,
    },
    /// The gate charges the source's prefix
    /// ([`KeyKind::SourcePrefix`](crate::gate::KeyKind::SourcePrefix)) but the layer reads
    /// none ([`AdmitLayerBuilder::source_prefix`]), so the gate would refuse every request;
    /// or the layer reads one the gate never charges, a hash per request for nothing.
    SourcePrefixUnmatched {
        /// Whether the gate has a defence keyed by the source's prefix.
        gate_keys_prefix: bool,
    },
    /// A rule's header weight ([`Rule::weight_from_header`]) has bounds that start at 0, are
    /// empty, or do not hold the rule's own weight (what an untrusted or malformed request
    /// is charged).
    WeightBounds {
        /// The rule's own weight.
        weight: u32,
        /// The bounds' start.
        min: u32,
        /// The bounds' end.
        max: u32,
    },
}

impl fmt::Display for AdmitConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoDefence => f.write_str(
                "no defence set: give the layer a `gate` with an in-flight quota, a rate limit \
                 or a volume quota (`Gate::in_flight`, `Gate::rate`, `Gate::volume`)",
            ),
            Self::UnknownClass { class, classes } => write!(
                f,
                "the gate's rate class {class} does not exist: its limiter has {classes} \
                 classes (0..{classes})"
            ),
            Self::ClocksApart { ahead_by } => write!(
                f,
                "the gate's limiter reads a clock {ahead_by:?} ahead of its volume quota's, \
                 which would refuse every reading of it: build both over one clock (the default \
                 `RecentClock`, which every instance shares, or one `MonotonicClock` handed \
                 to `build_with_clock` and `RateLimit::with_clock`)"
            ),
            Self::Ipv6PrefixTooLong { bits } => write!(
                f,
                "`ipv6_prefix` is {bits} bits; an IPv6 address has 128 (the default is 64)"
            ),
            Self::ProxyNotCidr => f.write_str(
                "a trusted proxy must be an IP address or a CIDR (`192.0.2.7`, `10.0.0.0/8`, \
                 `2001:db8:1::/48`); host names are not resolved",
            ),
            Self::TrustsEveryAddress => f.write_str(
                "a trusted proxy range holds every address (`/0`): any client could then write \
                 its own identity; list the proxies' own ranges",
            ),
            Self::TooManyHops { hops } => write!(
                f,
                "{hops} trusted hops; a chain longer than {} entries is refused anyway",
                ClientIp::MAX_ENTRIES
            ),
            Self::OutcomeUnmatched {
                gate_has_limits: true,
            } => f.write_str(
                "the gate has limits charged by outcome but the layer was not told which \
                 outcomes count: they would never be charged; call `charge_outcome_when`",
            ),
            Self::OutcomeUnmatched {
                gate_has_limits: false,
            } => f.write_str(
                "`charge_outcome_when` is set but the gate has no limit charged by outcome \
                 (`Limit::by_outcome`): nothing would be charged",
            ),
            Self::SourcePrefixUnmatched {
                gate_keys_prefix: true,
            } => f.write_str(
                "the gate charges the source's prefix (`KeyKind::SourcePrefix`) but the layer \
                 reads none: every request would be refused; call `source(..)` with an address \
                 extractor, then `source_prefix(..)`",
            ),
            Self::SourcePrefixUnmatched {
                gate_keys_prefix: false,
            } => f.write_str(
                "`source_prefix` is set but the gate has no defence keyed by the source's \
                 prefix (`KeyKind::SourcePrefix`): the layer would hash it for nothing",
            ),
            Self::WeightBounds { weight, min, max } => write!(
                f,
                "the header weight's bounds {min}..={max} must start at 1 or more and hold the \
                 rule's own weight {weight} (what a request no trusted proxy weighed is \
                 charged): a claimed weight is held to them"
            ),
        }
    }
}

impl std::error::Error for AdmitConfigError {}

/// Puts a [`Gate`] in front of a service: [`AdmitLayer::builder`] with a key extractor, then
/// [`gate`](AdmitLayerBuilder::gate). Cloning it is cheap, and every clone and every service
/// it makes share the gate.
///
/// ```
/// use admit::gate::Gate;
/// use admit::tower::{AdmitLayer, HeaderKey};
/// use admit::{BucketConfig, Limiter};
/// use axum::{body::Body, routing::get, Router};
/// use http::{HeaderName, Request, StatusCode};
/// use tower_layer::Layer;
/// use tower_service::Service;
///
/// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
/// let limiter = Limiter::builder().build([BucketConfig::per_minute(60)?.with_burst(1)?])?;
/// let layer = AdmitLayer::builder(HeaderKey::new(HeaderName::from_static("x-api-key")))
///     .gate(Gate::new().rate(limiter, 0))
///     .build()?;
/// let mut app = layer.layer(Router::new().route("/", get(|| async { "hello" })));
/// let request = || Request::get("/").header("x-api-key", "k-1").body(Body::empty());
/// assert_eq!(app.call(request()?).await?.status(), StatusCode::OK);
/// let refused = app.call(request()?).await?;
/// assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
/// assert_eq!(refused.headers()["retry-after"], "1");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct AdmitLayer<X, C: Clock + 'static = RecentClock, Y = SameAsClaim, I: InFlight = Quotas> {
    shared: Arc<Shared<X, C, Y, I>>,
}

impl<X> AdmitLayer<X> {
    /// A builder keying requests with `key`.
    pub fn builder(key: X) -> AdmitLayerBuilder<X> {
        AdmitLayerBuilder {
            key,
            source: SameAsClaim,
            gate: None,
            missing_key: MissingKeyPolicy::default(),
            rate_limit_headers: false,
            on_refusal: None,
            outcome: None,
            routes: None,
            priority: None,
            fills_prefix: false,
        }
    }
}

impl<X, C: Clock + 'static, Y, I: InFlight> Clone for AdmitLayer<X, C, Y, I> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S, X, C: Clock + 'static, Y, I: InFlight> Layer<S> for AdmitLayer<X, C, Y, I> {
    type Service = Admit<S, X, C, Y, I>;

    fn layer(&self, inner: S) -> Admit<S, X, C, Y, I> {
        Admit::new(inner, Arc::clone(&self.shared))
    }
}

impl<X: fmt::Debug, C: Clock + 'static, Y: fmt::Debug, I: InFlight> fmt::Debug
    for AdmitLayer<X, C, Y, I>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.shared.fmt(f)
    }
}

impl<X: fmt::Debug, C: Clock + 'static, Y: fmt::Debug, I: InFlight> fmt::Debug
    for Shared<X, C, Y, I>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [in_flight, rate, volume] = decide::defences(&self.gate);
        f.debug_struct("AdmitLayer")
            .field("key", &self.key)
            .field("source", &self.source)
            .field("in_flight", &in_flight)
            .field("rate", &rate)
            .field("volume", &volume)
            .field("missing_key", &self.missing_key)
            .field("rate_limit_headers", &self.rate_limit_headers)
            .field("on_refusal", &self.on_refusal.is_some())
            .field("charge_outcome_when", &self.outcome.is_some())
            .field("routes", &self.routes)
            .field("priority_by", &self.priority.is_some())
            .finish()
    }
}

/// Builds an [`AdmitLayer`]: a key extractor, a [`Gate`] (required, with at least one
/// defence; setting it twice keeps the second, and two layers stack to charge two limiter
/// classes), and the options.
///
/// ```
/// use admit::fairness::Quotas;
/// use admit::gate::Gate;
/// use admit::quota::{Quota, RateLimit};
/// use admit::tower::{AdmitLayer, MissingKeyPolicy, PeerIp};
/// use admit::{BucketConfig, Limiter};
/// use std::time::Duration;
///
/// // The limiter and the volume quota read one time (the default `RecentClock`s share one):
/// // the gate reads it once for both.
/// let rate = BucketConfig::per_second(5)?.with_burst(10)?;
/// let gate = Gate::new()
///     .in_flight(Quotas::builder().quota(8).build()?)
///     .rate(Limiter::builder().build([rate])?, 0)
///     .volume(RateLimit::new(Quota::new(600, 4 << 20, Duration::from_secs(60))?));
/// let layer = AdmitLayer::builder(PeerIp::new().ipv6_prefix(56)?)
///     .gate(gate)
///     .missing_key(MissingKeyPolicy::Refuse)
///     .rate_limit_headers(true)
///     .build()?;
/// # let _ = layer;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use]
pub struct AdmitLayerBuilder<
    X,
    C: Clock + 'static = RecentClock,
    Y = SameAsClaim,
    I: InFlight = Quotas,
> {
    key: X,
    source: Y,
    gate: Option<decide::GateRef<C, I>>,
    missing_key: MissingKeyPolicy,
    rate_limit_headers: bool,
    on_refusal: Option<OnRefusal>,
    outcome: Option<decide::CountsOutcome>,
    routes: Option<Routes<C, I>>,
    /// Priority class of each request, by the server's own function of it (else normal).
    priority: Option<PriorityOf>,
    /// Whether the source extractor fills the source's prefix.
    fills_prefix: bool,
}

impl<X, C: Clock + 'static, Y, I: InFlight> AdmitLayerBuilder<X, C, Y, I> {
    /// Admits every request through `gate` (a `Gate` or an `Arc<Gate>` shared with other
    /// code), for any clock: [`Gate::try_acquire`] with the request's key and its
    /// `Content-Length` (0 without one, and then the body is metered as it arrives), so the
    /// gate's order and rollback hold. The returned
    /// [`Pass`](crate::gate::Pass) is held by the response body until it is fully sent.
    ///
    /// Each admitted request's body then holds an [`OwnedPass`](crate::gate::OwnedPass): a
    /// reference count every request writes. A gate that lives for the whole process avoids
    /// it: [`AdmitLayerBuilder::static_gate`].
    pub fn gate<G: Clock + 'static, J: InFlight>(
        self,
        gate: impl Into<Arc<Gate<G, J>>>,
    ) -> AdmitLayerBuilder<X, G, Y, J> {
        self.with_gate(decide::GateRef::Shared(gate.into()))
    }

    /// Admits every request through a gate that lives for the whole process (a `static`, or
    /// one leaked once at start-up): each body holds a [`Pass`](crate::gate::Pass) borrowing
    /// it, so an admission writes no reference count (two atomic operations fewer on a line
    /// every core shares than [`AdmitLayerBuilder::gate`]).
    ///
    /// ```
    /// use admit::fairness::Quotas;
    /// use admit::gate::Gate;
    /// use admit::tower::{AdmitLayer, PeerIp};
    /// use std::sync::OnceLock;
    ///
    /// static GATE: OnceLock<Gate> = OnceLock::new();
    /// let gate = GATE.get_or_init(|| Gate::new().in_flight(Quotas::new()));
    /// let layer = AdmitLayer::builder(PeerIp::new()).static_gate(gate).build()?;
    /// # let _ = layer;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn static_gate<G: Clock + 'static, J: InFlight>(
        self,
        gate: &'static Gate<G, J>,
    ) -> AdmitLayerBuilder<X, G, Y, J> {
        self.with_gate(decide::GateRef::Static(gate))
    }

    fn with_gate<G: Clock + 'static, J: InFlight>(
        self,
        gate: decide::GateRef<G, J>,
    ) -> AdmitLayerBuilder<X, G, Y, J> {
        AdmitLayerBuilder {
            key: self.key,
            source: self.source,
            gate: Some(gate),
            missing_key: self.missing_key,
            rate_limit_headers: self.rate_limit_headers,
            on_refusal: self.on_refusal,
            outcome: self.outcome,
            // The gate replaces the rules (their gates are of the old clock type).
            routes: None,
            priority: self.priority,
            fills_prefix: self.fills_prefix,
        }
    }

    /// Reads each request's source with its own extractor (see the [`source`](mod@self::source) module):
    /// the gate's limits keyed by [`KeyKind::Source`](crate::gate::KeyKind::Source) charge it,
    /// and its defences keyed by [`KeyKind::Claim`](crate::gate::KeyKind::Claim) (the
    /// in-flight and volume quotas, by default) charge the layer's key. Without it, the key
    /// is both. A request without a source is a missing key ([`MissingKeyPolicy`]), nothing
    /// charged.
    ///
    /// ```
    /// use admit::gate::{Gate, Limit};
    /// use admit::quota::{Quota, RateLimit};
    /// use admit::tower::{AdmitLayer, ClientIp, HeaderKey};
    /// use admit::{BucketConfig, Limiter};
    /// use http::HeaderName;
    /// use std::time::Duration;
    ///
    /// // Volume by the API key a client claims; the rate by its address, which it cannot
    /// // choose (behind one trusted balancer).
    /// let limiter = Limiter::builder().build([BucketConfig::per_second(10)?.with_burst(20)?])?;
    /// let gate = Gate::new()
    ///     .rates(limiter, [Limit::new("per-address", 0)])?
    ///     .volume(RateLimit::new(Quota::new(600, 4 << 20, Duration::from_secs(60))?));
    /// let layer = AdmitLayer::builder(HeaderKey::new(HeaderName::from_static("x-api-key")))
    ///     .source(ClientIp::x_forwarded_for().trust("10.0.0.0/8")?)
    ///     .gate(gate)
    ///     .build()?;
    /// # let _ = layer;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn source<Z>(self, extractor: Z) -> AdmitLayerBuilder<X, C, SourceFrom<Z>, I> {
        self.map_source(|_| SourceFrom::new(extractor), false)
    }

    /// The same builder with its source made by `source` from the one it had.
    fn map_source<Z>(
        self,
        source: impl FnOnce(Y) -> Z,
        fills_prefix: bool,
    ) -> AdmitLayerBuilder<X, C, Z, I> {
        AdmitLayerBuilder {
            key: self.key,
            source: source(self.source),
            gate: self.gate,
            missing_key: self.missing_key,
            rate_limit_headers: self.rate_limit_headers,
            on_refusal: self.on_refusal,
            outcome: self.outcome,
            routes: self.routes,
            priority: self.priority,
            fills_prefix,
        }
    }

    /// Admits each request through the gate of the first of `routes`' rules it matches, at
    /// that rule's weight, and every request no rule matches through their default gate
    /// (see [`routes`](mod@self::routes)): one layer, a limit per route. It replaces the gate
    /// (as a later [`gate`](Self::gate) replaces the rules). With
    /// [`charge_outcome_when`](Self::charge_outcome_when), the rules whose gates have limits
    /// charged by outcome are charged by it; the others charge nothing after the response.
    ///
    /// ```
    /// use admit::gate::{Gate, KeyKind, Limit};
    /// use admit::tower::{AdmitLayer, HeaderKey, Routes, Rule};
    /// use admit::{BucketConfig, Limiter};
    /// use axum::{body::Body, routing::{get, post}, Router};
    /// use http::{HeaderName, Method, Request, StatusCode};
    /// use tower_layer::Layer;
    /// use tower_service::Service;
    ///
    /// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
    /// let per_minute = |n| -> Result<Limiter, Box<dyn std::error::Error>> {
    ///     Ok(Limiter::builder().build([BucketConfig::per_minute(n)?])?)
    /// };
    /// let default = Gate::new().rates(per_minute(600)?, [Limit::new("requests", 0)])?;
    /// let login = Gate::new().rates(per_minute(1)?, [Limit::new("logins", 0)])?;
    /// let routes = Routes::new(default)?.rule(Rule::exact("/login").method(Method::POST), login)?;
    /// let layer = AdmitLayer::builder(HeaderKey::new(HeaderName::from_static("x-client")))
    ///     .routes(routes)
    ///     .build()?;
    /// let router = Router::new()
    ///     .route("/", get(|| async { "hello" }))
    ///     .route("/login", post(|| async { "welcome" }));
    /// // In front of the router: the rules see the path the router routes.
    /// let mut app = layer.layer(router);
    /// let request = |method, path| {
    ///     Request::builder().method(method).uri(path).header("x-client", "c-1").body(Body::empty())
    /// };
    /// assert_eq!(app.call(request(Method::POST, "/login")?).await?.status(), StatusCode::OK);
    /// let refused = app.call(request(Method::POST, "/login")?).await?;
    /// assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS, "one login a minute");
    /// // Every other route pays the default rule.
    /// assert_eq!(app.call(request(Method::GET, "/")?).await?.status(), StatusCode::OK);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn routes<G: Clock + 'static, J: InFlight>(
        self,
        routes: Routes<G, J>,
    ) -> AdmitLayerBuilder<X, G, Y, J> {
        let mut builder = self.with_gate(routes.default.gate.clone());
        builder.routes = Some(routes);
        builder
    }

    /// What to do with a request that has no key ([`MissingKeyPolicy::Refuse`] by default).
    pub fn missing_key(mut self, policy: MissingKeyPolicy) -> Self {
        self.missing_key = policy;
        self
    }

    /// Adds the IETF `RateLimit-Policy` and `RateLimit` fields to every response a defence of
    /// the gate decided, refusals included (off by default): an item per defence, the
    /// in-flight quota, each rate limit by its name and the volume quota, numbered from what
    /// the admission's own charges left (see "The IETF fields" in the [module docs](self)).
    pub fn rate_limit_headers(mut self, on: bool) -> Self {
        self.rate_limit_headers = on;
        self
    }

    /// Writes refusals with `respond` instead of [`AdmitRefused::to_response`]. The layer
    /// still adds the rate-limit fields (if on) and the refusal to the response's extensions.
    ///
    /// ```
    /// use admit::fairness::Quotas;
    /// use admit::gate::Gate;
    /// use admit::tower::{AdmitLayer, AdmitRefused, PeerIp};
    /// use http::StatusCode;
    ///
    /// let gate: Gate = Gate::new().in_flight(Quotas::new());
    /// let layer = AdmitLayer::builder(PeerIp::new())
    ///     .gate(gate)
    ///     .on_refusal(|refused: &AdmitRefused| {
    ///         let mut response = refused.to_response();
    ///         if refused.status() == StatusCode::TOO_MANY_REQUESTS {
    ///             *response.body_mut() = r#"{"error":"slow down"}"#.into();
    ///         }
    ///         response
    ///     })
    ///     .build()?;
    /// # let _ = layer;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn on_refusal<F>(mut self, respond: F) -> Self
    where
        F: Fn(&AdmitRefused) -> Response<Bytes> + Send + Sync + 'static,
    {
        self.on_refusal = Some(Arc::new(respond));
        self
    }

    /// Charges the gate's limits charged by outcome
    /// ([`Limit::by_outcome`](crate::gate::Limit::by_outcome)) after each admitted request
    /// whose response status `counts` (say a failed login: 401 or 403), when the response's
    /// head comes back; an admission only checked them. Successes cost nothing; a failure is
    /// never forgiven (see [`Gate::charge_outcome_at`]). A request whose response never comes
    /// (the handler failed, or the client left first) is not charged. Each admitted request
    /// then allocates once, for what the charge needs.
    ///
    /// ```
    /// use admit::gate::{Gate, KeyKind, Limit};
    /// use admit::tower::{AdmitLayer, HeaderKey};
    /// use admit::{BucketConfig, Limiter};
    /// use http::{HeaderName, StatusCode};
    ///
    /// // Five failed logins an hour per account; successful ones are free.
    /// let limiter = Limiter::builder().build([BucketConfig::per_hour(5)?])?;
    /// let gate = Gate::new().rates(
    ///     limiter,
    ///     [Limit::new("failed logins", 0).keyed_by(KeyKind::Claim).by_outcome()],
    /// )?;
    /// let layer = AdmitLayer::builder(HeaderKey::new(HeaderName::from_static("x-account")))
    ///     .gate(gate)
    ///     .charge_outcome_when(|status| status == StatusCode::UNAUTHORIZED)
    ///     .build()?;
    /// # let _ = layer;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn charge_outcome_when<F>(mut self, counts: F) -> Self
    where
        F: Fn(StatusCode) -> bool + Send + Sync + 'static,
    {
        self.outcome = Some(Arc::new(counts));
        self
    }

    /// Gives each request the priority class `of` its method, URI and extensions returns
    /// ([`Admission::priority`](crate::gate::Admission::priority)); without this call every
    /// request is [`Priority::Normal`](crate::fairness::Priority::Normal). Only a gate of
    /// [`AdaptiveQuotas`](crate::fairness::AdaptiveQuotas) reads it: the sheddable are
    /// refused first and the critical last.
    ///
    /// The server decides, never the client: `of` sees no header, because a priority read
    /// from one is whatever the client sent, and every client would send "critical". Choose by
    /// route, or by what your own code put in the extensions: the caller's role once
    /// authenticated, or a trusted proxy's field that a middleware of yours checked and
    /// recorded there.
    ///
    /// ```
    /// use admit::fairness::{AdaptiveTotal, Priority, Quotas};
    /// use admit::gate::Gate;
    /// use admit::tower::{AdmitLayer, PeerIp};
    /// use std::time::Duration;
    ///
    /// let quotas = Quotas::builder().build_adaptive(AdaptiveTotal::new(Duration::from_millis(20)))?;
    /// let gate = Gate::<admit::RecentClock>::new().in_flight(quotas);
    /// let layer = AdmitLayer::builder(PeerIp::new())
    ///     .gate(gate)
    ///     .priority_by(|_method, uri, _extensions| match uri.path() {
    ///         path if path.starts_with("/console/") => Priority::Critical,
    ///         "/export" | "/reindex" => Priority::Sheddable,
    ///         _ => Priority::Normal,
    ///     })
    ///     .build()?;
    /// # let _ = layer;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn priority_by<F>(mut self, of: F) -> Self
    where
        F: Fn(&http::Method, &http::Uri, &http::Extensions) -> crate::fairness::Priority
            + Send
            + Sync
            + 'static,
    {
        self.priority = Some(Arc::new(move |method, uri, _headers, extensions| {
            of(method, uri, extensions)
        }));
        self
    }

    /// Takes each request's priority class from header `name` when, and only when, the
    /// socket's peer is one of `proxies`' trusted proxies (the same trust [`ClientIp`] walks
    /// a forwarded chain with, [`ClientIp::is_trusted_peer`]): the proxy states the class, as
    /// it states the client's address. The field is one line holding `critical`, `normal` or
    /// `sheddable` (optional whitespace around it). From any other peer, or absent, repeated or
    /// anything else, the header is ignored and the class is what
    /// [`AdmitLayerBuilder::priority_by`] (set before this call) answers, else
    /// [`Priority::Normal`](crate::fairness::Priority::Normal). A client that reaches the
    /// server directly can never raise its own class.
    ///
    /// ```
    /// use admit::fairness::{AdaptiveTotal, Priority, Quotas};
    /// use admit::gate::Gate;
    /// use admit::tower::{AdmitLayer, ClientIp, PeerIp};
    /// use http::HeaderName;
    /// use std::time::Duration;
    ///
    /// let quotas = Quotas::builder().build_adaptive(AdaptiveTotal::new(Duration::from_millis(20)))?;
    /// let gate = Gate::<admit::RecentClock>::new().in_flight(quotas);
    /// let proxies = ClientIp::x_forwarded_for().trust("10.0.0.0/8")?;
    /// let layer = AdmitLayer::builder(PeerIp::new())
    ///     .gate(gate)
    ///     .priority_by(|_method, uri, _extensions| match uri.path() {
    ///         "/export" => Priority::Sheddable,
    ///         _ => Priority::Normal,
    ///     })
    ///     .priority_from_header(HeaderName::from_static("x-priority"), proxies)
    ///     .build()?;
    /// # let _ = layer;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn priority_from_header(mut self, name: http::HeaderName, proxies: ClientIp) -> Self {
        let by_server = self.priority.take();
        self.priority = Some(Arc::new(move |method, uri, headers, extensions| {
            let stated = proxies
                .is_trusted_peer_in(extensions)
                .then(|| header_priority(headers, &name))
                .flatten();
            match (stated, &by_server) {
                (Some(stated), _) => stated,
                (None, Some(of)) => of(method, uri, headers, extensions),
                (None, None) => crate::fairness::Priority::Normal,
            }
        }));
        self
    }

    /// Validates and builds: refuses no gate or a gate with no defence
    /// ([`AdmitConfigError::NoDefence`]), a limiter class the gate's limiter does not have
    /// ([`AdmitConfigError::UnknownClass`]), a limiter whose clock is ahead of the volume
    /// quota's ([`AdmitConfigError::ClocksApart`]), limits charged by outcome without the
    /// outcomes that count, or the other way round ([`AdmitConfigError::OutcomeUnmatched`]),
    /// and a gate keyed by the source's prefix without a layer that reads it, or the other way
    /// round ([`AdmitConfigError::SourcePrefixUnmatched`]).
    pub fn build(self) -> Result<AdmitLayer<X, C, Y, I>, AdmitConfigError> {
        let gate = self.gate.ok_or(AdmitConfigError::NoDefence)?;
        decide::check(&gate)?;
        let gate_has_limits = match &self.routes {
            None => gate.charges_by_outcome(),
            // Every rule's gate was checked when it was added.
            Some(routes) => routes.gates().any(|routed| routed.by_outcome),
        };
        if gate_has_limits != self.outcome.is_some() {
            return Err(AdmitConfigError::OutcomeUnmatched { gate_has_limits });
        }
        let gate_keys_prefix = match &self.routes {
            None => decide::keys_prefix(&gate),
            Some(routes) => routes
                .gates()
                .any(|routed| decide::keys_prefix(&routed.gate)),
        };
        if gate_keys_prefix != self.fills_prefix {
            return Err(AdmitConfigError::SourcePrefixUnmatched { gate_keys_prefix });
        }
        Ok(AdmitLayer {
            shared: Arc::new(Shared {
                key: self.key,
                source: self.source,
                gate,
                missing_key: self.missing_key,
                rate_limit_headers: self.rate_limit_headers,
                on_refusal: self.on_refusal,
                outcome: self.outcome,
                routes: self.routes,
                priority: self.priority,
            }),
        })
    }
}

impl<X, C: Clock + 'static, Z: IpSource, I: InFlight> AdmitLayerBuilder<X, C, SourceFrom<Z>, I> {
    /// Hands the gate the source's network prefix beside the source (see "The source's
    /// prefix" in [`source`](mod@self::source)): the source, an address
    /// ([`ClientIp`], [`PeerIp`]), widened by `prefix` ([`IpPrefix::default`]: a /24 and a
    /// /48), for the gate's limits keyed by
    /// [`KeyKind::SourcePrefix`](crate::gate::KeyKind::SourcePrefix). Give that limit first in
    /// the gate's plan: a client rotating addresses inside its prefix is then refused at the
    /// prefix's budget before it claims an entry per address. One more hash per request; a
    /// layer without it hashes none. [`build`](Self::build) refuses a gate that charges the
    /// prefix without this, and this without such a gate.
    ///
    /// ```
    /// use admit::gate::{Gate, KeyKind, Limit};
    /// use admit::tower::{AdmitLayer, ClientIp, HeaderKey};
    /// use admit::{BucketConfig, IpPrefix, Limiter};
    /// use http::HeaderName;
    ///
    /// // 100/s in bursts of 200 per /24 (or /48), then 10/s in bursts of 20 per address.
    /// let per_prefix = Limiter::builder().build([BucketConfig::per_second(100)?.with_burst(200)?])?;
    /// let per_address = Limiter::builder().build([BucketConfig::per_second(10)?.with_burst(20)?])?;
    /// let gate = Gate::new()
    ///     .rates(per_prefix, [Limit::new("per prefix", 0).keyed_by(KeyKind::SourcePrefix)])?
    ///     .rates(per_address, [Limit::new("per address", 0)])?;
    /// let layer = AdmitLayer::builder(HeaderKey::new(HeaderName::from_static("x-api-key")))
    ///     .source(ClientIp::x_forwarded_for().trust("10.0.0.0/8")?)
    ///     .source_prefix(IpPrefix::default())
    ///     .gate(gate)
    ///     .build()?;
    /// # let _ = layer;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn source_prefix(
        self,
        prefix: IpPrefix,
    ) -> AdmitLayerBuilder<X, C, SourceWithPrefix<Z>, I> {
        self.map_source(|source| source.with_prefix(prefix), true)
    }
}

impl<X: fmt::Debug, C: Clock + 'static, Y: fmt::Debug, I: InFlight> fmt::Debug
    for AdmitLayerBuilder<X, C, Y, I>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdmitLayerBuilder")
            .field("key", &self.key)
            .field("source", &self.source)
            .field("gate", &self.gate.is_some())
            .field("missing_key", &self.missing_key)
            .field("rate_limit_headers", &self.rate_limit_headers)
            .field("on_refusal", &self.on_refusal.is_some())
            .field("charge_outcome_when", &self.outcome.is_some())
            .field("routes", &self.routes)
            .field("priority_by", &self.priority.is_some())
            .field("source_prefix", &self.fills_prefix)
            .finish()
    }
}
