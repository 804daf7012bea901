//! The service the layer makes, and its future: decide, then call the inner service or answer
//! the refusal.

use super::body::AdmitBody;
use super::decide::Shared;
use super::decide::{ChargeOutcome, Held};
use super::key::KeyExtractor;
use super::meter::MeteredBody;
use super::response::{answer, is_grpc, AdmitRefused, RateFields};
use super::source::{SameAsClaim, SourceExtractor};
use crate::clock::{Clock, RecentClock};
use crate::fairness::Quotas;
use crate::gate::InFlight;
use bytes::Bytes;
use http::{Request, Response};
use pin_project_lite::pin_project;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use tower_service::Service;

/// An inner service behind the layer's defences (made by [`AdmitLayer`](super::AdmitLayer)).
///
/// Each request is decided before the inner service sees it: admitted requests are passed on
/// and their response body wrapped in an [`AdmitBody`]; refused ones are answered at once.
///
/// ```
/// use admit::fairness::Quotas;
/// use admit::gate::Gate;
/// use admit::tower::{Admit, AdmitLayer, KeyFn, MeteredBody};
/// use http::{Request, Response, StatusCode};
/// use http_body_util::Full;
/// use bytes::Bytes;
/// use tower_layer::Layer;
/// use tower_service::Service;
///
/// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
/// // Any tower service of http requests; here a plain function. Behind the layer it receives
/// // the request's body as a `MeteredBody` (counted as it arrives when it has no length).
/// let hello = tower::service_fn(|_: Request<MeteredBody<()>>| async {
///     Ok::<_, std::convert::Infallible>(Response::new(Full::new(Bytes::from("hello"))))
/// });
/// let gate: Gate = Gate::new().in_flight(Quotas::new()); // `Gate`: the default clock type
/// let layer = AdmitLayer::builder(KeyFn::new(|r: &Request<()>| r.uri().query().map(str::to_owned)))
///     .gate(gate)
///     .build()?;
/// let mut service: Admit<_, _> = layer.layer(hello);
/// let ok = service.call(Request::get("/?user=7").body(())?).await?;
/// assert_eq!(ok.status(), StatusCode::OK);
/// let no_key = service.call(Request::get("/").body(())?).await?;
/// assert_eq!(no_key.status(), StatusCode::BAD_REQUEST);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Admit<S, X, C: Clock + 'static = RecentClock, Y = SameAsClaim, I: InFlight = Quotas> {
    inner: S,
    shared: Arc<Shared<X, C, Y, I>>,
}

impl<S, X, C: Clock + 'static, Y, I: InFlight> Admit<S, X, C, Y, I> {
    pub(super) fn new(inner: S, shared: Arc<Shared<X, C, Y, I>>) -> Self {
        Self { inner, shared }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The answer to a refused request: the custom one or the default, plus the rate-limit
    /// fields if asked for, and the refusal itself in its extensions.
    fn refusal(
        &self,
        refused: AdmitRefused,
        rate: Option<Box<RateFields>>,
        grpc: bool,
    ) -> Response<Bytes> {
        let mut response = answer(self.shared.on_refusal.as_ref(), &refused, grpc);
        if let Some(rate) = rate {
            (*rate).insert_into(response.headers_mut());
        }
        response.extensions_mut().insert(refused);
        response
    }
}

impl<S: Clone, X, C: Clock + 'static, Y, I: InFlight> Clone for Admit<S, X, C, Y, I> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S: fmt::Debug, X: fmt::Debug, C: Clock + 'static, Y: fmt::Debug, I: InFlight> fmt::Debug
    for Admit<S, X, C, Y, I>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Admit")
            .field("inner", &self.inner)
            .field("layer", &self.shared)
            .finish()
    }
}

impl<S, X, C, Y, I, ReqBody, ResBody> Service<Request<ReqBody>> for Admit<S, X, C, Y, I>
where
    S: Service<Request<MeteredBody<ReqBody>>, Response = Response<ResBody>>,
    X: KeyExtractor<ReqBody>,
    Y: SourceExtractor<ReqBody>,
    C: Clock + Send + Sync + 'static,
    I: InFlight,
{
    type Response = Response<AdmitBody<ResBody, I>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, I>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let decision = self.shared.decide(&request);
        let kind = match decision.verdict {
            Ok(pass) => Kind::Admitted {
                future: self
                    .inner
                    .call(request.map(|body| MeteredBody::new(body, decision.meter))),
                pass,
                rate: decision.rate,
                outcome: decision.outcome,
            },
            Err(refused) => Kind::Refused {
                response: Some(self.refusal(refused, decision.rate, is_grpc(request.headers()))),
            },
        };
        ResponseFuture { kind }
    }
}

pin_project! {
    /// The future of an [`Admit`] service's response: the inner service's, or a refusal
    /// ready at once.
    ///
    /// ```
    /// use admit::fairness::Quotas;
    /// use admit::gate::Gate;
    /// use admit::tower::{AdmitLayer, KeyFn, MeteredBody, ResponseFuture};
    /// use http::{Request, Response};
    /// use tower_layer::Layer;
    /// use tower_service::Service;
    ///
    /// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
    /// let echo = tower::service_fn(|r: Request<MeteredBody<String>>| async move {
    ///     Ok::<_, std::convert::Infallible>(Response::new(r.uri().path().to_owned()))
    /// });
    /// let gate: Gate = Gate::new().in_flight(Quotas::new());
    /// let layer = AdmitLayer::builder(KeyFn::new(|_: &Request<String>| Some("everyone")))
    ///     .gate(gate)
    ///     .build()?;
    /// let future: ResponseFuture<_> = layer.layer(echo).call(Request::new("hi".to_owned()));
    /// assert_eq!(future.await?.status(), 200);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub struct ResponseFuture<F, I: InFlight = Quotas> {
        #[pin]
        kind: Kind<F, I>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F, I: InFlight> {
        Admitted {
            #[pin]
            future: F,
            // The gate's pass: moved into the response body when the inner service answers;
            // dropped (freeing the in-flight place) if the future fails or is dropped first.
            pass: Option<Held<I>>,
            rate: Option<Box<RateFields>>,
            // Charges the limits charged by outcome once the status is known, if it counts.
            outcome: Option<ChargeOutcome>,
        },
        Refused {
            response: Option<Response<Bytes>>,
        },
    }
}

impl<F, I: InFlight> fmt::Debug for ResponseFuture<F, I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            Kind::Admitted { .. } => "admitted",
            Kind::Refused { .. } => "refused",
        };
        f.debug_struct("ResponseFuture")
            .field("kind", &kind)
            .finish()
    }
}

impl<F, B, E, I: InFlight> Future for ResponseFuture<F, I>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<AdmitBody<B, I>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Admitted {
                future,
                pass,
                rate,
                outcome,
            } => {
                let mut response = ready!(future.poll(cx))?;
                // The headers are out: the latency an adaptive total measures stops here, so
                // the time a client takes to read a long body is not the writer's.
                if let Some(held) = pass.as_mut() {
                    held.responded();
                }
                if let Some(charge) = outcome.take() {
                    charge(response.status());
                }
                if let Some(rate) = rate.take() {
                    (*rate).insert_into(response.headers_mut());
                }
                let pass = pass.take();
                Poll::Ready(Ok(response.map(|body| AdmitBody::admitted(body, pass))))
            }
            KindProj::Refused { response } => match response.take() {
                Some(response) => Poll::Ready(Ok(response.map(AdmitBody::refused))),
                // Polled again after it completed: a future may do anything then, and this
                // one, which must not panic, never completes again.
                None => Poll::Pending,
            },
        }
    }
}
