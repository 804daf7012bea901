//! The decision for one request: its key, then each configured defence in a fixed order,
//! through the primitives' public API only.
//!
//! # The order, and why
//!
//! 1. **The key.** No key: refuse or pass, as the [`MissingKeyPolicy`] says; nothing charged.
//! 2. **`Content-Length`**, if a volume quota is set: a malformed one is refused before any
//!    defence is charged.
//! 3. **In flight** ([`Quotas::try_acquire_owned`]): first because it is the one charge that
//!    can be undone (dropping the permit), so a later refusal gives the place straight back.
//! 4. **The keyed limiter** ([`Limiter::try_acquire`]): a request it refuses charges no volume.
//! 5. **The volume quota** ([`RateLimit::try_acquire`]) last: a request it refuses has still
//!    spent a token, since it did arrive (the limiter has no refund).
//!
//! # One identity for every defence, one type-erased path
//!
//! The defences are stored type-erased (their clocks differ), so the key reaches them as a
//! `&dyn ErasedKey` whose `Hash` impl forwards every write of the key's own `Hash` impl to the
//! primitive's hasher: the primitive sees exactly the writes it would see for the key itself,
//! so an identity charged here and the same identity charged directly by other code share
//! their buckets and counts.

use super::key::KeyExtractor;
use super::response::{ceil_secs, AdmitRefused, RateState};
use super::MissingKeyPolicy;
use crate::clock::Clock;
use crate::fairness::{OwnedPermit, Quotas};
use crate::limiter::{Limiter, LimiterRefused};
use crate::quota::{RateLimit, VolumeExceeded};
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

/// The keyed limiter, one class of it, whatever its clock.
pub(super) trait RateDefence: Send + Sync {
    fn try_acquire(&self, key: &dyn ErasedKey) -> Result<(), LimiterRefused>;
    /// The identity's bucket after the charge, for the rate-limit header fields.
    fn state(&self, key: &dyn ErasedKey) -> Option<RateState>;
}

/// A limiter and the class the layer charges.
pub(super) struct LimiterClass<C: Clock> {
    pub(super) limiter: Arc<Limiter<C>>,
    pub(super) class: usize,
}

impl<C: Clock + Send + Sync> RateDefence for LimiterClass<C> {
    fn try_acquire(&self, key: &dyn ErasedKey) -> Result<(), LimiterRefused> {
        self.limiter.try_acquire(key, self.class).map(|_| ())
    }

    fn state(&self, key: &dyn ErasedKey) -> Option<RateState> {
        let config = self.limiter.config(self.class)?;
        let burst = config.burst();
        // A peek for the whole burst: how many tokens are left, and when the bucket is full.
        let peek = self
            .limiter
            .peek_at(key, self.class, burst, self.limiter.clock().now_ns())
            .ok()?;
        let span = config.refill_interval().checked_mul(burst)?;
        Some(RateState {
            quota: burst,
            window_secs: ceil_secs(span).max(1),
            remaining: peek.available(),
            reset_secs: ceil_secs(peek.wait()),
        })
    }
}

/// The volume quota, whatever its clock.
pub(super) trait VolumeDefence: Send + Sync {
    fn try_acquire(&self, key: &dyn ErasedKey, bytes: u64) -> Result<(), VolumeExceeded>;
}

impl<C: Clock + Send + Sync> VolumeDefence for Arc<RateLimit<C>> {
    fn try_acquire(&self, key: &dyn ErasedKey, bytes: u64) -> Result<(), VolumeExceeded> {
        RateLimit::try_acquire(self, key, bytes)
    }
}

/// Everything the layer decides with, shared by every clone of the layer and its services.
pub(super) struct Shared<X> {
    pub(super) key: X,
    pub(super) in_flight: Option<Quotas>,
    pub(super) rate: Option<Box<dyn RateDefence>>,
    pub(super) volume: Option<Box<dyn VolumeDefence>>,
    pub(super) missing_key: MissingKeyPolicy,
    pub(super) rate_limit_headers: bool,
    pub(super) on_refusal: Option<super::OnRefusal>,
}

/// What the layer decided for one request.
pub(super) struct Decision {
    /// Admitted (holding the in-flight place, if that defence is on), or why not.
    pub(super) verdict: Result<Option<OwnedPermit>, AdmitRefused>,
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
    ) -> Result<Option<OwnedPermit>, AdmitRefused> {
        let bytes = match self.volume {
            Some(_) => content_length(request)?,
            None => 0,
        };
        let permit = match &self.in_flight {
            Some(quotas) => Some(
                quotas
                    .try_acquire_owned(key)
                    .map_err(AdmitRefused::InFlight)?,
            ),
            None => None,
        };
        // From here a refusal returns early and drops `permit`, giving its place back.
        if let Some(limiter) = &self.rate {
            let charged = limiter.try_acquire(key);
            if self.rate_limit_headers {
                *rate = limiter.state(key);
            }
            charged.map_err(AdmitRefused::Limiter)?;
        }
        if let Some(volume) = &self.volume {
            volume
                .try_acquire(key, bytes)
                .map_err(AdmitRefused::Volume)?;
        }
        Ok(permit)
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
