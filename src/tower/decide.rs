//! The decision for one request: its keys, its declared size, then one admission of the
//! [`Gate`], through the gate's public API only.
//!
//! # The order, and why
//!
//! 1. **The keys.** The claim (the layer's key extractor), then the source if the layer reads
//!    one of its own, and its prefix if the layer widens it ([`super::source`]). Either missing: refuse or pass, as the
//!    [`MissingKeyPolicy`] says; nothing charged.
//! 2. **The rule**, if the layer has [`Routes`]: the first rule matching the request's head
//!    names the gate and the admission's weight, the default rule when none does. Without
//!    rules, the layer's gate at weight 1 (one branch on the way).
//! 3. **`Content-Length`**, if the gate has a volume quota: a malformed one is refused before
//!    any defence is charged.
//! 4. **The gate** ([`Gate::try_admit_at`]): the in-flight place, the rate limits, the volume
//!    charge, in that order, each by the key it is configured with. A later refusal gives
//!    back what the earlier defences took (the place is dropped, the tokens refunded), so a
//!    request the volume quota refuses spends neither, unless another request of the same key
//!    landed between the take and its refund (then it keeps that one token: see "Rollback" in
//!    [`crate::gate`]).
//!
//! # Each key hashed once, as the primitives hash it
//!
//! Each key is hashed once per request ([`HashedActor::new`], the hash every primitive's plain
//! methods make of the same identity), and every defence and the body meter derive their
//! slots from it (the rate-limit fields read no slot: they are numbered from the admission's
//! own take): an identity charged here and the same identity
//! charged by other code share their buckets and counts.

use super::key::KeyExtractor;
use super::meter::Meter;
use super::response::{rate_fields, AdmitRefused, RateFields};
use super::routes::Routes;
use super::source::SourceExtractor;
use super::{AdmitConfigError, MissingKeyPolicy};
use crate::actor::HashedActor;
use crate::clock::Clock;
use crate::gate::{Admission, Gate, GateRefused, InFlight, InFlightPermit, KeyKind, Take};
use crate::quota::RateLimitRefused;
use http::header::CONTENT_LENGTH;
use http::{Request, StatusCode};
use std::sync::Arc;

/// Which defences `gate` has: in flight, rate, volume (for `Debug`).
pub(super) fn defences<C: Clock + 'static, I: InFlight>(gate: &Gate<C, I>) -> [bool; 3] {
    [
        gate.quotas().is_some(),
        gate.limiter().is_some(),
        gate.volume_quota().is_some(),
    ]
}

/// Why the layer cannot decide with `gate`, if it cannot.
pub(super) fn check<C: Clock + 'static, I: InFlight>(
    gate: &Gate<C, I>,
) -> Result<(), AdmitConfigError> {
    if !gate.has_defence() {
        return Err(AdmitConfigError::NoDefence);
    }
    if let Some((limiter, class)) = gate.limiter() {
        let classes = limiter.classes();
        if class >= classes {
            return Err(AdmitConfigError::UnknownClass { class, classes });
        }
    }
    gate.check_clocks()
        .map_err(|ahead| AdmitConfigError::ClocksApart {
            ahead_by: ahead.ahead_by(),
        })
}

/// Whether any of `gate`'s defences charges the source's prefix.
pub(super) fn keys_prefix<C: Clock + 'static, I: InFlight>(gate: &Gate<C, I>) -> bool {
    let prefix = Some(KeyKind::SourcePrefix);
    gate.limits()
        .any(|(_, limit)| limit.key_kind() == KeyKind::SourcePrefix)
        || gate.volume_key() == prefix
        || gate.in_flight_key() == prefix
}

/// How the layer holds its gate: shared by a reference count, or `'static` (a gate in a
/// `static`, or leaked once), whose passes then borrow it and write no count.
pub(super) enum GateRef<C: Clock + 'static, I: InFlight> {
    Shared(Arc<Gate<C, I>>),
    Static(&'static Gate<C, I>),
}

impl<C: Clock + 'static, I: InFlight> Clone for GateRef<C, I> {
    fn clone(&self) -> Self {
        match self {
            Self::Shared(gate) => Self::Shared(Arc::clone(gate)),
            Self::Static(gate) => Self::Static(gate),
        }
    }
}

impl<C: Clock + 'static, I: InFlight> std::ops::Deref for GateRef<C, I> {
    type Target = Gate<C, I>;

    fn deref(&self) -> &Gate<C, I> {
        match self {
            Self::Shared(gate) => gate,
            Self::Static(gate) => gate,
        }
    }
}

