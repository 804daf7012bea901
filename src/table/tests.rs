//! The table's own rules: placement, fingerprints, the window, removal, fixed memory.

use super::*;

/// A value function that adds `by` to the count, for driving the table directly.
fn add(by: u64) -> impl FnMut(u64) -> Verdict<u64> {
    move |v| Verdict::Commit(v + by, v + by)
}

fn table(cap: usize, slots_per_entry: usize, window: usize) -> (Table, KeyHasher) {
    let t = Table::new(Geometry::model(cap, slots_per_entry, window));
    let h = KeyHasher::with_keys(3, 5).for_shape(t.shape());
    (t, h)
}

/// A hasher for the default table of `cap` entries.
fn hasher(keys: Option<(u64, u64)>, cap: usize) -> KeyHasher {
    let h = keys.map_or_else(KeyHasher::random, |(k0, k1)| KeyHasher::with_keys(k0, k1));
    h.for_shape(Geometry::new(cap).shape())
}

fn landed(u: Update<u64>) -> Option<u64> {
    match u {
        Update::Landed { result, .. } => Some(result),
        Update::AtCap | Update::WindowFull => None,
    }
}

#[test]
fn default_memory_is_fixed_and_at_most_32_bytes_per_unit_of_cap() {
    let t = Table::new(Geometry::new(256));
    assert_eq!(t.slots(), 640, "2.5 slots per unit of cap, 80 blocks of 8");
    assert_eq!(t.memory_bytes(), 640 * 8 + 640 * 4);
    for cap in [16, 256, 1000, 4096, 1 << 16, 1 << 20] {
        let shape = Geometry::new(cap).shape();
        let bytes = shape.slots() * 12;
        assert!(bytes <= 32 * cap, "cap {cap}: {bytes} B");
    }
}

#[test]
fn a_key_has_one_entry_and_its_own_value() {
    let (t, h) = table(4, 8, 16);
    let a = h.key(b"a", 0);
    let b = h.key(b"b", 0);
    assert_eq!(landed(t.update(&a, 0, add(1))), Some(1));
    assert_eq!(landed(t.update(&a, 0, add(1))), Some(2));
    assert_eq!(landed(t.update(&b, 0, add(5))), Some(5));
    assert_eq!(t.get(&a), Some(2));
    assert_eq!(t.get(&b), Some(5));
    assert_eq!(t.len(), 2);
}

#[test]
fn the_cap_counts_entries_and_is_never_exceeded() {
    let (t, h) = table(3, 8, 16);
    for i in 0..3u32 {
        assert!(landed(t.update(&h.key(&i.to_le_bytes(), 0), 0, add(1))).is_some());
    }
    assert!(matches!(
        t.update(&h.key(b"late", 0), 0, add(1)),
        Update::AtCap
    ));
    assert_eq!(t.len(), 3);
    // Present keys still update at the cap.
    assert_eq!(
        landed(t.update(&h.key(&0u32.to_le_bytes(), 0), 0, add(1))),
        Some(2)
    );
}

#[test]
fn reclaim_frees_the_entry_and_the_cap() {
    let (t, h) = table(1, 8, 16);
    let a = h.key(b"a", 0);
    assert_eq!(landed(t.update(&a, 0, add(1))), Some(1));
    assert!(matches!(
        t.update(&h.key(b"b", 0), 0, add(1)),
        Update::AtCap
    ));
    assert_eq!(t.reclaim(|v| v == 1), (1, None));
    assert_eq!((t.len(), t.get(&a)), (0, None));
    assert!(landed(t.update(&h.key(b"b", 0), 0, add(1))).is_some());
}

#[test]
fn update_reports_whether_it_inserted() {
    let (t, h) = table(2, 8, 16);
    let a = h.key(b"a", 0);
    let inserted = |u: Update<u64>| matches!(u, Update::Landed { inserted: true, .. });
    assert!(inserted(t.update(&a, 0, add(1))));
    assert!(!inserted(t.update(&a, 0, add(1))));
    let mut sum = 0;
    assert!(!t.any_member(|v| {
        sum += v;
        false
    }));
    assert_eq!(sum, 2);
}

#[test]
fn reclaim_removes_exactly_the_judged_entries_and_reports_the_smallest_kept() {
    let (t, h) = table(8, 8, 16);
    for (i, v) in [5u64, 10, 15, 20].iter().enumerate() {
        t.update(&h.key(&[i as u8], 0), 0, add(*v));
    }
    assert_eq!(t.reclaim(|v| v <= 10), (2, Some(15)));
    assert_eq!(t.len(), 2);
    assert_eq!(t.reclaim(|_| true), (2, None));
    assert_eq!(t.len(), 0);
}

