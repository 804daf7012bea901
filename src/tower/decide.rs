//! The decision for one request: its key, its declared size, then one admission of the
//! [`Gate`], through the gate's public API only.
//!
//! # The order, and why
//!
//! 1. **The key.** No key: refuse or pass, as the [`MissingKeyPolicy`] says; nothing charged.
//! 2. **`Content-Length`**, if the gate has a volume quota: a malformed one is refused before
//!    any defence is charged.
//! 3. **The gate** ([`Gate::try_acquire`]): the in-flight place, the rate token, the volume
//!    charge, in that order, all or none. A later refusal gives back what the earlier
//!    defences took (the place is dropped, the token refunded), so a request the volume quota
//!    refuses spends neither; the order and why are in [`crate::gate`].
//!
//! # One identity for every defence, one type-erased path
//!
//! The gate is stored type-erased (its clock is any `C`), so the key reaches it as a
//! `&dyn ErasedKey` whose `Hash` impl forwards every write of the key's own `Hash` impl to the
//! primitive's hasher: the primitive sees exactly the writes it would see for the key itself,
//! so an identity charged here and the same identity charged directly by other code share
//! their buckets and counts.

use super::key::KeyExtractor;
use super::response::{ceil_secs, AdmitRefused, RateState};
use super::{AdmitConfigError, MissingKeyPolicy};
use crate::clock::Clock;
use crate::gate::{Gate, GateRefused, Pass};
use http::header::CONTENT_LENGTH;
use http::Request;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// A key whose type has been forgotten, still hashable exactly as itself.
pub(super) trait ErasedKey {
    /// Feeds the key's own `Hash` writes to `state`.
    fn hash_erased(&self, state: &mut dyn Hasher);
}

impl<K: Hash> ErasedKey for K {
    fn hash_erased(&self, mut state: &mut dyn Hasher) {
        // `&mut dyn Hasher` is a `Hasher` that forwards every write (`write_u8`, `write`, …)
        // unchanged, so the hasher sees the same sequence as `self.hash(state)` would give it.
        self.hash(&mut state);
    }
}

impl Hash for dyn ErasedKey + '_ {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.hash_erased(state);
    }
}

/// A gate, whatever its clock.
pub(super) trait Defences: Send + Sync {
    /// The gate's own admission of `key` with `bytes`.
    fn try_acquire(&self, key: &dyn ErasedKey, bytes: u64) -> Result<Pass, GateRefused>;
    /// Whether the gate charges a volume quota (so the request's size must be known).
    fn has_volume(&self) -> bool;
    /// Which defences the gate has: in flight, rate, volume (for `Debug`).
    fn defences(&self) -> [bool; 3];
    /// The identity's bucket of the gate's limiter class, for the rate-limit header fields.
    fn rate_state(&self, key: &dyn ErasedKey) -> Option<RateState>;
    /// Why the layer cannot decide with this gate, if it cannot.
    fn check(&self) -> Result<(), AdmitConfigError>;
}

impl<C: Clock + Send + Sync> Defences for Gate<C> {
    fn try_acquire(&self, key: &dyn ErasedKey, bytes: u64) -> Result<Pass, GateRefused> {
        Gate::try_acquire(self, key, bytes)
    }

    fn has_volume(&self) -> bool {
        self.volume_quota().is_some()
    }

    fn defences(&self) -> [bool; 3] {
        [
            self.quotas().is_some(),
            self.limiter().is_some(),
            self.volume_quota().is_some(),
        ]
    }

    fn rate_state(&self, key: &dyn ErasedKey) -> Option<RateState> {
        let (limiter, class) = self.limiter()?;
        let config = limiter.config(class)?;
        let burst = config.burst();
        // A peek for the whole burst: how many tokens are left, and when the bucket is full.
        let peek = limiter
            .peek_at(key, class, burst, limiter.clock().now_ns())
            .ok()?;
        let span = config.refill_interval().checked_mul(burst)?;
        Some(RateState {
            quota: burst,
            window_secs: ceil_secs(span).max(1),
            remaining: peek.available(),
            reset_secs: ceil_secs(peek.wait()),
        })
    }

    fn check(&self) -> Result<(), AdmitConfigError> {
        if !self.has_defence() {
            return Err(AdmitConfigError::NoDefence);
        }
        if let Some((limiter, class)) = self.limiter() {
            let classes = limiter.classes();
            if class >= classes {
                return Err(AdmitConfigError::UnknownClass { class, classes });
            }
        }
        self.check_clocks()
            .map_err(|ahead| AdmitConfigError::ClocksApart {
                ahead_by: ahead.ahead_by(),
            })
    }
}

/// Everything the layer decides with, shared by every clone of the layer and its services.
pub(super) struct Shared<X> {
    pub(super) key: X,
    pub(super) gate: Arc<dyn Defences>,
    pub(super) missing_key: MissingKeyPolicy,
    pub(super) rate_limit_headers: bool,
    pub(super) on_refusal: Option<super::OnRefusal>,
}

/// What the layer decided for one request.
pub(super) struct Decision {
    /// Admitted (holding the gate's pass, and with it the in-flight place if the gate has an
    /// in-flight quota; `None` for a keyless request passed unchecked), or why not.
    pub(super) verdict: Result<Option<Pass>, AdmitRefused>,
    /// The identity's bucket, when the limiter was consulted and the fields are asked for.
    pub(super) rate: Option<RateState>,
}

impl<X> Shared<X> {
    /// Decides `request` (see "The order, and why").
    pub(super) fn decide<B>(&self, request: &Request<B>) -> Decision
    where
        X: KeyExtractor<B>,
    {
        let mut rate = None;
        let verdict = match self.key.extract(request) {
            Ok(key) => self.charge(&key, request, &mut rate),
            Err(_) if self.missing_key == MissingKeyPolicy::Pass => Ok(None),
            Err(missing) => Err(AdmitRefused::MissingKey(missing)),
        };
        Decision { verdict, rate }
    }

    fn charge<B>(
        &self,
        key: &dyn ErasedKey,
        request: &Request<B>,
        rate: &mut Option<RateState>,
    ) -> Result<Option<Pass>, AdmitRefused> {
        let gate = &self.gate;
        let bytes = if gate.has_volume() {
            content_length(request)?
        } else {
            0
        };
        let admitted = gate.try_acquire(key, bytes);
        // The limiter was consulted unless the in-flight quota refused first.
        if self.rate_limit_headers && !matches!(admitted, Err(GateRefused::InFlight(_))) {
            *rate = gate.rate_state(key);
        }
        admitted.map(Some).map_err(AdmitRefused::from)
    }
}

/// The request's declared size: its `Content-Length`, or 0 without one (a chunked body is
/// charged as one event of 0 bytes). A value that is not one decimal number is refused.
fn content_length<B>(request: &Request<B>) -> Result<u64, AdmitRefused> {
    match request.headers().get(CONTENT_LENGTH) {
        None => Ok(0),
        Some(value) => value
            .to_str()
            .ok()
            .and_then(|text| text.trim().parse::<u64>().ok())
            .ok_or(AdmitRefused::BadContentLength),
    }
}
