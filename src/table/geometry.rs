//! The shape of a table: its cap, how many slots per unit of cap, and the blocks a key may live
//! in.
//!
//! Slots come in blocks of [`BLOCK`] (one 64-byte line of slot words). A key may live in two
//! blocks, its *window*: the first and the second block its hash names (see "Keys" in
//! [`crate::table`]). An insert takes a free slot in whichever of the two holds fewer entries,
//! so blocks stay level, and a window is full only if both of its blocks are: at 2.5 slots per
//! unit of cap that is about 10^-19 per insert at saturation (`docs/design.md` §2, "Window
//! full").

/// Largest cap a table accepts: 2^20 entries (2.5 Mi slots, 30 MiB).
pub(crate) const MAX_CAP: usize = 1 << 20;
/// Slots a table has per unit of cap, in halves: 5, that is 2.5 slots (30 bytes) per entry.
pub(crate) const HALF_SLOTS_PER_ENTRY: usize = 5;
/// Slots in a block: eight 8-byte words, one cache line.
pub(crate) const BLOCK: usize = 8;
/// Blocks a key may live in.
pub(crate) const CHOICES: usize = 2;
/// Whole slots per entry the reference checks use for a window of their choosing: the default
/// 2.5, rounded up.
#[cfg(any(test, fuzzing))]
pub(crate) const MODEL_SLOTS_PER_ENTRY: usize = 3;

/// The shape a table is built with. Only tests and loom models change the last three numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Geometry {
    pub(crate) cap: usize,
    pub(crate) half_slots_per_entry: usize,
    pub(crate) block: usize,
    pub(crate) choices: usize,
}

/// Where a built table's keys may live: `blocks` blocks of `block` slots each, a key's window
/// being `choices` of them (one when the table has only one block).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shape {
    pub(crate) blocks: usize,
    pub(crate) block: usize,
    pub(crate) choices: usize,
}

impl Geometry {
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            cap,
            half_slots_per_entry: HALF_SLOTS_PER_ENTRY,
            block: BLOCK,
            choices: CHOICES,
        }
    }

    /// The shape the loom models and reference checks ask for: `slots_per_entry` slots per
    /// unit of cap, and a window of `window` slots: two blocks of `window / 2`, or a single
    /// one-slot block for a window of 1. A window wider than the table is the whole table.
    #[cfg(any(test, admit_loom, fuzzing))]
    pub(crate) fn model(cap: usize, slots_per_entry: usize, window: usize) -> Self {
        let (block, choices) = if window <= 1 { (1, 1) } else { (window / 2, 2) };
        Self {
            cap,
            half_slots_per_entry: slots_per_entry.max(1).saturating_mul(2),
            block,
            choices,
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

    /// The blocks: `cap × half_slots_per_entry / 2` slots rounded up to whole blocks, a block
    /// never wider than the table. The caller validated `cap <= MAX_CAP`, so nothing here can
    /// overflow.
    pub(crate) fn shape(&self) -> Shape {
        let wanted = self
            .cap
            .saturating_mul(self.half_slots_per_entry.max(1))
            .div_ceil(2)
            .max(1);
        let block = self.block.clamp(1, wanted);
        Shape {
            blocks: wanted.div_ceil(block),
            block,
            choices: self.choices.max(1),
        }
    }
}

impl Shape {
    /// Slots in the table.
    pub(crate) fn slots(&self) -> usize {
        self.blocks.saturating_mul(self.block)
    }

    /// Blocks a key may live in: `choices`, or fewer when the table has fewer blocks.
    pub(crate) fn window_blocks(&self) -> usize {
        self.choices.min(self.blocks).clamp(1, 2)
    }

    /// Slots a key may live in.
    pub(crate) fn window(&self) -> usize {
        self.block.saturating_mul(self.window_blocks())
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