#[test]
fn update_slot_reaches_the_member_it_names_and_nothing_else() {
    let (t, h) = table(4, 8, 16);
    let a = h.key(b"a", 0);
    let Update::Landed { slot, .. } = t.update(&a, 0, add(1)) else {
        panic!("no entry");
    };
    assert_eq!(t.update_slot(slot, &a, add(1)), Some(2));
    let b = h.key(b"b", 0);
    assert_eq!(t.update_slot(slot, &b, add(1)), None, "another key's slot");
    assert_eq!(t.update_slot(usize::MAX, &a, add(1)), None, "out of range");
}

/// Two identities whose 20-bit in-word fingerprints collide are still told apart by the tag:
/// they get separate entries and separate budgets.
#[test]
#[cfg_attr(
    miri,
    ignore = "scale test: minutes under miri; the ordinary run covers it"
)]
fn a_fingerprint_collision_is_resolved_by_the_tag() {
    let (t, h) = table(4, 1, usize::MAX);
    let first = h.key(&0u32.to_le_bytes(), 0);
    let twin = (1u32..)
        .map(|i| h.key(&i.to_le_bytes(), 0))
        .find(|k| k.fp == first.fp && k.tag != first.tag)
        .unwrap();
    assert_eq!(landed(t.update(&first, 0, add(1))), Some(1));
    assert_eq!(landed(t.update(&twin, 0, add(7))), Some(7));
    assert_eq!(t.get(&first), Some(1));
    assert_eq!(t.get(&twin), Some(7));
    assert_eq!(t.len(), 2);
}

/// With a one-slot window, a second key homed on an occupied slot finds its window full even
/// below the cap: the caller is told so (the limiter charges the overflow bucket).
#[test]
fn a_full_window_is_reported_not_overflowed_into_a_neighbour() {
    let (t, h) = table(4, 1, 1);
    let first = h.key(&0u32.to_le_bytes(), 0);
    let neighbour = (1u32..)
        .map(|i| h.key(&i.to_le_bytes(), 0))
        .find(|k| k.home & (t.slots() - 1) == first.home & (t.slots() - 1))
        .unwrap();
    assert!(landed(t.update(&first, 0, add(1))).is_some());
    assert!(matches!(
        t.update(&neighbour, 0, add(1)),
        Update::WindowFull
    ));
    assert_eq!(t.len(), 1, "a failed insert gives its reservation back");
}

/// Many threads inserting and removing overlapping keys: every key ends with at most one
/// member, and `len` matches the members left.
#[test]
fn concurrent_inserts_and_removals_keep_one_member_per_key() {
    let (t, h) = table(16, 8, 16);
    let rounds = if cfg!(miri) { 20 } else { 20_000 };
    std::thread::scope(|s| {
        for thread in 0..4u64 {
            let (t, h) = (&t, &h);
            s.spawn(move || {
                for i in 0..rounds {
                    let key = h.key(&((i + thread) % 24).to_le_bytes(), 0);
                    if (i + thread) % 3 == 0 {
                        t.reclaim(|v| v % 4 == 0);
                    } else {
                        t.update(&key, 0, add(1));
                    }
                }
            });
        }
    });
    let members = (0..24u64)
        .filter(|i| t.get(&h.key(&i.to_le_bytes(), 0)).is_some())
        .count();
    let copies = t
        .words
        .iter()
        .filter(|w| Word(w.load(Ordering::Relaxed)).state() == State::Member)
        .count();
    assert_eq!(copies, members, "a key has two members");
    assert_eq!(t.len(), members);
}

// ------------------------------------------------------------------ keys

mod keys {
    use super::*;

    #[test]
    fn both_blocks_stay_inside_the_table_and_differ() {
        for cap in [1usize, 2, 3, 4, 7, 256, 1000, 1 << 20] {
            let shape = Geometry::new(cap).shape();
            let h = KeyHasher::random().for_shape(shape);
            for i in 0..1000u32 {
                let key = h.key(&i.to_le_bytes(), 0);
                let second = if shape.blocks > 1 {
                    key.second(shape.blocks, shape.block)
                } else {
                    key.home
                };
                assert!(key.home + shape.block <= shape.slots(), "cap {cap}");
                assert!(second + shape.block <= shape.slots(), "cap {cap}");
                assert_eq!(key.home % shape.block, 0);
                assert_eq!(second % shape.block, 0);
                assert_eq!(key.home != second, shape.blocks > 1, "cap {cap}");
            }
        }
    }

