//! What a refused request is answered: which defence refused, the status and `Retry-After`
//! that says so, and the optional IETF `RateLimit-Policy` / `RateLimit` fields.

use super::key::MissingKey;
use crate::clock::Clock;
use crate::fairness::QuotasRefused;
use crate::gate::{Gate, GateRefused, InFlight, Take};
use crate::limiter::Left;
use crate::limiter::LimiterRefused;
use crate::quota::{RateLimitRefused, VolumeLimit};
use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use http::{Response, StatusCode};
use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

/// Why the layer refused a request, before the service saw it: its gate's refusal
/// ([`GateRefused`], one variant per defence, converted by `From`), or the request's own fault.
/// Every refusal is also put in the refusal response's extensions, for a logging layer outside
/// this one to read.
///
/// | refusal | status | `Retry-After` |
/// |---|---|---|
/// | [`AdmitRefused::Limiter`], limited | 429 | the wait, whole seconds rounded up, at least 1 |
/// | [`AdmitRefused::InFlight`] | 429 | 1 |
/// | [`AdmitRefused::Volume`] | 429 | until the window turns, rounded up |
/// | [`AdmitRefused::Volume`], larger than a whole window's limit | 413 | none: waiting cannot help |
/// | [`AdmitRefused::Volume`], a reading ahead of its clock | 500 | none |
/// | [`AdmitRefused::MissingKey`], no peer address | 500 | none |
/// | [`AdmitRefused::MissingKey`], no header or custom key | 400 | none |
/// | [`AdmitRefused::BadContentLength`] | 400 | none |
/// | [`AdmitRefused::KeyNotExtracted`] | 500 | none |
/// | [`AdmitRefused::Limiter`], a limit change landing at that moment | 503 | 1 |
/// | [`AdmitRefused::Limiter`], an invalid charge | 500 | none |
///
/// ```
/// use admit::tower::AdmitRefused;
/// use admit::{BucketConfig, Limiter, ManualClock};
/// use std::time::Duration;
///
/// let limiter = Limiter::builder().build_with_clock([BucketConfig::new(1, Duration::from_millis(1_500))?], ManualClock::new())?;
/// limiter.try_acquire("k", 0)?;
/// let refused = AdmitRefused::Limiter(limiter.try_acquire("k", 0).unwrap_err());
/// assert_eq!(refused.status(), http::StatusCode::TOO_MANY_REQUESTS);
/// assert_eq!(refused.retry_after_secs(), Some(2), "1.5 s, rounded up");
/// let response = refused.to_response();
/// assert_eq!(response.headers()["retry-after"], "2");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdmitRefused {
    /// The keyed rate limiter refused: no token (429), a change to a faster rate being
    /// published at that moment (503, see
    /// [`ReadingAhead::while_a_change_lands`](crate::clock::ReadingAhead::while_a_change_lands)),
    /// or a charge that can never succeed, a server-side misconfiguration (500).
    Limiter(LimiterRefused),
    /// The actor already has its quota of requests in flight (responses not yet fully sent).
    InFlight(QuotasRefused),
    /// The actor is over its volume quota for the window, or the request alone is larger than
    /// a whole window's limit; or the quota refused the gate's reading as ahead of its own
    /// clock, a server-side misconfiguration (500: the gate's limiter and volume quota read
    /// two clocks, see [`Gate::check_clocks`](crate::gate::Gate::check_clocks)).
    Volume(RateLimitRefused),
    /// The request carries no identity to charge (see the
    /// [`MissingKeyPolicy`](super::MissingKeyPolicy)).
    MissingKey(MissingKey),
    /// The `Content-Length` header is not one decimal number, so the volume quota cannot be
    /// charged for it.
    BadContentLength,
    /// A defence of the gate is keyed by a key the layer does not hand it (a limit keyed by
    /// the source's prefix): a server-side misconfiguration (500), nothing charged.
    KeyNotExtracted {
        /// The defence.
        defence: &'static str,
        /// The key it charges.
        key: crate::gate::KeyKind,
    },
}

