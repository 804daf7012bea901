//! Overflow places by actor: a fixed count-min sketch, so that an actor's ops counted in the
//! shared overflow count are charged against its own quota too.
//!
//! [`ROWS`] rows of `cols` `AtomicU32` cells. An actor's cell in each row comes from the key
//! hash the table already computed (52 bits of SipHash under the table's secret key, spread by a
//! different odd multiplier per row), so no client can aim two names at the same cells. A shared
//! place adds one to the actor's cell in every row and its release takes it away again; the
//! actor's estimate is the smallest of its cells. Every cell counts the actor's own places plus
//! those of any actor hashed to the same cell, so the estimate never under-counts: a collision
//! can only refuse an op early, never admit one over its quota.
//!
//! With the default quota of 32 at most 32 overflow places are held at once; with 256 cells a
//! row, an actor's cell in one row is shared with another holder with probability at most
//! 32/256, in all four rows at most (1/8)^4 ≈ 2.4·10^-4. A larger default quota raises that.

use crate::sync::atomic::{AtomicU32, Ordering};
use crate::table::Key;

/// Rows of the sketch: one cell per row is an actor's.
pub(super) const ROWS: usize = 4;

/// Cells per row by default.
pub(super) const DEFAULT_COLS: usize = 256;

/// One odd multiplier per row (splitmix64's and the golden ratio's constants).
const SPREAD: [u64; ROWS] = [
    0x9E37_79B9_7F4A_7C15,
    0xBF58_476D_1CE4_E5B9,
    0x94D0_49BB_1331_11EB,
    0xD6E8_FEB8_6659_FD93,
];

/// The cells. See the module docs.
#[derive(Debug)]
pub(super) struct Sketch {
    cells: Box<[AtomicU32]>,
    cols: usize,
    /// Rows in use: [`ROWS`], or fewer in a loom model (a smaller state space; the fences the
    /// models check do not depend on how many cells an actor has).
    rows: usize,
    /// `64 - log2(cols)`: multiply-shift keeps the top `log2(cols)` bits.
    shift: u32,
}

impl Sketch {
    /// A zeroed sketch of `cols` cells a row (rounded up to a power of two, at least 1).
    pub(super) fn new(cols: usize) -> Self {
        let cols = cols.max(1).next_power_of_two();
        Self {
            cells: (0..ROWS * cols).map(|_| AtomicU32::new(0)).collect(),
            cols,
            rows: ROWS,
            shift: 64 - cols.trailing_zeros(),
        }
    }

    /// The same sketch using only its first `rows` rows (1 to [`ROWS`]), for loom models.
    #[cfg(any(test, admit_loom, fuzzing))]
    pub(super) fn with_rows(mut self, rows: usize) -> Self {
        self.rows = rows.clamp(1, ROWS);
        self
    }

    /// The index of `key`'s cell in each row, into the flat array.
    pub(super) fn cells(&self, key: &Key) -> [usize; ROWS] {
        let hash = (u64::from(key.tag) << 20) | u64::from(key.fp);
        let mut cells = [0; ROWS];
        for (row, (cell, spread)) in cells.iter_mut().zip(SPREAD).enumerate() {
            // A shift of 64 (one column) would overflow: checked_shr gives column 0 instead.
            let col = hash
                .wrapping_mul(spread)
                .checked_shr(self.shift)
                .unwrap_or(0);
            *cell = row * self.cols + usize::try_from(col).unwrap_or(0);
        }
        cells
    }

    /// Counts one more overflow place of `key`'s actor (a reservation until validated).
    pub(super) fn add(&self, key: &Key) {
        for cell in self.cells(key).into_iter().take(self.rows) {
            if let Some(cell) = self.cells.get(cell) {
                // Relaxed: the caller's SeqCst fence orders this write before its checks, and
                // every checker's fence orders it against theirs (see "Orderings").
                cell.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Takes one overflow place of `key`'s actor away (a release, or a refused reservation).
    pub(super) fn remove(&self, key: &Key) {
        for cell in self.cells(key).into_iter().take(self.rows) {
            if let Some(cell) = self.cells.get(cell) {
                // Release: a checker that reads the lower count (Acquire) and admits an op
                // because of it is ordered after this place was given up.
                cell.fetch_sub(1, Ordering::Release);
            }
        }
    }

    /// At least how many overflow places `key`'s actor holds (or is reserving): the smallest of
    /// its cells.
    pub(super) fn estimate(&self, key: &Key) -> u32 {
        self.cells(key)
            .into_iter()
            .take(self.rows)
            .filter_map(|cell| self.cells.get(cell))
            // Acquire: pairs with `remove`'s Release; called after a SeqCst fence (see
            // "Orderings" in the module docs).
            .map(|cell| cell.load(Ordering::Acquire))
            .min()
            .unwrap_or(0)
    }

    /// Bytes of the cells: fixed at construction.
    pub(super) fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.cells)
    }
}
