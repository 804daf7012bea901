//! Per-route rules: one layer, a gate and a weight for each kind of request, and a default
//! rule for every request no rule places.
//!
//! [`Routes`] is a list of [`Rule`]s, tried in the order added, and a default gate. The first
//! rule that matches a request decides which [`Gate`] admits it and the weight its
//! [`Admission`](crate::gate::Admission) carries (what a [`Cost::Weight`] limit charges; a
//! [`Cost::Tokens`] limit charges its fixed tokens whatever the weight). A request no rule
//! matches is admitted by the default gate: **no route is silently unlimited**, since a
//! [`Routes`] cannot be made without its default ([`Routes::new`]).
//!
//! | rule | matches |
//! |---|---|
//! | [`Rule::exact`]`("/login")` | the path `/login`, byte for byte, as a router's literal route does |
//! | [`Rule::route`]`("/users/{id}")` | the paths axum's router matches to that route: `{id}` one segment (never empty at the end of the path), `{*rest}` a non-empty remainder, the rest byte for byte |
//! | [`Rule::prefix`]`("/api")` | `/api` and every path under `/api/` (whatever a `nest("/api", …)` could route, and its 404s) |
//! | [`Rule::when`]`(closure)` | whatever the closure says of the request's head ([`RequestHead`]) |
//! | `.method(Method::POST)` on any of them | only that method; a `GET` rule also matches `HEAD`, which axum routes to the `GET` handler |
//!
//! Each rule holds a gate of its own: a gate is a plan over its primitives, and the gate's
//! public API takes its limiters and volume quota by value, so two gates share an in-flight
//! quota (a [`Quotas`] clone shares its table) but not a limiter. A
//! rule's limits are therefore its own; a limit every route should pay (a per-address budget)
//! goes in every rule's gate as a limiter of its own, or in a second layer.
//!
//! The layer runs before the router, so a rule matches a path exactly when axum's router
//! routes it to the rule's handler: the variants of a path, what axum does with each and
//! what the rules do, are in "Per-route rules" in [the layer's docs](super).
//!
//! # A cost from the request is a claim
//!
//! A rule's weight is the server's word. A rule may instead read each request's weight from
//! a header ([`Rule::weight_from_header`]: the tokens an LLM proxy counted, the rows a
//! gateway expects a report to read), and that header is a claim like any other the client
//! can write. So:
//!
//! * **It counts only from a trusted proxy**: the socket's peer must be one the given
//!   [`ClientIp`] trusts ([`ClientIp::is_trusted_peer`], the same CIDRs and the same peer
//!   reading the extractor walks the chain by). From any other peer the header is not read,
//!   and the rule's own weight applies.
//! * **Absent or malformed, the rule's own weight applies**: a value that is not one field
//!   line of decimal digits (a sign, a fraction, a comma list, two lines, non-ASCII) is never
//!   guessed at, and never read as something larger than the rule states.
//! * **Every rule has a minimum, and a header weight a maximum**: the weight an admission
//!   carries is within the rule's bounds, whatever the header says: `0` or `1` is raised to
//!   the minimum (at least 1), a huge value (digits past `u32`, past `u64` even) is capped at
//!   the maximum, never wrapped. Each [`Cost::Weight`] limit of the rule's gate then floors it
//!   again at its own `min`.
//!
//! A priority read from a header is a claim in the same way: when a gate charges by
//! priority, a header priority must count only from a trusted proxy, and default to the
//! rule's own otherwise (not available yet: the gate has no priority slot).
//!
//! # Invariants
//!
//! * **A request admitted through a rule with a header weight carries a weight within the
//!   rule's bounds** (`1 <= min <= weight <= max`), and the rule's own weight unless its peer
//!   is trusted and the header is one well-formed value. Checked by a property test over
//!   arbitrary header bytes and peers (`weight_tests::header_weight_within_bounds`), and over a real
//!   server and client on loopback.
//! * **A rule without a header weight carries exactly its weight**, as before.