/// What an admitted request's body holds: the in-flight place of the gate's pass (nothing
/// else of it: the layer asks nothing of its charges, and a smaller value moves with every
/// response), owned or borrowing a `'static` gate.
#[derive(Debug)]
pub(super) enum Held<I: InFlight> {
    /// Holds the in-flight table by a reference count.
    Owned(I::OwnedPermit),
    /// Borrows a `'static` gate: no count written.
    Borrowed(I::Permit<'static>),
}

impl<I: InFlight> Held<I> {
    /// The response's headers are out: an adaptive total's latency sample stops here, so a
    /// long stream (a slow reader) does not count as the writer's latency. The place is held
    /// until the body is done.
    #[inline]
    pub(super) fn responded(&mut self) {
        match self {
            Self::Owned(permit) => permit.responded(),
            Self::Borrowed(permit) => permit.responded(),
        }
    }
}

/// Everything the layer decides with, shared by every clone of the layer and its services.
pub(super) struct Shared<X, C: Clock + 'static, Y, I: InFlight> {
    pub(super) key: X,
    pub(super) source: Y,
    pub(super) gate: GateRef<C, I>,
    pub(super) missing_key: MissingKeyPolicy,
    pub(super) rate_limit_headers: bool,
    pub(super) on_refusal: Option<super::OnRefusal>,
    pub(super) outcome: Option<CountsOutcome>,
    /// The per-route rules, if any (then `gate` is their default's, unused by decisions).
    pub(super) routes: Option<Routes<C, I>>,
    /// The server's choice of each request's priority, if given.
    pub(super) priority: Option<super::PriorityOf>,
}

/// Which response statuses count for the limits charged by outcome.
pub(super) type CountsOutcome = Arc<dyn Fn(StatusCode) -> bool + Send + Sync>;

/// What charges an admitted request's outcome once its response status is known.
pub(super) type ChargeOutcome = Box<dyn FnOnce(StatusCode) + Send + Sync>;

/// What the layer decided for one request.
pub(super) struct Decision<I: InFlight> {
    /// Admitted (holding the in-flight place if the gate has an in-flight quota; `None`
    /// without one, or for a keyless request passed unchecked), or why not.
    pub(super) verdict: Result<Option<Held<I>>, AdmitRefused>,
    /// The IETF fields, when they are asked for and a defence decided the request.
    pub(super) rate: Option<Box<RateFields>>,
    /// Counts the body's bytes as they arrive: an admitted request with no `Content-Length`,
    /// through a gate with a volume quota (see [`super::meter`]).
    pub(super) meter: Option<Meter>,
    /// Charges the gate's limits charged by outcome, if the status counts: an admitted request
    /// through a layer told which outcomes count.
    pub(super) outcome: Option<ChargeOutcome>,
}

impl<X, C: Clock + Send + Sync + 'static, Y, I: InFlight> Shared<X, C, Y, I> {
    /// Decides `request` (see "The order, and why").
    pub(super) fn decide<B>(&self, request: &Request<B>) -> Decision<I>
    where
        X: KeyExtractor<B>,
        Y: SourceExtractor<B>,
    {
        let mut rate = None;
        let mut meter = None;
        let mut outcome = None;
        let keys = self.key.extract(request).and_then(|claim| {
            let claim = HashedActor::new(&claim);
            let source = self.source.source(request)?;
            Ok(match source {
                None => Admission::hashed_one(claim),
                Some(source) => {
                    let admission = Admission::hashed(claim, source.actor());
                    match source.prefix() {
                        Some(prefix) => admission.source_prefix(prefix),
                        None => admission,
                    }
                }
            })
        });
        let verdict = match keys {
            Ok(admission) => {
                // Without rules, the layer's gate at weight 1 (the admission's default).
                let (gate, admission, by_outcome) = match &self.routes {
                    None => (&self.gate, admission, true),
                    Some(routes) => {
                        let routed = routes.pick(request);
                        let admission = admission.weight(routed.weight_for(request));
                        (&routed.gate, admission, routed.by_outcome)
                    }
                };
                let admitted = self.charge(gate, admission, request, &mut rate, &mut meter);
                if let (Ok(_), Some(counts), true) = (&admitted, &self.outcome, by_outcome) {
                    outcome = Some(outcome_charge(gate, admission, counts));
                }
                admitted
            }
            Err(_) if self.missing_key == MissingKeyPolicy::Pass => Ok(None),
            Err(missing) => Err(AdmitRefused::MissingKey(missing)),
        };
        Decision {
            verdict,
            rate,
            meter,
            outcome,
        }
    }

    fn charge<B>(
        &self,
        gate: &GateRef<C, I>,
        admission: Admission,
        request: &Request<B>,
        rate: &mut Option<Box<RateFields>>,
        meter: &mut Option<Meter>,
    ) -> Result<Option<Held<I>>, AdmitRefused> {
        // Without a volume quota the size does not matter; without a declared size the body
        // is metered as it arrives, once admitted.
        let declared = match gate.volume_quota() {
            Some(_) => content_length(request)?,
            None => Some(0),
        };
        let now_ns = gate.now_ns();
        let admission = admission.bytes(declared.unwrap_or(0));
        let admission = match &self.priority {
            Some(of) => admission.priority(of(
                request.method(),
                request.uri(),
                request.headers(),
                request.extensions(),
            )),
            None => admission,
        };
        let admitted = if self.rate_limit_headers {
            admit_taking(gate, &admission, now_ns, rate)
        } else {
            match gate {
                GateRef::Static(gate) => gate
                    .try_admit_at(&admission, now_ns)
                    .map(|pass| pass.into_permit().map(Held::Borrowed)),
                GateRef::Shared(gate) => gate
                    .try_admit_owned_at(&admission, now_ns)
                    .map(|pass| pass.into_permit().map(Held::Owned)),
            }
        };
        if admitted.is_ok() && declared.is_none() {
            *meter = meter_for(gate, &admission);
        }
        admitted.map_err(AdmitRefused::from)
    }
}

