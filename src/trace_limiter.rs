//! What a limiter refusal event reports, read from [`Limited`].
//!
//! These lines belong beside `Limited` in `src/limiter/outcome.rs`, like the fairness and
//! quota impls beside theirs; they live here only until they move there. Neither `limiter`
//! nor `trace` imports this module, so it closes no circle.

use crate::limiter::Limited;
use std::time::Duration;

impl crate::trace::RateRefusal for Limited {
    fn class(&self) -> usize {
        self.class
    }

    fn wait(&self) -> Duration {
        self.empty.wait()
    }

    fn via_overflow(&self) -> bool {
        self.overflow
    }
}