use super::client_ip::trim_ows_bytes;
use super::decide::GateRef;
use super::{AdmitConfigError, ClientIp};
use crate::clock::{Clock, RecentClock};
use crate::fairness::Quotas;
#[cfg(doc)]
use crate::gate::Cost;
use crate::gate::{Gate, InFlight};
use crate::sync::atomic::{AtomicU32, Ordering};
use http::{Extensions, HeaderMap, HeaderName, Method, Request, Uri};
use std::fmt;
use std::ops::RangeInclusive;
use std::sync::{Arc, OnceLock};

/// Says whether a request is a rule's (see [`Rule::when`]).
type Matches = Arc<dyn Fn(&RequestHead<'_>) -> bool + Send + Sync>;

/// The head of a request, as a [`Rule::when`] closure sees it (the body is not read).
#[derive(Debug, Clone, Copy)]
pub struct RequestHead<'r> {
    method: &'r Method,
    uri: &'r Uri,
    headers: &'r HeaderMap,
    extensions: &'r Extensions,
}

impl<'r> RequestHead<'r> {
    /// The head of `request`.
    pub fn of<B>(request: &'r Request<B>) -> Self {
        Self {
            method: request.method(),
            uri: request.uri(),
            headers: request.headers(),
            extensions: request.extensions(),
        }
    }

    /// The request's method.
    pub fn method(&self) -> &'r Method {
        self.method
    }

    /// The request's URI.
    pub fn uri(&self) -> &'r Uri {
        self.uri
    }

    /// The request's path, undecoded, as the router reads it.
    pub fn path(&self) -> &'r str {
        self.uri.path()
    }

    /// The request's headers.
    pub fn headers(&self) -> &'r HeaderMap {
        self.headers
    }

    /// The request's extensions (a server's `ConnectInfo`).
    pub fn extensions(&self) -> &'r Extensions {
        self.extensions
    }
}

/// Which requests a rule is for, and the weight it gives them. See the [module
/// documentation](self).
///
/// ```
/// use admit::tower::{RequestHead, Rule};
/// use http::{Method, Request};
///
/// let login = Rule::exact("/login").method(Method::POST);
/// let head = |method: Method, path: &str| Request::builder().method(method).uri(path).body(());
/// assert!(login.matches(&RequestHead::of(&head(Method::POST, "/login?next=/")?)));
/// assert!(!login.matches(&RequestHead::of(&head(Method::POST, "/login/")?)));
/// assert!(!login.matches(&RequestHead::of(&head(Method::GET, "/login")?)));
///
/// let reports = Rule::prefix("/reports").weight(50);
/// assert!(reports.matches(&RequestHead::of(&head(Method::GET, "/reports/2026/q3")?)));
/// assert!(!reports.matches(&RequestHead::of(&head(Method::GET, "/reportsx")?)));
/// assert_eq!(reports.weight_of(), 50);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Rule {
    method: Option<Method>,
    path: PathMatch,
    weight: u32,
    header: Option<HeaderWeight>,
}

/// Where a rule reads a request's weight, whom it believes, and the bounds it holds it to.
#[derive(Clone)]
pub(super) struct HeaderWeight {
    name: HeaderName,
    trust: ClientIp,
    min: u32,
    max: u32,
}

#[derive(Clone)]
enum PathMatch {
    Exact(Box<str>),
    Route(Box<[Piece]>),
    /// Without its trailing `/`: matches itself and what lies under `prefix/`.
    Prefix(Box<str>),
    When(Matches),
}

impl Rule {
    /// Requests whose path is exactly `path` (undecoded, byte for byte, the query aside), any
    /// method, weight 1.
    pub fn exact(path: impl Into<Box<str>>) -> Self {
        Self::with(PathMatch::Exact(path.into()))
    }

