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

use super::decide::GateRef;
use super::AdmitConfigError;
use crate::clock::{Clock, RecentClock};
use crate::fairness::Quotas;
#[cfg(doc)]
use crate::gate::Cost;
use crate::gate::{Gate, InFlight};
use http::{Extensions, HeaderMap, Method, Request, Uri};
use std::fmt;
use std::sync::Arc;

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

    /// The weight the rule's admissions carry.
    pub fn weight_of(&self) -> u32 {
        self.weight
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
        s.field("weight", &self.weight).finish()
    }
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
pub(super) struct Routed<C: Clock + 'static, I: InFlight> {
    pub(super) gate: GateRef<C, I>,
    pub(super) weight: u32,
    /// Whether the gate has limits charged by outcome (read once, at build).
    pub(super) by_outcome: bool,
}

impl<C: Clock + 'static, I: InFlight> Routed<C, I> {
    fn new(gate: GateRef<C, I>, weight: u32, rule: RuleId) -> Result<Self, RuleRefused> {
        super::decide::check(&gate).map_err(|why| RuleRefused { rule, why })?;
        let by_outcome = gate.charges_by_outcome();
        Ok(Self {
            gate,
            weight,
            by_outcome,
        })
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
        let default = Routed::new(GateRef::Shared(default.into()), weight, RuleId::Default)?;
        Ok(Self {
            rules: Vec::new(),
            default,
        })
    }

    /// Adds `rule`, admitting the requests it matches (and no earlier rule did) through
    /// `gate`. Refused, naming the rule, for a gate the layer would refuse.
    pub fn rule(
        mut self,
        rule: Rule,
        gate: impl Into<Arc<Gate<C, I>>>,
    ) -> Result<Self, RuleRefused> {
        let id = RuleId::Rule(self.rules.len());
        let routed = Routed::new(GateRef::Shared(gate.into()), rule.weight, id)?;
        self.rules.push((rule, routed));
        Ok(self)
    }

    /// The rule `request` falls under: the first that matches, else the default.
    pub(super) fn pick<B>(&self, request: &Request<B>) -> &Routed<C, I> {
        let head = RequestHead::of(request);
        self.rules
            .iter()
            .find(|(rule, _)| rule.matches(&head))
            .map_or(&self.default, |(_, routed)| routed)
    }

    /// Every rule's gate, the default's first.
    pub(super) fn gates(&self) -> impl Iterator<Item = &Routed<C, I>> {
        std::iter::once(&self.default).chain(self.rules.iter().map(|(_, routed)| routed))
    }
}

impl<C: Clock + 'static, I: InFlight> fmt::Debug for Routes<C, I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Routes")
            .field(
                "rules",
                &self.rules.iter().map(|(r, _)| r).collect::<Vec<_>>(),
            )
            .field("default_weight", &self.default.weight)
            .finish()
    }
}
