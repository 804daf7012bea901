//! What a refused request is answered: which defence refused, the status and `Retry-After`
//! that says so, and the optional IETF `RateLimit-Policy` / `RateLimit` fields.

use super::key::MissingKey;
use crate::fairness::QuotasRefused;
use crate::gate::GateRefused;
use crate::limiter::LimiterRefused;
use crate::quota::RateLimitRefused;
use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use http::{Response, StatusCode};
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

/// The identifier of the one policy the rate-limit fields describe: the keyed limiter's class.
const POLICY: &str = "rate";
/// The draft's field names, checked when the crate is compiled (`from_static` in a const).
const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

/// One identity's bucket as the IETF draft's `RateLimit-Policy` and `RateLimit` fields state
/// it (draft-ietf-httpapi-ratelimit-headers-09): the bucket holds at most `quota` and refills
/// fully in `window_secs`; `remaining` tokens are left, and it is full again in `reset_secs`
/// (with none left, the next token comes in `reset_secs`, as `Retry-After` says).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct RateState {
    pub(super) quota: u32,
    pub(super) window_secs: u64,
    pub(super) remaining: u32,
    pub(super) reset_secs: u64,
}

impl RateState {
    /// Adds the two fields to `headers`, replacing any the service set.
    pub(super) fn insert_into(&self, headers: &mut HeaderMap) {
        let policy = format!("\"{POLICY}\";q={};w={}", self.quota, self.window_secs);
        let state = format!("\"{POLICY}\";r={};t={}", self.remaining, self.reset_secs);
        // Always valid header text (digits, letters, quotes, `;`, `=`): the `if let`s never
        // skip, but a refusal path has no business panicking.
        if let Ok(policy) = HeaderValue::try_from(policy) {
            headers.insert(RATELIMIT_POLICY, policy);
        }
        if let Ok(state) = HeaderValue::try_from(state) {
            headers.insert(RATELIMIT, state);
        }
    }
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