    /// The two blocks are spread over the whole table, independently: over many keys every
    /// block is some key's first and some key's second, and the pairs are not tied together.
    #[test]
    fn the_two_blocks_are_spread_independently() {
        let shape = Geometry::new(256).shape();
        let h = KeyHasher::with_keys(11, 13).for_shape(shape);
        let mut first = vec![0u32; shape.blocks];
        let mut second = vec![0u32; shape.blocks];
        let mut same_offset = 0;
        let n = 80_000u32;
        for i in 0..n {
            let key = h.key(&i, 0);
            let other = key.second(shape.blocks, shape.block);
            first[key.home / shape.block] += 1;
            second[other / shape.block] += 1;
            let offset = (other + shape.slots() - key.home) % shape.slots();
            same_offset += u32::from(offset == shape.block);
        }
        // 1,000 keys a block on average: every block within ±20 % of it.
        for counts in [&first, &second] {
            assert!(
                counts.iter().all(|&c| (800..1200).contains(&c)),
                "{counts:?}"
            );
        }
        // The second block one after the first: 1 in 80 by chance, plus the 1 in 80 that fell
        // on the first and were moved on: about 2,000, nowhere near a fixed pairing.
        assert!((1_500..2_500).contains(&same_offset), "{same_offset}");
    }

    #[test]
    fn the_class_is_part_of_the_key() {
        let h = hasher(None, 256);
        assert_ne!(h.key(b"alice", 0), h.key(b"alice", 1));
        assert_eq!(h.key(b"alice", 1), h.key(b"alice", 1));
    }

    #[test]
    fn two_tables_place_a_name_differently() {
        // With random keys per table, the same identity's hash differs between tables.
        let a = hasher(None, 1 << 16);
        let b = hasher(None, 1 << 16);
        let same = (0..64u32)
            .filter(|i| a.key(&i.to_le_bytes(), 0) == b.key(&i.to_le_bytes(), 0))
            .count();
        assert_eq!(same, 0);
    }

    #[test]
    fn a_str_and_its_bytes_are_different_identities() {
        // `Hash` is typed: a `str` ends with 0xFF, a `[u8]` starts with its length. A server
        // must key one identity with one kind of type everywhere.
        let h = hasher(Some((1, 2)), 256);
        let as_str = h.key("alice", 0);
        let as_slice = h.key(&b"alice"[..], 0);
        assert_ne!(as_str, as_slice);
        // Within a kind, however it is held: an array and a `Vec` hash as their slice, a
        // `String` as its `str`.
        assert_eq!(as_slice, h.key(b"alice", 0));
        assert_eq!(as_slice, h.key(&b"alice".to_vec(), 0));
        assert_eq!(as_str, h.key(&String::from("alice"), 0));
        assert_eq!(as_str, h.key(String::from("alice").as_str(), 0));
        // A number is its own kind: its bytes as a slice are another identity.
        assert_ne!(h.key(&7u64, 0), h.key(&7u64.to_le_bytes(), 0));
        // So is a hash computed once and split later.
        assert_eq!(as_str, h.key_of_hash(h.hash("alice", 0)));
    }

    #[test]
    fn identities_are_opaque_bytes() {
        // Not normalised: case, whitespace and trailing NULs all make distinct keys.
        let h = hasher(Some((1, 2)), 256);
        let keys = [&b"host-a"[..], b"HOST-A", b"host-a ", b"host-a\0"].map(|id| h.key(id, 0));
        for (i, a) in keys.iter().enumerate() {
            for b in keys.iter().skip(i + 1) {
                assert_ne!(a, b);
            }
        }
    }
}

// ------------------------------------------------------------- slot words

mod words {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn empty_is_all_zero() {
        assert_eq!(Word::EMPTY.0, 0);
        assert_eq!(Word::EMPTY.state(), State::Empty);
    }

    #[test]
    fn a_claim_starts_a_new_generation_and_emptying_keeps_it() {
        let member = Word::new(State::Member, 7, 0xAB, 123);
        let empty = member.emptied();
        assert_eq!(
            (empty.state(), empty.gen(), empty.value()),
            (State::Empty, 7, 0)
        );
        let next = empty.claimed_by(0xAB);
        assert_eq!(
            (next.state(), next.gen(), next.fp()),
            (State::Owned, 8, 0xAB)
        );
        // The same key, value and state one incarnation later is a different word.
        assert_ne!(next.with_state(State::Member).with_value(123), member);
        let last = Word::new(State::Empty, GEN_MASK, 0, 0).claimed_by(1);
        assert_eq!(last.gen(), 0, "the generation wraps within its field");
    }