/// The admission with the IETF fields on: `rate` is numbered from what its own charges left
/// (its take), at its one reading `now_ns`, so `t` and `Retry-After` agree, and no table is
/// read again. Out of line, so that the admission without the fields compiles as if they did
/// not exist.
#[inline(never)]
fn admit_taking<C: Clock + Send + Sync + 'static, I: InFlight>(
    gate: &GateRef<C, I>,
    admission: &Admission,
    now_ns: u64,
    rate: &mut Option<Box<RateFields>>,
) -> Result<Option<Held<I>>, GateRefused> {
    let mut take = Take::default();
    let admitted = match gate {
        GateRef::Static(gate) => gate
            .try_admit_taking_at(admission, now_ns, &mut take)
            .map(|pass| pass.into_permit().map(Held::Borrowed)),
        GateRef::Shared(gate) => gate
            .try_admit_owned_taking_at(admission, now_ns, &mut take)
            .map(|pass| pass.into_permit().map(Held::Owned)),
    };
    *rate = rate_fields(gate, &take, admitted.as_ref().err());
    admitted
}

/// What charges `admission`'s outcome through `gate`, if its response status `counts`.
fn outcome_charge<C: Clock + Send + Sync + 'static, I: InFlight>(
    gate: &GateRef<C, I>,
    admission: Admission,
    counts: &CountsOutcome,
) -> ChargeOutcome {
    let gate = gate.clone();
    let counts = Arc::clone(counts);
    Box::new(move |status| {
        if counts(status) {
            // A debit, never refused: only a reading the limiter cannot take (ahead of
            // its clock, or while a change lands) fails, and then nothing is charged.
            let _ = gate.charge_outcome(&admission);
        }
    })
}

/// A meter counting the body's bytes in `gate`'s volume quota, for the key it charges
/// (hashed once already).
fn meter_for<C: Clock + Send + Sync + 'static, I: InFlight>(
    gate: &GateRef<C, I>,
    admission: &Admission,
) -> Option<Meter> {
    let actor = *admission.key(gate.volume_key()?)?;
    let gate = gate.clone();
    Some(Box::new(move |bytes| match gate.volume_quota() {
        Some(volume) => volume
            .try_acquire_bytes(&actor, bytes)
            .map_err(RateLimitRefused::Exceeded),
        None => Ok(()),
    }))
}

/// The request's declared size: its `Content-Length`, or `None` without one (a chunked body is
/// admitted as one write of 0 bytes and metered as it arrives). A value that is not one
/// decimal number is refused.
fn content_length<B>(request: &Request<B>) -> Result<Option<u64>, AdmitRefused> {
    match request.headers().get(CONTENT_LENGTH) {
        None => Ok(None),
        Some(value) => value
            .to_str()
            .ok()
            .and_then(|text| text.trim().parse::<u64>().ok())
            .map(Some)
            .ok_or(AdmitRefused::BadContentLength),
    }
}
