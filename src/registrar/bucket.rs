//! [`Bucket`]: which of the two buckets a check point charges.

use std::fmt;

/// One of the two buckets each `(identity, verb)` pair owns: where an invocation is, never
/// what it will turn out to be. Exactly two values, by design (below); exported so that a
/// record layer built on the limited-invocation events can name them.
///
/// # Why the key is `(identity, verb, bucket)` and `bucket` has exactly two values
///
/// Both check points sit before the invocation's intent record is written, because that is
/// the last moment a limiter can still prevent a durable write. At that moment the specific
/// refusal reason is not yet known for anything that gets past input validation, so the key
/// can only describe *where* the invocation is:
///
/// * A pre-derivation refusal is knowable at its check point: that arm is entered only for
///   requests already found malformed (a `service_name` or `host` that is not a DNS label, a
///   component with no multiplicity entry), and the label validation and multiplicity lookup
///   that choose the arm both run before the check point.
/// * The outcome of an invocation that reaches the post-derivation arm is not knowable: a
///   spec conflict, a name collision or a host mismatch is settled by backend work that
///   follows the intent write.
///
/// So two values are the finest split knowable where the limiter is charged. Keying on the
/// outcome class would mean charging after the durable write the limiter exists to prevent,
/// or predicting the outcome. And the key never carries the fine-grained refusal reason: it
/// is unknown at both check points, and a key that varied with it would let a caller multiply
/// its budget simply by varying its refusal.
///
/// What this buys, and what it does not:
/// [the module documentation](super#what-the-two-buckets-guarantee-and-what-they-do-not).
///
/// ```
/// use admit::registrar::{Bucket, RateLimitKey};
///
/// assert_eq!(Bucket::Admission.name(), "admission");
/// assert_eq!(
///     RateLimitKey::of_bucket(Bucket::PredecisionRefusal).map(|k| k.name()),
///     [
///         "rate_limit_predecision_refusal_burst",
///         "rate_limit_predecision_refusal_refill_interval_ms"
///     ]
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Bucket {
    /// The pre-derivation arm: every invocation on it is a refusal by construction, does no
    /// backend work, and is the cheapest thing a caller can make the daemon do. Charged at
    /// check point 1.
    PredecisionRefusal,
    /// Every invocation that reaches the post-derivation arm, and so may reach the backend,
    /// whatever it turns out to be. Charged at check point 2.
    Admission,
}

impl Bucket {
    /// Both buckets, in [`Bucket::index`] order.
    pub const ALL: [Bucket; 2] = [Bucket::PredecisionRefusal, Bucket::Admission];

    /// `0` for [`Bucket::PredecisionRefusal`], `1` for [`Bucket::Admission`]. A verb's two
    /// limiter classes are `verb.index() × 2 + bucket.index()`.
    pub const fn index(self) -> usize {
        match self {
            Bucket::PredecisionRefusal => 0,
            Bucket::Admission => 1,
        }
    }

    /// The name used in configuration keys and logs: `predecision_refusal` or `admission`.
    pub const fn name(self) -> &'static str {
        match self {
            Bucket::PredecisionRefusal => "predecision_refusal",
            Bucket::Admission => "admission",
        }
    }
}

impl fmt::Display for Bucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_lists_each_bucket_at_its_index() {
        for (position, bucket) in Bucket::ALL.iter().enumerate() {
            assert_eq!(bucket.index(), position);
        }
        assert_eq!(Bucket::Admission.to_string(), "admission");
        assert_eq!(
            Bucket::PredecisionRefusal.to_string(),
            "predecision_refusal"
        );
    }
}