    /// Requests whose path matches `route`, written as an axum route (matchit's syntax), as
    /// axum's router matches it: `{id}` matches the bytes up to the next `/` (at least one at
    /// the end of the path; between two `/`, even none: matchit routes `/users//avatar` to
    /// `/users/{id}/avatar`), `{*rest}` (at the end) everything left, at least one byte; `{{`
    /// and `}}` are literal braces; every other byte matches itself. A
    /// pattern axum would refuse to register is matched as far as it reads (it can route
    /// nothing there anyway).
    ///
    /// axum prefers a static route to a dynamic one (`/users/me` before `/users/{id}`); rules
    /// are tried in order, so put the static route's rule first to charge it apart.
    ///
    /// ```
    /// use admit::tower::{RequestHead, Rule};
    /// use http::Request;
    ///
    /// let user = Rule::route("/users/{id}/avatar");
    /// let matches = |path: &str| Ok::<_, http::Error>(user.matches(&RequestHead::of(&Request::get(path).body(())?)));
    /// assert!(matches("/users/7/avatar")?);
    /// assert!(matches("/users//avatar")?, "as axum routes it: an empty segment");
    /// assert!(!matches("/users/7/8/avatar")?, "never more than one segment");
    /// assert!(!Rule::route("/users/{id}").matches(&RequestHead::of(&Request::get("/users/").body(())?)));
    /// let files = Rule::route("/files/{*path}");
    /// assert!(files.matches(&RequestHead::of(&Request::get("/files/a/b.txt").body(())?)));
    /// assert!(!files.matches(&RequestHead::of(&Request::get("/files/").body(())?)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn route(route: &str) -> Self {
        Self::with(PathMatch::Route(pieces(route).into()))
    }

    /// Requests whose path is `prefix` or lies under it (`/api` matches `/api`, `/api/` and
    /// `/api/v1/items`, not `/apix`; a trailing `/` on `prefix` changes nothing), any method,
    /// weight 1.
    pub fn prefix(prefix: &str) -> Self {
        let prefix = prefix.strip_suffix('/').unwrap_or(prefix);
        Self::with(PathMatch::Prefix(prefix.into()))
    }

    /// Requests for which `matches` says so, any method, weight 1.
    ///
    /// ```
    /// use admit::tower::{RequestHead, Rule};
    /// use http::Request;
    ///
    /// let batch = Rule::when(|head: &RequestHead<'_>| head.headers().contains_key("x-batch"));
    /// let request = Request::post("/jobs").header("x-batch", "1").body(())?;
    /// assert!(batch.matches(&RequestHead::of(&request)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn when<F>(matches: F) -> Self
    where
        F: Fn(&RequestHead<'_>) -> bool + Send + Sync + 'static,
    {
        Self::with(PathMatch::When(Arc::new(matches)))
    }

    fn with(path: PathMatch) -> Self {
        Self {
            method: None,
            path,
            weight: 1,
            header: None,
        }
    }

    /// Only requests of `method` (a `GET` rule also matches `HEAD`: axum routes `HEAD` to the
    /// `GET` handler of a route with no `HEAD` handler of its own; put a `HEAD` rule first to
    /// charge it apart).
    pub fn method(mut self, method: Method) -> Self {
        self.method = Some(method);
        self
    }

    /// The weight the rule's admissions carry: what its gate's [`Cost::Weight`] limits charge
    /// (at least their `min`, whatever the weight), 1 by default. A fixed
    /// [`Cost::Tokens`] ignores it.
    pub fn weight(mut self, weight: u32) -> Self {
        self.weight = weight;
        self
    }

    /// Reads each request's weight from the header `name`, believed only from a peer `trust`
    /// trusts ([`ClientIp::is_trusted_peer`]: hand it the extractor the layer reads the
    /// client's address with), and held to `bounds`: a weight read is raised to its start and
    /// capped at its end. From an untrusted peer, or when the header is absent or not one
    /// line of decimal digits, the rule's own weight ([`Rule::weight`]) applies. See "A cost
    /// from the request is a claim" in the [module documentation](self).
    ///
    /// [`Routes::rule`] refuses bounds that start at 0 or are empty, and a rule whose own
    /// weight lies outside them ([`AdmitConfigError::WeightBounds`]): every admission
    /// through the rule then carries at least the bounds' start.
    ///
    /// ```
    /// use admit::tower::{ClientIp, RequestHead, Rule};
    /// use http::{HeaderName, Request};
    /// use std::net::SocketAddr;
    ///
    /// let proxies = ClientIp::x_forwarded_for().trust("10.0.0.0/8")?;
    /// let completions = Rule::exact("/v1/completions")
    ///     .weight(100) // what a request costs when no trusted proxy said
    ///     .weight_from_header(HeaderName::from_static("x-token-estimate"), &proxies, 10..=4_000);
    /// let from = |peer: [u8; 4], estimate: &str| -> Result<u32, http::Error> {
    ///     let mut request = Request::post("/v1/completions").header("x-token-estimate", estimate).body(())?;
    ///     request.extensions_mut().insert(SocketAddr::from((peer, 40_000)));
    ///     Ok(completions.weight_for(&request))
    /// };
    /// assert_eq!(from([10, 0, 0, 1], "250")?, 250, "the proxy's count");
    /// assert_eq!(from([10, 0, 0, 1], "0")?, 10, "never below the minimum");
    /// assert_eq!(from([10, 0, 0, 1], "99999999999999999999")?, 4_000, "capped, not wrapped");
    /// assert_eq!(from([10, 0, 0, 1], "-5")?, 100, "malformed: the rule's weight");
    /// assert_eq!(from([192, 0, 2, 9], "1")?, 100, "a client's own claim is not read");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn weight_from_header(
        mut self,
        name: HeaderName,
        trust: &ClientIp,
        bounds: RangeInclusive<u32>,
    ) -> Self {
        self.header = Some(HeaderWeight {
            name,
            trust: trust.clone(),
            min: *bounds.start(),
            max: *bounds.end(),
        });
        self
    }

    /// The weight the rule's admissions carry (without a header weight, every one's).
    pub fn weight_of(&self) -> u32 {
        self.weight
    }

    /// The weight an admission of `request` carries through this rule: its own weight, or
    /// the header's from a trusted proxy, held to the rule's bounds
    /// ([`Rule::weight_from_header`]). Whether the rule matches `request` is not asked.
    pub fn weight_for<B>(&self, request: &Request<B>) -> u32 {
        let Some(header) = &self.header else {
            return self.weight;
        };
        header.weight_for(request, self.weight, header.min, header.max)
    }

    /// Whether `head` is this rule's.
    pub fn matches(&self, head: &RequestHead<'_>) -> bool {
        if let Some(method) = &self.method {
            let head_as_get = *method == Method::GET && head.method() == Method::HEAD;
            if method != head.method() && !head_as_get {
                return false;
            }
        }
        let path = head.path();
        match &self.path {
            PathMatch::Exact(exact) => path == &**exact,
            PathMatch::Route(pieces) => route_matches(pieces, path),
            PathMatch::Prefix(prefix) => path
                .strip_prefix(&**prefix)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/')),
            PathMatch::When(matches) => matches(head),
        }
    }
}

