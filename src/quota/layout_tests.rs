//! The layout measurement behind `docs/quota.md`: how often an innocent actor finds every one
//! of its four buckets held by an actor at its limit, for the layout the quota uses (one
//! bucket in each of four rows, so four cache lines) and for blocked layouts that put an
//! actor's buckets in one or two cache lines, all at the same memory.
//!
//! With a limit of one event and conservative update, a heavy actor's one charge raises every
//! one of its buckets to 1, and an innocent actor is refused exactly when each of its buckets
//! holds 1: so "refused" is "every bucket marked by some heavy actor". The marking model below
//! is checked equal, refusal for refusal, to the quota itself for the layout it uses
//! ([`the_marking_model_is_the_quota_itself`]), and then run for the blocked candidates, whose
//! bucket choices exist only here.

use super::shards::Shards;
use super::tests::{pct, quota, simulate};
use super::{RateLimit, BUCKETS};
use crate::clock::ManualClock;
use rand::{Rng, SeedableRng};

/// Buckets in one 64-byte cache line (a bucket is one `AtomicU64`).
const PER_LINE: usize = 8;

/// Where an actor's four buckets lie.
#[derive(Clone, Copy, Debug)]
enum Layout {
    /// The quota's: row `r` of four is its own quarter of the array, and the bucket in it is
    /// hash bits `14r .. 14r + 14` (four lines).
    Rows,
    /// One line picked by the hash; row `r` takes bucket `2r` or `2r + 1` of it.
    LinePairs,
    /// One line picked by the hash; four distinct buckets of its eight, one of the 70 sets.
    LineFourOfEight,
    /// Two lines picked by the hash; two distinct buckets of each (one of 28 pairs).
    TwoLines,
}

/// The `k`-element subsets of `0..8`, as bucket offsets in a line.
fn subsets(k: u32) -> Vec<Vec<usize>> {
    (0u32..256)
        .filter(|m| m.count_ones() == k)
        .map(|m| (0..8).filter(|b| m >> b & 1 == 1).collect())
        .collect()
}

/// The buckets a layout gives the actor hashed to `hash`, in an array of `buckets`.
fn cells(layout: Layout, shards: &Shards, hash: u64, buckets: usize, sets: &Sets) -> Vec<usize> {
    let lines = buckets / PER_LINE;
    let line = |bits: u64| (bits as usize % lines) * PER_LINE;
    match layout {
        Layout::Rows => (0..4).map(|row| shards.index(hash, row)).collect(),
        Layout::LinePairs => {
            let base = line(hash);
            (0..4)
                .map(|r| base + 2 * r + (hash >> (40 + r)) as usize % 2)
                .collect()
        }
        Layout::LineFourOfEight => {
            let base = line(hash);
            let set = &sets.four[(hash >> 40) as usize % sets.four.len()];
            set.iter().map(|b| base + b).collect()
        }
        Layout::TwoLines => {
            let (a, b) = (line(hash), line(hash >> 20));
            let first = &sets.two[(hash >> 40) as usize % sets.two.len()];
            let second = &sets.two[(hash >> 52) as usize % sets.two.len()];
            let mut out: Vec<usize> = first.iter().map(|o| a + o).collect();
            out.extend(second.iter().map(|o| b + o));
            out
        }
    }
}

/// The 70 sets of four and the 28 pairs of a line's eight buckets.
struct Sets {
    four: Vec<Vec<usize>>,
    two: Vec<Vec<usize>>,
}

