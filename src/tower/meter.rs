//! The request body, metered: a body sent without a `Content-Length` is counted by the gate's
//! volume quota as its bytes arrive.
//!
//! A request that declares its size is charged for it at admission, all or nothing. One that
//! does not (`Transfer-Encoding: chunked`, a gRPC stream) is admitted as one write of 0 bytes,
//! and then each data frame is counted with
//! [`RateLimit::try_acquire_bytes`](crate::quota::RateLimit::try_acquire_bytes) before the
//! handler sees it: no event more, only bytes. The first frame the quota refuses ends the body
//! with a [`BodyRefused`] error instead of the frame, so the handler never reads past the
//! actor's bytes limit and the actor is never counted past it. What the client then sees is the
//! handler's answer to a failed body (axum's extractors answer 400); the bytes counted up to
//! the refusal stay counted.

use crate::quota::RateLimitRefused;
use bytes::Buf;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use std::fmt;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

/// Counts `n` more bytes of this request's body.
pub(super) type Meter = Box<dyn Fn(u64) -> Result<(), RateLimitRefused> + Send + Sync>;

pin_project! {
    /// The request body every service behind the layer receives: the client's body, counted by
    /// the gate's volume quota frame by frame when the request declared no `Content-Length`
    /// (see the [module docs](self)); otherwise passed through untouched.
    ///
    /// ```
    /// use admit::tower::MeteredBody;
    /// use axum::{body::Body, routing::post, Router};
    /// use bytes::Bytes;
    ///
    /// // A handler reads it like any body; axum's extractors accept it.
    /// let app: Router = Router::new().route("/upload", post(|body: Bytes| async move { body.len().to_string() }));
    /// # fn takes_metered<S: tower_service::Service<http::Request<MeteredBody<Body>>>>(_: &S) {}
    /// # takes_metered(&app);
    /// ```
    pub struct MeteredBody<B> {
        #[pin]
        inner: B,
        meter: Option<Meter>,
        counted: u64,
        // Refused once: the body has ended, whatever the client still sends.
        ended: bool,
    }
}

impl<B> MeteredBody<B> {
    pub(super) fn new(inner: B, meter: Option<Meter>) -> Self {
        Self {
            inner,
            meter,
            counted: 0,
            ended: false,
        }
    }

    /// Whether this body's bytes are counted as they arrive (the request had no
    /// `Content-Length` and the gate has a volume quota).
    pub fn is_metered(&self) -> bool {
        self.meter.is_some()
    }
}

impl<B: fmt::Debug> fmt::Debug for MeteredBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MeteredBody")
            .field("inner", &self.inner)
            .field("metered", &self.meter.is_some())
            .field("counted", &self.counted)
            .finish()
    }
}

impl<B> Body for MeteredBody<B>
where
    B: Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = B::Data;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        if *this.ended {
            return Poll::Ready(None);
        }
        let frame = match ready!(this.inner.poll_frame(cx)) {
            Some(Ok(frame)) => frame,
            Some(Err(error)) => return Poll::Ready(Some(Err(error.into()))),
            None => return Poll::Ready(None),
        };
        if let (Some(meter), Some(data)) = (this.meter.as_ref(), frame.data_ref()) {
            let n = u64::try_from(data.remaining()).unwrap_or(u64::MAX);
            if let Err(refused) = meter(n) {
                let counted = *this.counted;
                // Refused once: the body ends here, and nothing after it is read or counted.
                *this.ended = true;
                return Poll::Ready(Some(Err(Box::new(BodyRefused { refused, counted }))));
            }
            *this.counted = this.counted.saturating_add(n);
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A request body ended by the volume quota: its bytes went past the actor's bytes limit for
/// the window, as they streamed in (the request declared no `Content-Length`).
///
/// ```
/// use admit::tower::BodyRefused;
///
/// fn explain(error: &(dyn std::error::Error + 'static)) -> Option<String> {
///     let refused = error.downcast_ref::<BodyRefused>()?;
///     Some(format!("{} bytes read, then: {}", refused.counted(), refused.refused()))
/// }
/// # let _ = explain;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyRefused {
    refused: RateLimitRefused,
    counted: u64,
}

impl BodyRefused {
    /// Why the volume quota refused the next frame.
    pub fn refused(&self) -> &RateLimitRefused {
        &self.refused
    }

    /// Bytes of this body counted (and handed on) before the refusal.
    pub fn counted(&self) -> u64 {
        self.counted
    }
}

impl fmt::Display for BodyRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "request body ended after {} bytes: {}",
            self.counted, self.refused
        )
    }
}

impl std::error::Error for BodyRefused {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.refused)
    }
}
