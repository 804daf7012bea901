//! What an acquire counted, beside the place it took: nothing for the plain acquire, or the
//! actor's places for the IETF `RateLimit` fields (read off the acquire's own CAS, or the
//! sketch's estimate for an overflow place, never by a second look at the table).
//!
//! The acquire is generic over what it counts ([`Count`]): the plain acquire counts `()`,
//! which carries no value and computes none, so it compiles to the code it had before this
//! counting existed; only the layer's acquire with the fields on counts [`Places`].

/// What an acquire reports beside its place.
pub(super) trait Count: Copy {
    /// The actor holds `held` places (this one included) under its quota `quota`.
    fn of(held: u64, quota: u32) -> Self;
    /// The actor's quota is unlimited: it holds no place to count.
    fn unlimited() -> Self;
}

/// The plain acquire: nothing counted.
impl Count for () {
    #[inline(always)]
    fn of(_held: u64, _quota: u32) {}

    #[inline(always)]
    fn unlimited() {}
}

/// The actor's places as its acquire counted them, once this one was taken: what the CAS
/// that took it wrote (with the actor's overflow places, if its entry was dirty), or the
/// sketch's estimate for an overflow place.
#[cfg(feature = "tower")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Places {
    /// Places held, this one included.
    pub(crate) held: u32,
    /// The actor's quota.
    pub(crate) quota: u32,
}

#[cfg(feature = "tower")]
impl From<(u32, u32)> for Places {
    /// From (places held, quota).
    fn from((held, quota): (u32, u32)) -> Self {
        Self { held, quota }
    }
}

/// The counting acquire: the places, `None` for an unlimited actor. A shadow admission
/// (enforcement would have refused) counts its quota as full.
#[cfg(feature = "tower")]
impl Count for Option<Places> {
    #[inline(always)]
    fn of(held: u64, quota: u32) -> Self {
        Some(Places {
            held: u32::try_from(held).unwrap_or(u32::MAX),
            quota,
        })
    }

    #[inline(always)]
    fn unlimited() -> Self {
        None
    }
}