impl AdmitRefused {
    /// The HTTP status this refusal is answered with (see the table above).
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Limiter(LimiterRefused::Limited(_)) | Self::InFlight(_) => {
                StatusCode::TOO_MANY_REQUESTS
            }
            Self::Limiter(refused) if refused.while_a_change_lands() => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Self::Limiter(LimiterRefused::Invalid(_))
            | Self::Volume(RateLimitRefused::ReadingAhead(_))
            | Self::MissingKey(MissingKey::PeerAddr)
            | Self::KeyNotExtracted { .. } => StatusCode::INTERNAL_SERVER_ERROR,
            Self::Volume(RateLimitRefused::Exceeded(exceeded)) if exceeded.is_permanent() => {
                StatusCode::PAYLOAD_TOO_LARGE
            }
            Self::Volume(RateLimitRefused::Exceeded(_)) => StatusCode::TOO_MANY_REQUESTS,
            Self::MissingKey(_) | Self::BadContentLength => StatusCode::BAD_REQUEST,
        }
    }

    /// The `Retry-After` value: whole seconds, rounded up, at least 1; `None` where waiting
    /// cannot help. An in-flight refusal says 1: a place frees when any response of the actor
    /// finishes, which the layer cannot foresee.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            Self::Limiter(refused) if refused.while_a_change_lands() => Some(1),
            Self::Limiter(refused) => refused.limited().map(|l| l.retry_after_secs()),
            Self::InFlight(_) => Some(1),
            Self::Volume(refused) => refused.retry_after_secs(),
            Self::MissingKey(_) | Self::BadContentLength | Self::KeyNotExtracted { .. } => None,
        }
    }

    /// The default answer: [`AdmitRefused::status`], `Retry-After` when waiting helps, and the
    /// refusal's message as a line of plain text. A custom answer
    /// ([`AdmitLayerBuilder::on_refusal`](super::AdmitLayerBuilder::on_refusal)) can start
    /// from it.
    pub fn to_response(&self) -> Response<Bytes> {
        let mut response = Response::new(Bytes::from(format!("{self}\n")));
        *response.status_mut() = self.status();
        let headers = response.headers_mut();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        if let Some(secs) = self.retry_after_secs() {
            headers.insert(RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

impl AdmitRefused {
    /// The gRPC status code this refusal is answered with to a gRPC client: 8
    /// (`RESOURCE_EXHAUSTED`) where HTTP says 429 or 413, 3 (`INVALID_ARGUMENT`) for a request
    /// without a key or with a malformed size, 13 (`INTERNAL`) for the server's own faults.
    pub fn grpc_code(&self) -> u8 {
        match self.status() {
            StatusCode::TOO_MANY_REQUESTS | StatusCode::PAYLOAD_TOO_LARGE => 8,
            StatusCode::BAD_REQUEST => 3,
            _ => 13,
        }
    }

    /// The default answer to a gRPC request (`content-type: application/grpc…`): a
    /// "trailers-only" gRPC response, HTTP 200 with `grpc-status` ([`AdmitRefused::grpc_code`])
    /// and `grpc-message` in its headers and no body, plus the retry information a gRPC client
    /// reads: `grpc-retry-pushback-ms` (gRPC's server pushback: the limiter's exact wait in
    /// whole milliseconds, rounded up; the whole seconds of `Retry-After` for the other
    /// defences) and `Retry-After`, whenever waiting helps.
    ///
    /// ```
    /// use admit::tower::{AdmitRefused, MissingKey};
    ///
    /// let refused = AdmitRefused::MissingKey(MissingKey::Custom);
    /// let response = refused.to_grpc_response();
    /// assert_eq!(response.status(), 200);
    /// assert_eq!(response.headers()["grpc-status"], "3");
    /// ```
    pub fn to_grpc_response(&self) -> Response<Bytes> {
        let mut response = Response::new(Bytes::new());
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        headers.insert(
            "grpc-status",
            HeaderValue::from(u16::from(self.grpc_code())),
        );
        if let Ok(message) = HeaderValue::from_str(&grpc_percent_encode(&self.to_string())) {
            headers.insert("grpc-message", message);
        }
        if let Some(secs) = self.retry_after_secs() {
            headers.insert(
                "grpc-retry-pushback-ms",
                HeaderValue::from(self.pushback_ms(secs)),
            );
            headers.insert(RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }

    /// gRPC's pushback: the limiter's exact wait rounded up to whole milliseconds (at least
    /// 1), since gRPC counts in them; the other defences know their wait only in the whole
    /// seconds of `Retry-After`.
    fn pushback_ms(&self, retry_after_secs: u64) -> u64 {
        match self {
            Self::Limiter(refused) => refused.limited().map_or(0, |l| {
                let ms = l.wait().as_nanos().div_ceil(1_000_000).max(1);
                u64::try_from(ms).unwrap_or(u64::MAX)
            }),
            _ => retry_after_secs.saturating_mul(1_000),
        }
    }
}

/// `grpc-message` is percent-encoded: every byte outside printable ASCII, and `%` itself.
fn grpc_percent_encode(message: &str) -> String {
    use fmt::Write;
    let mut out = String::with_capacity(message.len());
    for byte in message.trim_end().bytes() {
        if (0x20..=0x7e).contains(&byte) && byte != b'%' {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

#[cfg(test)]
pub(super) fn grpc_percent_encode_for_test(message: &str) -> String {
    grpc_percent_encode(message)
}

/// The answer to `refused`: `respond`'s if the layer has a custom one, else the default for a
/// gRPC request (`grpc`) or a plain one. Shared by both layers, so they answer alike.
pub(super) fn answer(
    respond: Option<&super::OnRefusal>,
    refused: &AdmitRefused,
    grpc: bool,
) -> Response<Bytes> {
    match respond {
        Some(respond) => respond(refused),
        None if grpc => refused.to_grpc_response(),
        None => refused.to_response(),
    }
}

/// Whether `headers` are a gRPC request's (`content-type: application/grpc`, with or without
/// a `+proto`-style suffix).
pub(super) fn is_grpc(headers: &http::HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/grpc"))
}

impl fmt::Display for AdmitRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Limiter(refused) => refused.fmt(f),
            // The quota's own message speaks of a writer deciding ops; here an op is a
            // request, decided when its response has been sent.
            Self::InFlight(refused) if refused.via_overflow() => write!(
                f,
                "too many requests in flight: every key's own slot is busy, and the {} \
                 requests of keys without one fill their shared quota of {}; retry when one \
                 completes",
                refused.in_flight(),
                refused.limit()
            ),
            Self::InFlight(refused) => write!(
                f,
                "too many requests in flight: this key already has {} of its {} awaiting a \
                 complete response; retry when one completes",
                refused.in_flight(),
                refused.limit()
            ),
            Self::Volume(refused) => refused.fmt(f),
            Self::MissingKey(missing) => missing.fmt(f),
            Self::BadContentLength => {
                f.write_str("the request's Content-Length is not a decimal number of bytes")
            }
            Self::KeyNotExtracted { defence, key } => write!(
                f,
                "the gate's {defence} is keyed by {key}, which this layer does not extract"
            ),
        }
    }
}

impl std::error::Error for AdmitRefused {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Limiter(refused) => Some(refused),
            Self::InFlight(refused) => Some(refused),
            Self::Volume(refused) => Some(refused),
            Self::MissingKey(missing) => Some(missing),
            Self::BadContentLength | Self::KeyNotExtracted { .. } => None,
        }
    }
}

impl From<GateRefused> for AdmitRefused {
    /// The gate's refusal, defence by defence: in flight, rate ([`AdmitRefused::Limiter`]) or
    /// volume.
    fn from(refused: GateRefused) -> Self {
        match refused {
            GateRefused::InFlight { refused, .. } => Self::InFlight(refused),
            GateRefused::Rate { refused, .. } => Self::Limiter(refused),
            GateRefused::Volume { refused, .. } => Self::Volume(refused),
            GateRefused::MissingKey { defence, key } => Self::KeyNotExtracted { defence, key },
        }
    }
}

/// The draft's field names, checked when the crate is compiled (`from_static` in a const).
const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

/// The item naming the in-flight quota.
pub(super) const IN_FLIGHT_ITEM: &str = "in-flight";
/// The item naming the volume quota's bytes limit.
pub(super) const VOLUME_ITEM: &str = "volume";
/// The item naming the volume quota's requests (events) limit.
pub(super) const VOLUME_REQUESTS_ITEM: &str = "volume-requests";

/// The IETF `RateLimit-Policy` and `RateLimit` fields of one response
/// (draft-ietf-httpapi-ratelimit-headers-09, the structured fields it keeps from -08): one
/// item per defence of the gate that decided the request, each numbered from what the
/// admission's own charges left (see "The IETF fields" in [`crate::tower`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RateFields {
    policy: HeaderValue,
    state: HeaderValue,
}

impl RateFields {
    /// Adds the two fields to `headers`, replacing any the service set.
    /// Moved in, not cloned: a clone of a value made from a `String` allocates.
    pub(super) fn insert_into(self, headers: &mut HeaderMap) {
        headers.insert(RATELIMIT_POLICY, self.policy);
        headers.insert(RATELIMIT, self.state);
    }
}

/// The fields' two lists, written item by item: pushed, not formatted (the formatting
/// machinery cost more than the whole admission), into strings sized once for a gate of a few
/// defences.
struct Items {
    policy: String,
    state: String,
}

impl Default for Items {
    fn default() -> Self {
        Self {
            policy: String::with_capacity(160),
            state: String::with_capacity(128),
        }
    }
}

impl Items {
    /// The item `name` in `RateLimit-Policy`: quota `q`, its unit `qu` (none for requests, the
    /// draft's default) and its window `w` in seconds (none where there is no window).
    fn policy(&mut self, name: &str, q: u64, unit: Option<&str>, window: Option<u64>) {
        let out = &mut self.policy;
        item(out, name);
        out.push_str(";q=");
        push_decimal(out, q);
        if let Some(unit) = unit {
            out.push_str(";qu=\"");
            out.push_str(unit);
            out.push('"');
        }
        if let Some(w) = window {
            out.push_str(";w=");
            push_decimal(out, w);
        }
    }

    /// The item `name` in `RateLimit`: `r` left, and `t` seconds.
    fn state(&mut self, name: &str, r: u64, t: u64) {
        let out = &mut self.state;
        item(out, name);
        out.push_str(";r=");
        push_decimal(out, r);
        out.push_str(";t=");
        push_decimal(out, t);
    }
}

/// Starts the item `name` in the list `out`: `"name"`, after a separator if it is not the
/// first.
fn item(out: &mut String, name: &str) {
    if !out.is_empty() {
        out.push_str(", ");
    }
    out.push('"');
    out.push_str(name);
    out.push('"');
}

/// Pushes `n` in decimal.
pub(super) fn push_decimal(out: &mut String, mut n: u64) {
    // u64::MAX has 20 digits.
    let mut digits = [b'0'; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        if let Some(digit) = digits.get_mut(at) {
            // `n % 10 < 10`: the cast cannot truncate.
            *digit = b'0' + (n % 10) as u8;
        }
        n /= 10;
        if n == 0 || at == 0 {
            break;
        }
    }
    // ASCII digits: always UTF-8.
    if let Some(Ok(text)) = digits.get(at..).map(std::str::from_utf8) {
        out.push_str(text);
    }
}

/// The item name of the gate's limit at `index` (in the order the gate charges them): its
/// name, unless that cannot be stated as one (see "The IETF fields" in [`crate::tower`]):
/// another limit of the gate has it too, it is one of the names the quotas' items take, or it
/// is empty or not printable ASCII without `"` and `\`; then `l<index>`.
fn item_name<'a, C: Clock + 'static, I: InFlight>(
    gate: &'a Gate<C, I>,
    index: usize,
    name: &'a str,
) -> Cow<'a, str> {
    let printable = !name.is_empty()
        && name
            .bytes()
            .all(|b| (0x20..=0x7e).contains(&b) && b != b'"' && b != b'\\');
    let reserved = [IN_FLIGHT_ITEM, VOLUME_ITEM, VOLUME_REQUESTS_ITEM].contains(&name);
    let shared = gate
        .limits()
        .enumerate()
        .any(|(at, (_, other))| at != index && other.name() == name);
    if printable && !reserved && !shared {
        Cow::Borrowed(name)
    } else {
        Cow::Owned(format!("l{index}"))
    }
}

/// `t` for a bucket's state: with tokens left, the seconds until it is full again; with none,
/// the wait for the next one (what a refusal's `Retry-After` says, same reading, same
/// rounding).
fn bucket_t(left: &Left) -> u64 {
    if left.tokens > 0 {
        ceil_secs(left.full_in)
    } else {
        ceil_secs(left.next_in).max(1)
    }
}

/// The fields for a request `gate` decided (`refused` if it refused it), from `take`, what
/// the admission's charges left. `None` if the request never reached a defence that states
/// anything (a key the gate needed was missing).
pub(super) fn rate_fields<C: Clock + 'static, I: InFlight>(
    gate: &Gate<C, I>,
    take: &Take,
    refused: Option<&GateRefused>,
) -> Option<Box<RateFields>> {
    if matches!(refused, Some(GateRefused::MissingKey { .. })) {
        return None;
    }
    let mut items = Items::default();
    let admitted = refused.is_none();
    // The in-flight place: `r` is the places this key has left, `t` 0 while one is left and
    // 1 with none (a place frees when one of the key's responses completes, which no clock
    // foretells; the `Retry-After` of an in-flight refusal says 1 too).
    if gate.quotas().is_some() {
        let places = match refused {
            Some(GateRefused::InFlight { refused, .. }) => Some((u64::from(refused.limit()), 0)),
            _ => take.places.map(|places| {
                // A later defence refused: the place was given back.
                let held = if admitted {
                    places.held
                } else {
                    places.held.saturating_sub(1)
                };
                let quota = u64::from(places.quota);
                (quota, quota.saturating_sub(u64::from(held)))
            }),
        };
        if let Some((quota, left)) = places {
            items.policy(IN_FLIGHT_ITEM, quota, Some("concurrent-requests"), None);
            items.state(IN_FLIGHT_ITEM, left, u64::from(left == 0));
        }
    }
    // The limits: each taken one as its take left it (as its refund put it back, if a later
    // defence refused), the refusing one with no token and its refusal's wait; the ones
    // after it were never reached, and a refusal by the in-flight quota reached none.
    let taken = take.limits();
    for (index, (limiter, limit)) in gate.limits().enumerate() {
        let name = item_name(gate, index, limit.name());
        let recorded = taken.get(index).copied().flatten();
        let (q, span) = match (&recorded, limiter.config(limit.class())) {
            (Some(taken), _) => (taken.after.burst, taken.after.span),
            (None, Some(config)) => (config.burst(), config.refill_span()),
            (None, None) => continue,
        };
        items.policy(&name, u64::from(q), None, Some(ceil_secs(span).max(1)));
        match (refused, recorded) {
            (Some(GateRefused::InFlight { .. }), _) => {}
            (Some(GateRefused::Rate { refused, .. }), None) if index == taken.len() => {
                if let Some(limited) = refused.limited() {
                    items.state(&name, 0, limited.retry_after_secs());
                }
            }
            (_, Some(taken)) => {
                let left = if admitted { taken.after } else { taken.undone };
                items.state(&name, u64::from(left.tokens), bucket_t(&left));
            }
            (_, None) => {}
        }
    }
    // The volume: its bytes and its requests a window, each `t` the time until the window
    // turns (when both start again from nothing); a refusal's item says what was left of the
    // limit it hit and its `Retry-After`.
    if let Some(volume) = gate.volume_quota() {
        let quota = volume.quota();
        let (events, bytes, window) = match &take.volume {
            Some(left) => (left.events, left.bytes, left.window),
            None => (quota.events(), quota.bytes(), quota.window()),
        };
        let w = Some(ceil_secs(window).max(1));
        items.policy(VOLUME_ITEM, u64::from(bytes), Some("content-bytes"), w);
        items.policy(VOLUME_REQUESTS_ITEM, u64::from(events), None, w);
        match (refused, &take.volume) {
            (Some(GateRefused::Volume { refused, .. }), _) => {
                if let Some(exceeded) = refused.exceeded() {
                    let name = match exceeded.limit() {
                        VolumeLimit::Bytes => VOLUME_ITEM,
                        VolumeLimit::Events => VOLUME_REQUESTS_ITEM,
                    };
                    let t = exceeded
                        .retry_after_secs()
                        .unwrap_or_else(|| ceil_secs(exceeded.window_turns_in()).max(1));
                    let r = exceeded.max().saturating_sub(exceeded.used());
                    items.state(name, u64::from(r), t);
                }
            }
            (None, Some(left)) => {
                let t = ceil_secs(left.turns_in).max(1);
                items.state(VOLUME_ITEM, u64::from(left.bytes_left), t);
                items.state(VOLUME_REQUESTS_ITEM, u64::from(left.events_left), t);
            }
            _ => {}
        }
    }
    Some(Box::new(RateFields {
        policy: HeaderValue::try_from(items.policy).ok()?,
        state: HeaderValue::try_from(items.state).ok()?,
    }))
}

/// `wait` in whole seconds, rounded up (zero stays zero: a bucket already full resets now).
pub(super) fn ceil_secs(wait: Duration) -> u64 {
    let whole = wait.as_secs();
    if wait.subsec_nanos() > 0 {
        whole.saturating_add(1)
    } else {
        whole
    }
}