impl fmt::Debug for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("Rule");
        s.field("method", &self.method);
        match &self.path {
            PathMatch::Exact(path) => s.field("exact", path),
            PathMatch::Route(pieces) => s.field("route", pieces),
            PathMatch::Prefix(prefix) => s.field("prefix", prefix),
            PathMatch::When(_) => s.field("when", &"closure"),
        };
        s.field("weight", &self.weight);
        if let Some(header) = &self.header {
            s.field("weight_header", &header.name)
                .field("weight_bounds", &(header.min..=header.max));
        }
        s.finish()
    }
}

impl HeaderWeight {
    /// The weight of `request`: the header's, from a trusted peer and well-formed, else
    /// `fixed`; either held to `min..=max`. Never below 1 when `min` is at least 1, and
    /// never above `max`, whatever the header holds.
    fn weight_for<B>(&self, request: &Request<B>, fixed: u32, min: u32, max: u32) -> u32 {
        let claimed = if self.trust.is_trusted_peer(request) {
            header_weight(request.headers(), &self.name)
        } else {
            None
        };
        // `max` before `min`: bounds a reload is changing one by one may be crossed for a
        // moment, and then the weight is the new or old `max`, still at least 1.
        claimed.unwrap_or(fixed).min(max).max(min.min(max))
    }
}

