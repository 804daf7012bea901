//! The response body: the service's own, holding the request's in-flight place until its last
//! frame, or the layer's refusal.

use super::decide::Held;
use crate::fairness::Quotas;
use crate::gate::InFlight;
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use std::pin::Pin;
use std::task::{Context, Poll};

pin_project! {
    /// The body of every response that passes the layer: the inner service's body, holding the
    /// request's in-flight place from the gate's [`Pass`] (if the gate has an in-flight
    /// quota), until the body has yielded its last frame, failed, or been dropped; or the short
    /// text of a refusal.
    ///
    /// So a handler that returns at once but streams its body for a minute holds its actor's
    /// place for that minute: the quota counts responses being sent, not handlers running.
    ///
    /// ```
    /// use admit::fairness::Quotas;
    /// use admit::gate::Gate;
    /// use admit::tower::{AdmitBody, AdmitLayer, HeaderKey};
    /// use axum::{body::Body, routing::get, Router};
    /// use http::{HeaderName, Request};
    /// use http_body_util::BodyExt;
    /// use tower_layer::Layer;
    /// use tower_service::Service;
    ///
    /// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
    /// let quotas = Quotas::builder().quota(1).build()?; // a clone shares the counts
    /// let gate: Gate = Gate::new().in_flight(quotas.clone());
    /// let layer = AdmitLayer::builder(HeaderKey::new(HeaderName::from_static("x-actor")))
    ///     .gate(gate)
    ///     .build()?;
    /// let mut app = layer.layer(Router::new().route("/", get(|| async { "hello" })));
    /// let request = || Request::get("/").header("x-actor", "a").body(Body::empty());
    /// let response = app.call(request()?).await?;
    /// let body: AdmitBody<Body> = response.into_body();
    /// assert_eq!(quotas.in_flight("a".as_bytes()), 1, "the handler returned; the body is unsent");
    /// assert_eq!(body.collect().await?.to_bytes(), "hello");
    /// assert_eq!(quotas.in_flight("a".as_bytes()), 0, "the last frame freed the place");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub struct AdmitBody<B, I: InFlight = Quotas> {
        #[pin]
        kind: Kind<B, I>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<B, I: InFlight> {
        Admitted {
            #[pin]
            body: B,
            // The gate's pass: dropped, freeing the in-flight place, as soon as the body is
            // done.
            pass: Option<Held<I>>,
        },
        Refused {
            text: Option<Bytes>,
        },
    }
}

impl<B, I: InFlight> AdmitBody<B, I> {
    pub(super) fn admitted(body: B, pass: Option<Held<I>>) -> Self {
        Self {
            kind: Kind::Admitted { body, pass },
        }
    }

    pub(super) fn refused(text: Bytes) -> Self {
        Self {
            kind: Kind::Refused {
                text: (!text.is_empty()).then_some(text),
            },
        }
    }

    /// Whether this body is a refusal written by the layer (rather than the service's own).
    pub fn is_refusal(&self) -> bool {
        matches!(self.kind, Kind::Refused { .. })
    }
}

impl<B, I: InFlight> Body for AdmitBody<B, I>
where
    B: Body,
    B::Data: From<Bytes>,
{
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        match self.project().kind.project() {
            KindProj::Admitted { mut body, pass } => {
                let polled = body.as_mut().poll_frame(cx);
                let done = match &polled {
                    Poll::Ready(None | Some(Err(_))) => true,
                    // The frame just handed over was the last: free the place now, not when
                    // the server gets round to polling once more or dropping the body.
                    Poll::Ready(Some(Ok(_))) => body.is_end_stream(),
                    Poll::Pending => false,
                };
                if done {
                    *pass = None;
                }
                polled
            }
            KindProj::Refused { text } => {
                Poll::Ready(text.take().map(|text| Ok(Frame::data(text.into()))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Admitted { body, .. } => body.is_end_stream(),
            Kind::Refused { text } => text.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Admitted { body, .. } => body.size_hint(),
            Kind::Refused { text } => {
                SizeHint::with_exact(text.as_ref().map_or(0, |text| text.len() as u64))
            }
        }
    }
}
