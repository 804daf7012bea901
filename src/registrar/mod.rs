//! The registrar profile: two token buckets per (client identity, verb), charged at the two
//! check points of a registrar verb layer, before any durable write.
//!
//! A registrar records every verb invocation, refusals included. That closes a detection gap
//! and opens a resource one: without a limit, a compromised caller can flood refused
//! invocations and grow the record store until the disk is full, and a full disk stops every
//! mint (and can stop the backend serving renewals). The cheapest refusals are the ones
//! rejected before any backend work, so the flood path is also the free path. This profile
//! bounds the rate.
//!
//! # The two check points
//!
//! A verb has two arms. Each check point sits at its arm's entry, before the invocation's
//! intent record is written: a limiter that ran after the intent write could not suppress the
//! record it exists to suppress.
//!
//! ```text
//!  request ── classify ─┬─ malformed ─► pre-derivation arm
//!                       │                 check point 1: enter_predecision (PredecisionRefusal)
//!                       │                   Records::Write → intent, checks, outcome, refusal
//!                       │                   Records::Skip  → event, checks, refusal
//!                       │
//!                       └─ derivable ─► post-derivation arm
//!                                         check point 2: enter_admission (Admission)
//!                                           Admitted  → intent, backend, outcome, its answer
//!                                           Throttled → event, RegistrarBusy { retry_after }
//! ```
//!
//! * **Check point 1** ([`RegistrarLimiter::enter_predecision`]) charges
//!   [`Bucket::PredecisionRefusal`]. With a token the arm proceeds as usual: intent, checks,
//!   outcome. Without one the arm skips both record writes, one limited-invocation event is
//!   emitted, and the arm still runs its checks (pure input validation, no I/O) and returns
//!   its real, permanent refusal. It never returns the throttle.
//! * **Check point 2** ([`RegistrarLimiter::enter_admission`]) charges [`Bucket::Admission`].
//!   Without a token the invocation is not attempted at all: the caller gets the typed,
//!   retryable [`RegistrarError::RegistrarBusy`], no intent and no outcome are written, no
//!   backend work is done, and one event is emitted.
//!
//! An invocation is *limited* when a check point suppressed its records (both check points
//! can) and *throttled* when it was limited at check point 2 and so received the throttle.
//! Every throttled invocation is limited; the reverse does not hold.
//!
//! Each check point takes its decision and releases it before returning: no lock, nothing
//! held across the intent write, the backend call or the outcome write.
//!
//! # The bucket key
//!
//! `(client identity, verb, bucket)`, where [`Bucket`] has exactly two values: two verbs × two
//! buckets is four buckets per identity. The two values are where the invocation is, which is
//! the finest split knowable at a point before the intent write ([why][key-why]). The
//! fine-grained refusal reason is never part of a key.
//!
//! [key-why]: Bucket#why-the-key-is-identity-verb-bucket-and-bucket-has-exactly-two-values
//!
//! The identity is the opaque value the verb layer carries into every invocation, used as
//! given: never parsed or normalised. It must be stable for one caller across connections. A
//! bucket is created full on its key's first use, so an identity that varies per connection
//! (a peer-credential string that includes the connecting pid, say) gives every reconnect a
//! fresh budget, which defeats the limiter and churns the entry table.
//!
//! # What the two buckets guarantee, and what they do not
//!
//! A flood on the pre-derivation arm cannot consume admission budget: the path an attacker
//! can drive for free, with no valid input and no backend cost, cannot starve legitimate
//! mints. That is the isolation this design buys, and it covers the cheapest refusal there is
//! (`ServiceInstanceMismatch`, both of whose causes are pre-derivation).
//!
//! A caller that can produce well-formed, derivable requests can still spend admission budget
//! with invocations that end in refusal, because at admission nothing distinguishes them from
//! a real mint. That path is bounded by the attacker's cost (every attempt spends backend work
//! as well as a token), not isolated from legitimate mints. Bounding it more tightly would
//! mean classifying the outcome before the intent write, which the record ordering forbids.
//!
//! # Buckets, memory and restarts
//!
//! The buckets are the keyed [`Limiter`](crate::limiter::Limiter)'s, with its rules unchanged:
//! token buckets (one token per refill interval, capped at the burst, from a monotonic clock,
//! so a wall-clock step mints nothing and a boundary never yields two bursts back to back),
//! created full and lazily, held in memory only; an entry table capped at
//! [`REFERENCE_CAP`] = 256 entries (the reference 64 identities ×
//! 4 buckets), which reclaims only entries at their full burst; and one overflow bucket per
//! (verb, bucket), sized like that bucket's entries, which pays for a new key while the table
//! is full of drained entries, so nothing is ever admitted unlimited. In that degraded state
//! identities without an entry share the overflow buckets, so one caller's flood can throttle
//! another: bounded, not unlimited, and unreachable unless identities are unstable.
//!
//! Nothing is persisted: restarting the daemon starts every bucket full again. Restarting
//! needs root on the registrar's host, which is outside what this limiter defends against,
//! and durable limiter state would have to live on the very store it protects.
//!
//! # Files
//!
//! [`Bucket`] (`bucket.rs`), [`Verb`] (`verb.rs`), the sink (`sink.rs`), the outcome surface
//! (`outcome.rs`), the check points (`checkpoint.rs`), the builder (`builder.rs`), the four
//! keys (`config/`), and [`sizing`].

mod bucket;
mod builder;
mod checkpoint;
mod config;
#[cfg(feature = "metrics")]
pub(crate) mod metrics_sink;
mod outcome;
mod sink;
pub mod sizing;
#[cfg(test)]
mod tests;
mod verb;

pub use bucket::Bucket;

/// The registrar profile's default cap on live bucket entries: 256, the reference
/// deployment's 64 identities × 4 buckets (a general [`Limiter`](crate::Limiter) defaults to
/// [`DEFAULT_CAP`](crate::DEFAULT_CAP)).
///
/// ```
/// assert_eq!(admit::registrar::REFERENCE_CAP, 64 * 4);
/// ```
pub const REFERENCE_CAP: usize = 256;
pub use builder::{RegistrarBuildError, RegistrarBuilder};
pub use checkpoint::{Admitted, Records, RegistrarLimiter, Throttled};
#[cfg(feature = "config")]
pub use config::LoadedRegistrar;
pub use config::{RateLimitKey, RegistrarConfig, RegistrarConfigError, ValueProblem};
pub use outcome::{MismatchCause, RegistrarError, RetryAfter, UnavailableReason};
pub use sink::{CountingSink, LimitedCounts, LimitedEvent, LimitedSink, NoopSink};
pub use sizing::{size_wave, WaveSizing};
pub use verb::{Verb, VerbSetError};