/// The weight the header `name` states: one field line of decimal digits (optional
/// whitespace around them), saturating at `u32::MAX` however many digits; `None` when
/// absent, repeated, or anything else.
pub(super) fn header_weight(headers: &HeaderMap, name: &HeaderName) -> Option<u32> {
    let mut lines = headers.get_all(name).iter();
    let line = lines.next()?;
    if lines.next().is_some() {
        return None;
    }
    let digits = trim_ows_bytes(line.as_bytes());
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(digits.iter().fold(0_u32, |n, &digit| {
        n.saturating_mul(10)
            .saturating_add(u32::from(digit.wrapping_sub(b'0')))
    }))
}

/// A piece of an axum route.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    /// These bytes.
    Literal(String),
    /// The bytes up to the next `/` or the end: at least one at the end of the path, none
    /// before a `/`.
    Param,
    /// One or more bytes to the end.
    CatchAll,
}

/// `route` in pieces: `{name}` a parameter, `{*name}` a catch-all, `{{` and `}}` literal
/// braces. An unclosed `{` is taken literally.
fn pieces(route: &str) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let mut literal = String::new();
    let mut rest = route;
    loop {
        if let Some(after) = rest.strip_prefix("{{") {
            literal.push('{');
            rest = after;
        } else if let Some(after) = rest.strip_prefix("}}") {
            literal.push('}');
            rest = after;
        } else if let Some((name, after)) =
            rest.strip_prefix('{').and_then(|open| open.split_once('}'))
        {
            if !literal.is_empty() {
                pieces.push(Piece::Literal(std::mem::take(&mut literal)));
            }
            let catch_all = name.starts_with('*');
            pieces.push(if catch_all {
                Piece::CatchAll
            } else {
                Piece::Param
            });
            rest = after;
        } else {
            let mut chars = rest.chars();
            match chars.next() {
                Some(c) => literal.push(c),
                None => break,
            }
            rest = chars.as_str();
        }
    }
    if !literal.is_empty() {
        pieces.push(Piece::Literal(literal));
    }
    pieces
}

/// Whether `path` matches the route `pieces` (see [`Rule::route`]).
fn route_matches(pieces: &[Piece], path: &str) -> bool {
    let mut rest = path;
    for piece in pieces {
        match piece {
            Piece::Literal(literal) => match rest.strip_prefix(literal.as_str()) {
                Some(after) => rest = after,
                None => return false,
            },
            // As matchit does: a parameter needs a byte left to begin, then takes up to the
            // next `/`, which may be none (`/a//b` matches `/a/{x}/{y}`, `/a/` does not
            // match `/a/{x}`).
            Piece::Param => {
                if rest.is_empty() {
                    return false;
                }
                let end = rest.find('/').unwrap_or(rest.len());
                rest = rest.get(end..).unwrap_or_default();
            }
            Piece::CatchAll => return !rest.is_empty(),
        }
    }
    rest.is_empty()
}

/// Which rule of a [`Routes`] a [`RuleRefused`] names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleId {
    /// The default rule ([`Routes::new`]).
    Default,
    /// The rule added `n`th by [`Routes::rule`], from 0.
    Rule(usize),
}

impl fmt::Display for RuleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Default => f.write_str("the default rule"),
            Self::Rule(n) => write!(f, "rule {n}"),
        }
    }
}