    proptest! {
        #![proptest_config(crate::check::proptest_config(256))]

        /// Every field round-trips and no field bleeds into another.
        #[test]
        fn fields_round_trip(state in 0u8..4, gen in any::<u32>(), fp in any::<u32>(), value in 0u64..=VALUE_MASK) {
            let state = match state { 0 => State::Empty, 1 => State::Owned, 2 => State::Inserting, _ => State::Member };
            let w = Word::new(state, gen, fp, value);
            prop_assert_eq!(w.state(), state);
            prop_assert_eq!(w.gen(), gen & GEN_MASK);
            prop_assert_eq!(w.fp(), fp & FP_MASK);
            prop_assert_eq!(w.value(), value);
            let v2 = value ^ 1;
            prop_assert_eq!(w.with_value(v2).state(), state);
            prop_assert_eq!(w.with_value(v2).fp(), fp & FP_MASK);
            prop_assert_eq!(w.with_state(State::Member).value(), value);
        }
    }
}

/// An insert takes a slot in whichever of its two blocks has more free slots (the first on
/// a tie), which keeps blocks level: the window-full probability in `docs/design.md` rests on
/// it.
#[test]
fn an_insert_goes_to_the_emptier_block() {
    let (t, h) = table(64, 2, 8);
    let fill = |slot: usize| {
        let word = Word::new(State::Member, 1, 0xEE, 0);
        t.words[slot].store(word.0, Ordering::Relaxed);
    };
    let block_of = |slot: usize| slot / 4;
    // A tie: the first block.
    let a = h.key(b"a", 0);
    let Update::Landed { slot, .. } = t.update(&a, 0, add(1)) else {
        panic!("no entry");
    };
    assert_eq!(block_of(slot), block_of(a.home));
    // `b`'s first block fuller than its second: the second.
    let b = (0u32..)
        .map(|i| h.key(&i, 0))
        .find(|k| {
            [k.home, t.second(k)]
                .iter()
                .all(|&s| block_of(s) != block_of(a.home))
        })
        .unwrap();
    fill(b.home);
    fill(b.home + 1);
    let Update::Landed { slot, .. } = t.update(&b, 0, add(1)) else {
        panic!("no entry");
    };
    assert_eq!(block_of(slot), block_of(t.second(&b)));
    // `c`'s second block fuller: the first.
    let c = (0u32..)
        .map(|i| h.key(&i, 1))
        .find(|k| {
            [k.home, t.second(k)].iter().all(|&s| {
                ![a.home, b.home, t.second(&b)]
                    .map(block_of)
                    .contains(&block_of(s))
            })
        })
        .unwrap();
    fill(t.second(&c));
    let Update::Landed { slot, .. } = t.update(&c, 0, add(1)) else {
        panic!("no entry");
    };
    assert_eq!(block_of(slot), block_of(c.home));
}

/// The window-full probability of `docs/design.md` §2 on the real table: a full default-shaped
/// table of 4,096 entries, churned (a random live entry removed, a new key inserted) 200,000
/// times, never finds a window full (about 10^-19 per insert). With one choice (its first block
/// only) the same run found a window full after 2,309 inserts, before the table was full.
#[test]
#[cfg_attr(miri, ignore = "scale test: the ordinary run covers it")]
fn a_saturated_table_under_churn_never_finds_a_window_full() {
    let cap = 4096;
    let t = Table::new(Geometry::new(cap));
    let h = KeyHasher::with_keys(17, 19).for_shape(t.shape());
    let mut live: Vec<usize> = Vec::with_capacity(cap);
    let mut next = 0u64;
    let mut insert = |live: &mut Vec<usize>| {
        next += 1;
        match t.update(&h.key(&next, 0), 0, add(1)) {
            Update::Landed { slot, .. } => live.push(slot),
            Update::AtCap => panic!("at the cap with {} live", live.len()),
            Update::WindowFull => panic!("a window full after {next} inserts"),
        }
    };
    while live.len() < cap {
        insert(&mut live);
    }
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..200_000 {
        // xorshift: which live entry leaves.
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let slot = live.swap_remove((rng % live.len() as u64) as usize);
        let word = Word(t.words[slot].load(Ordering::Relaxed));
        t.words[slot].store(word.emptied().0, Ordering::Relaxed);
        t.release();
        insert(&mut live);
    }
    assert_eq!(t.len(), cap);
}