/// The refused fraction under `layout` over `buckets` buckets: `trials` key draws, `k` heavy
/// actors at their limit in each, `probes` fresh actors asked. Keys and names are drawn as
/// [`simulate`] draws them for four rows, so that for [`Layout::Rows`] at `BUCKETS` the two
/// measure the same actors under the same keys.
fn marked(layout: Layout, buckets: usize, k: usize, trials: u64, probes: usize) -> f64 {
    let sets = Sets {
        four: subsets(4),
        two: subsets(2),
    };
    // The quota's own rows exist only at its own size.
    assert!(buckets == BUCKETS || !matches!(layout, Layout::Rows));
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x0051_07a5 + 4 * 1_000 + k as u64);
    // The quota's hash (its keys, its derivation); the width only matters to `Layout::Rows`.
    let width_bits = (BUCKETS / 4).trailing_zeros();
    let mut refused = 0usize;
    for trial in 0..trials {
        let shards = Shards::new(4, width_bits, (rng.random(), rng.random()));
        let mut full = vec![false; buckets];
        for j in 0..k {
            let hash = shards.hash(&format!("heavy-{trial}-{j}"));
            for c in cells(layout, &shards, hash, buckets, &sets) {
                full[c] = true;
            }
        }
        refused += (0..probes)
            .filter(|p| {
                let hash = shards.hash(&format!("innocent-{trial}-{p}"));
                cells(layout, &shards, hash, buckets, &sets)
                    .into_iter()
                    .all(|c| full.get(c).copied().unwrap_or(false))
            })
            .count();
    }
    refused as f64 / (trials as usize * probes) as f64
}

#[test]
fn the_marking_model_is_the_quota_itself() {
    if cfg!(miri) {
        return;
    }
    // Same keys, same names: the model must refuse exactly the actors the quota refuses.
    let k = 8_192;
    let (trials, probes) = (2, 5_000);
    let model = marked(Layout::Rows, BUCKETS, k, trials, probes);
    let real = simulate(4, k, trials, probes);
    assert!(model > 0.0, "the table would compare nothing");
    assert_eq!(model, real, "model {model}, quota {real}");
    // And the model's buckets are the quota's.
    let q = RateLimit::with_geometry(quota(1, 1, 4), BUCKETS, (7, 9), ManualClock::new()).unwrap();
    let shards = Shards::new(4, (BUCKETS / 4).trailing_zeros(), (7, 9));
    let sets = Sets {
        four: subsets(4),
        two: subsets(2),
    };
    for name in ["a", "actor-7", "innocent-0-1"] {
        let want = q.bucket_indexes(name);
        let got = cells(Layout::Rows, &shards, shards.hash(name), BUCKETS, &sets);
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn blocking_refuses_more_innocents_at_equal_memory() {
    if cfg!(miri) {
        return;
    }
    // 2,000 heavy actors: today's layout refuses about 0.005 % of innocents; an actor's four
    // buckets in one line share their fate with the line's other actors, about 25 % of lines
    // hold a heavy one, and the rate rises by two orders of magnitude.
    let k = 2_000;
    let rows = marked(Layout::Rows, BUCKETS, k, 1, 40_000);
    for layout in [Layout::LinePairs, Layout::LineFourOfEight] {
        let blocked = marked(layout, BUCKETS, k, 1, 40_000);
        assert!(
            blocked > 20.0 * rows.max(1.0 / 40_000.0),
            "{layout:?}: {blocked} against {rows} for rows"
        );
    }
}

/// Prints the layout table in `docs/quota.md`:
/// `cargo test --release --lib quota::layout_tests::layout_table -- --ignored --nocapture`.
#[test]
#[ignore = "prints the layout table for docs/quota.md (about a minute)"]
fn layout_table() {
    let ks = [100, 1_000, 4_096, 10_000, 30_000, 65_536];
    let columns = [
        (Layout::Rows, 1),
        (Layout::LinePairs, 1),
        (Layout::LineFourOfEight, 1),
        (Layout::TwoLines, 1),
        (Layout::LineFourOfEight, 4),
        (Layout::LineFourOfEight, 16),
    ];
    let head: Vec<String> = columns
        .iter()
        .map(|(l, m)| format!("{l:?} × {m}"))
        .collect();
    println!("| k heavy actors | {} |", head.join(" | "));
    println!("|---:|{}", "---:|".repeat(columns.len()));
    for k in ks {
        let row: Vec<String> = columns
            .iter()
            .map(|&(layout, memory)| pct(marked(layout, BUCKETS * memory, k, 8, 100_000)))
            .collect();
        println!("| {k} | {} |", row.join(" | "));
    }
}