/// Why a rule of a [`Routes`] was refused: which rule, and what of it.
///
/// ```
/// use admit::gate::Gate;
/// use admit::tower::{AdmitConfigError, RuleId, Routes};
///
/// let open: Gate = Gate::new(); // no defence: the default would admit everything
/// let refused = Routes::new(open).unwrap_err();
/// assert_eq!(refused.rule, RuleId::Default);
/// assert_eq!(refused.why, AdmitConfigError::NoDefence);
/// assert!(refused.to_string().starts_with("the default rule: "));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleRefused {
    /// The rule refused.
    pub rule: RuleId,
    /// What is wrong with its gate.
    pub why: AdmitConfigError,
}

impl fmt::Display for RuleRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.rule, self.why)
    }
}

impl std::error::Error for RuleRefused {}

/// A rule and the gate it admits with.
pub(crate) struct Routed<C: Clock + 'static, I: InFlight = Quotas> {
    pub(super) gate: GateRef<C, I>,
    /// The rule's weight and bounds, shared with the [`LiveLimits`](crate::live::LiveLimits)
    /// that built the rule, if one did: a reload changes them in place.
    weight: Arc<RuleWeight>,
    header: Option<HeaderWeight>,
    /// Whether the gate has limits charged by outcome (read once, at build).
    pub(super) by_outcome: bool,
}

impl<C: Clock + 'static, I: InFlight> Clone for Routed<C, I> {
    fn clone(&self) -> Self {
        Self {
            gate: self.gate.clone(),
            weight: Arc::clone(&self.weight),
            header: self.header.clone(),
            by_outcome: self.by_outcome,
        }
    }
}

/// A rule's weight, and the bounds of its header weight, each a word a reload may change
/// while admissions read it.
pub(crate) struct RuleWeight {
    weight: AtomicU32,
    min: AtomicU32,
    max: AtomicU32,
}

impl<C: Clock + 'static, I: InFlight> Routed<C, I> {
    /// [`Routed::new`] for a gate held by a reference count.
    #[cfg(feature = "config")]
    pub(crate) fn shared(
        gate: Arc<Gate<C, I>>,
        rule: &Rule,
        id: RuleId,
    ) -> Result<Self, RuleRefused> {
        Self::new(GateRef::Shared(gate), rule, id)
    }

    /// `rule`'s weight and header admitting through `gate`; refused as the layer refuses a
    /// gate, or for header bounds that do not hold the rule's weight.
    pub(super) fn new(gate: GateRef<C, I>, rule: &Rule, id: RuleId) -> Result<Self, RuleRefused> {
        let refused = |why| RuleRefused { rule: id, why };
        super::decide::check(&gate).map_err(refused)?;
        let (min, max) = match &rule.header {
            Some(header) => {
                let (weight, min, max) = (rule.weight, header.min, header.max);
                if min == 0 || min > max || !(min..=max).contains(&weight) {
                    return Err(refused(AdmitConfigError::WeightBounds { weight, min, max }));
                }
                (min, max)
            }
            None => (rule.weight, rule.weight),
        };
        let by_outcome = gate.charges_by_outcome();
        Ok(Self {
            gate,
            weight: Arc::new(RuleWeight {
                weight: AtomicU32::new(rule.weight),
                min: AtomicU32::new(min),
                max: AtomicU32::new(max),
            }),
            header: rule.header.clone(),
            by_outcome,
        })
    }

    /// The weight an admission of `request` carries (see [`Rule::weight_for`]).
    #[inline]
    pub(super) fn weight_for<B>(&self, request: &Request<B>) -> u32 {
        // Relaxed, each: a weight and its bounds are words read alone; an admission needs
        // values some reload set, not ones ordered with any other change (a reload's changes
        // land one by one, and `HeaderWeight::weight_for` holds even crossed bounds to at
        // least 1).
        let weight = self.weight.weight.load(Ordering::Relaxed);
        match &self.header {
            None => weight,
            Some(header) => header.weight_for(
                request,
                weight,
                self.weight.min.load(Ordering::Relaxed),
                self.weight.max.load(Ordering::Relaxed),
            ),
        }
    }

    /// The rule's weight now.
    pub(crate) fn weight(&self) -> u32 {
        // Relaxed: as in `weight_for`.
        self.weight.weight.load(Ordering::Relaxed)
    }

    /// Sets the rule's weight and its header weight's bounds (a reload, which checked that
    /// `min..=max` holds `weight` and starts at 1). The bounds of a rule without a header
    /// weight are not read.
    #[cfg(feature = "config")]
    pub(crate) fn set_weight(&self, weight: u32, min: u32, max: u32) {
        // Relaxed, each: see `weight_for`; the reload's lock orders reloads among
        // themselves.
        self.weight.weight.store(weight, Ordering::Relaxed);
        self.weight.min.store(min, Ordering::Relaxed);
        self.weight.max.store(max, Ordering::Relaxed);
    }
}

