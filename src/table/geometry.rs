//! The shape of a table: its cap, how many slots per unit of cap, and the probe window.

/// Largest cap a table accepts: 2^20 entries (8 Mi slots, 96 MiB).
pub(crate) const MAX_CAP: usize = 1 << 20;
/// Slots per entry of cap, before rounding up to a power of two.
pub(crate) const SLOTS_PER_ENTRY: usize = 8;
/// Slots a key may live in, starting at its home.
pub(crate) const WINDOW: usize = 16;

/// The shape of a table. Only tests and loom models change the last two numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Geometry {
    pub(crate) cap: usize,
    pub(crate) slots_per_entry: usize,
    pub(crate) window: usize,
}

impl Geometry {
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            cap,
            slots_per_entry: SLOTS_PER_ENTRY,
            window: WINDOW,
        }
    }

    /// Checks the cap every primitive's builder takes: at least one entry, at most
    /// [`MAX_CAP`]. Each builder names the problem in its own config error.
    pub(crate) fn validate(&self) -> Result<(), CapProblem> {
        if self.cap == 0 {
            Err(CapProblem::Zero)
        } else if self.cap > MAX_CAP {
            Err(CapProblem::TooLarge)
        } else {
            Ok(())
        }
    }

    /// Total slots: `cap × slots_per_entry` rounded up to a power of two. The caller
    /// validated `cap <= MAX_CAP`, so this cannot overflow.
    pub(crate) fn slots(&self) -> usize {
        self.cap
            .saturating_mul(self.slots_per_entry.max(1))
            .max(1)
            .next_power_of_two()
    }
}

/// Why a cap was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CapProblem {
    /// No entry could ever be made.
    Zero,
    /// Above [`MAX_CAP`].
    TooLarge,
}