/// Rules a [`LiveLimits`](crate::live::LiveLimits) holds for the [`Routes`] it builds, in
/// order: a reload appends to them, never removes or reorders one. A fixed number of slots,
/// each set once: a decision reads them without a lock, in order, up to the first unset.
pub(crate) struct RuleSlots<C: Clock + 'static, I: InFlight = Quotas> {
    slots: Box<[OnceLock<RoutedRule<C, I>>]>,
}

/// A rule and its gate.
type RoutedRule<C, I> = (Rule, Routed<C, I>);

#[cfg_attr(not(feature = "config"), allow(dead_code))]
impl<C: Clock + 'static, I: InFlight> RuleSlots<C, I> {
    /// Room for `capacity` rules.
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            slots: (0..capacity).map(|_| OnceLock::new()).collect(),
        }
    }

    /// Rule `n` and its gate, if set.
    pub(crate) fn get(&self, n: usize) -> Option<&(Rule, Routed<C, I>)> {
        self.slots.get(n).and_then(OnceLock::get)
    }

    /// Sets rule `n`; `false` if it was set already or there is no such slot.
    pub(crate) fn set(&self, n: usize, rule: Rule, routed: Routed<C, I>) -> bool {
        self.slots
            .get(n)
            .is_some_and(|slot| slot.set((rule, routed)).is_ok())
    }

    /// The rules set, in order.
    fn iter(&self) -> impl Iterator<Item = &(Rule, Routed<C, I>)> {
        self.slots.iter().map_while(OnceLock::get)
    }
}

/// The rules of one layer, each with its gate, and the default gate for every request no
/// rule matches. Set on the layer with [`AdmitLayerBuilder::routes`](super::AdmitLayerBuilder::routes).
/// See the [module documentation](self).
///
/// ```
/// use admit::gate::{Cost, Gate, Limit};
/// use admit::tower::{AdmitLayer, HeaderKey, Routes, Rule};
/// use admit::{BucketConfig, Limiter};
/// use http::{HeaderName, Method};
///
/// let per_second = |n| -> Result<Limiter, Box<dyn std::error::Error>> {
///     Ok(Limiter::builder().build([BucketConfig::per_second(n)?])?)
/// };
/// // Everything: 100 requests a second per client.
/// let default = Gate::new().rates(per_second(100)?, [Limit::new("requests", 0)])?;
/// // Logins: 5 a second, whatever else the client does.
/// let login = Gate::new().rates(per_second(5)?, [Limit::new("logins", 0)])?;
/// // Reports: 200 units a second, a report costing 50.
/// let reports = Gate::new().rates(
///     per_second(200)?,
///     [Limit::new("report units", 0).cost(Cost::Weight { min: 1 })],
/// )?;
/// let routes = Routes::new(default)?
///     .rule(Rule::exact("/login").method(Method::POST), login)?
///     .rule(Rule::prefix("/reports").weight(50), reports)?;
/// let layer = AdmitLayer::builder(HeaderKey::new(HeaderName::from_static("x-client")))
///     .routes(routes)
///     .build()?;
/// # let _ = layer;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Routes<C: Clock + 'static = RecentClock, I: InFlight = Quotas> {
    pub(super) rules: Vec<(Rule, Routed<C, I>)>,
    pub(super) default: Routed<C, I>,
    /// The rules of a [`LiveLimits`](crate::live::LiveLimits), tried after `rules`.
    live: Option<Arc<RuleSlots<C, I>>>,
}

impl<C: Clock + 'static, I: InFlight> Routes<C, I> {
    /// Rules admitting every request through `default` until rules are added, at weight 1.
    /// Refused ([`RuleId::Default`]) as [`AdmitLayerBuilder::build`](super::AdmitLayerBuilder::build)
    /// refuses a gate: no defence, an unknown class, clocks apart.
    pub fn new(default: impl Into<Arc<Gate<C, I>>>) -> Result<Self, RuleRefused> {
        Self::new_weighted(default, 1)
    }

    /// [`Routes::new`] with the default rule's admissions at `weight`.
    pub fn new_weighted(
        default: impl Into<Arc<Gate<C, I>>>,
        weight: u32,
    ) -> Result<Self, RuleRefused> {
        let rule = Rule::prefix("/").weight(weight);
        let default = Routed::new(GateRef::Shared(default.into()), &rule, RuleId::Default)?;
        Ok(Self {
            rules: Vec::new(),
            default,
            live: None,
        })
    }

    /// The rules a [`LiveLimits`](crate::live::LiveLimits) holds (each already checked).
    #[cfg(feature = "config")]
    pub(crate) fn live(default: Routed<C, I>, slots: Arc<RuleSlots<C, I>>) -> Self {
        Self {
            rules: Vec::new(),
            default,
            live: Some(slots),
        }
    }

    /// Adds `rule`, admitting the requests it matches (and no earlier rule did) through
    /// `gate`. Refused, naming the rule, for a gate the layer would refuse, and for a header
    /// weight whose bounds do not hold the rule's weight
    /// ([`AdmitConfigError::WeightBounds`]).
    pub fn rule(
        mut self,
        rule: Rule,
        gate: impl Into<Arc<Gate<C, I>>>,
    ) -> Result<Self, RuleRefused> {
        let id = RuleId::Rule(self.rules.len());
        let routed = Routed::new(GateRef::Shared(gate.into()), &rule, id)?;
        self.rules.push((rule, routed));
        Ok(self)
    }

    /// The rule `request` falls under: the first that matches, else the default.
    pub(super) fn pick<B>(&self, request: &Request<B>) -> &Routed<C, I> {
        let head = RequestHead::of(request);
        let matching = |(rule, _): &&(Rule, Routed<C, I>)| rule.matches(&head);
        match self.rules.iter().find(matching) {
            Some((_, routed)) => routed,
            None => match &self.live {
                None => &self.default,
                Some(slots) => slots
                    .iter()
                    .find(matching)
                    .map_or(&self.default, |(_, routed)| routed),
            },
        }
    }

    /// Every rule's gate, the default's first.
    pub(super) fn gates(&self) -> impl Iterator<Item = &Routed<C, I>> {
        let live = self.live.iter().flat_map(|slots| slots.iter());
        std::iter::once(&self.default)
            .chain(self.rules.iter().chain(live).map(|(_, routed)| routed))
    }
}

impl<C: Clock + 'static, I: InFlight> fmt::Debug for Routes<C, I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let live = self.live.iter().flat_map(|slots| slots.iter());
        f.debug_struct("Routes")
            .field(
                "rules",
                &self
                    .rules
                    .iter()
                    .chain(live)
                    .map(|(r, _)| r)
                    .collect::<Vec<_>>(),
            )
            .field("default_weight", &self.default.weight())
            .finish()
    }
}
