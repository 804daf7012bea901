//! The reference limiter: a `HashMap` of reference buckets under the cap rules, written out.

use crate::check::bucket::{RefBucket, RefTake};
use std::collections::HashMap;

const MS_128: u128 = 1_000_000;

/// A grant of the reference limiter: whose, which bucket paid, and what the take left.
#[derive(Debug, Clone, Copy)]
pub struct RefGrant {
    pub(super) id: u32,
    class: u8,
    overflow: bool,
    grant: crate::check::bucket::RefGrant,
    /// The class as the take found it: how many changes it had had, its burst and its
    /// interval. A refund is void once it differs.
    stamp: (u64, u32, u32),
}

/// What a charge answered, in the reference's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Granted { overflow: bool },
    Limited { overflow: bool, wait_ns: u128 },
    Invalid,
}

/// The reference limiter.
pub struct RefLimiter {
    cap: usize,
    configs: Vec<(u32, u32)>,
    entries: HashMap<(u32, u8), RefBucket>,
    overflow: Vec<RefBucket>,
    pub overflow_charges: Vec<u64>,
    /// The latest tick at which a reclaim removed an entry: fresh entries are full from it on,
    /// not from the beginning of time.
    floor: u128,
    /// Nanoseconds per tick: a millisecond, or a microsecond for a limiter with a fine class.
    tick_ns: u128,
    /// In microseconds, the current epoch's base (`limiter::epoch`): a decision whose reading
    /// is more than an epoch past it moves it to its reading and raises every entry's
    /// `full_at` to it; every entry a charge lands on is raised to it.
    epoch_base: Option<u128>,
    /// How many times each class was changed (its era is the parity).
    changes: Vec<u64>,
    /// The longest debt each class's configs so far allow, in ticks (`bucket::debt`).
    longest: Vec<u128>,
}

impl RefLimiter {
    pub fn new(cap: usize, configs: &[(u32, u32)]) -> Self {
        Self {
            cap,
            configs: configs.to_vec(),
            entries: HashMap::new(),
            overflow: configs.iter().map(|&(b, i)| RefBucket::new(b, i)).collect(),
            overflow_charges: vec![0; configs.len()],
            floor: 0,
            tick_ns: MS_128,
            epoch_base: None,
            changes: vec![0; configs.len()],
            longest: configs
                .iter()
                .map(|&(b, i)| u128::from(b) * u128::from(i))
                .collect(),
        }
    }

    /// A limiter whose configs count microseconds: `(burst, interval in µs)`.
    pub fn new_micros(cap: usize, configs: &[(u32, u32)]) -> Self {
        let mut this = Self::new(cap, configs);
        this.tick_ns = 1_000;
        this.epoch_base = Some(0);
        for bucket in &mut this.overflow {
            *bucket = bucket.clone().in_ticks_of(1_000);
        }
        this
    }

    fn tick(&self, now: u128) -> u128 {
        let max_now = if self.tick_ns == MS_128 {
            u128::from(crate::limiter::MAX_MILLIS_NOW_TICK)
        } else {
            u128::from(crate::clock::tick::MAX_NOW_TICK) * (MS_128 / self.tick_ns)
        };
        (now / self.tick_ns).min(max_now)
    }

    /// In microseconds: moves to a new epoch if `now` is more than one past the base.
    pub(super) fn enter(&mut self, now: u128) {
        let tick = self.tick(now);
        if let Some(base) = self.epoch_base {
            if tick.saturating_sub(base) > u128::from(crate::limiter::EPOCH_TICKS) {
                self.epoch_base = Some(tick);
                for bucket in self.entries.values_mut() {
                    bucket.raise_to(tick);
                }
            }
        }
    }

    fn fresh(&self, burst: u32, interval: u32) -> RefBucket {
        RefBucket::full_from(burst, interval, self.floor).in_ticks_of(self.tick_ns)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// An entry as a decision reads it: in milliseconds a state of 0 is a newborn's code
    /// (a refund at tick 0 of a take at tick 0 writes it), read as full from the floor on.
    fn dated(&self, bucket: &RefBucket) -> RefBucket {
        let mut bucket = bucket.clone();
        if self.epoch_base.is_none() && bucket.holds_zero() {
            bucket.raise_to(self.floor);
        }
        bucket
    }

    fn is_full(&self, bucket: &RefBucket, class: u8, now: u128) -> bool {
        bucket.available(now) == u128::from(self.configs[usize::from(class)].0)
    }

    /// Removes every entry holding its full burst; returns how many.
    pub fn reclaim_full(&mut self, now: u128) -> usize {
        let before = self.entries.len();
        let full: Vec<(u32, u8)> = self
            .entries
            .iter()
            // In milliseconds a state of 0 is a newborn's code (a refund at tick 0 of a take
            // at tick 0 writes it), which a sweep keeps.
            .filter(|(&(_, class), b)| {
                self.is_full(b, class, now) && (self.epoch_base.is_some() || !b.holds_zero())
            })
            .map(|(&k, _)| k)
            .collect();
        if !full.is_empty() {
            self.floor = self.floor.max(self.tick(now));
        }
        for k in full {
            self.entries.remove(&k);
        }
        before - self.entries.len()
    }

    /// The bucket a charge of `(id, class)` lands on, applying the cap rules: `None` means
    /// the class's overflow bucket.
    fn landing(&mut self, id: u32, class: u8, now: u128) -> Option<(u32, u8)> {
        let key = (id, class);
        if self.entries.contains_key(&key) {
            return Some(key);
        }
        if self.entries.len() >= self.cap {
            self.reclaim_full(now);
        }
        if self.entries.len() < self.cap {
            let (b, i) = self.configs[usize::from(class)];
            self.entries.insert(key, self.fresh(b, i));
            return Some(key);
        }
        None
    }

    pub fn charge(&mut self, id: u32, class: u8, n: u32, now: u128) -> Answer {
        self.charge_granting(id, class, n, now).0
    }

    /// [`RefLimiter::charge`], and the grant a refund names (`None` if it took nothing).
    pub fn charge_granting(
        &mut self,
        id: u32,
        class: u8,
        n: u32,
        now: u128,
    ) -> (Answer, Option<RefGrant>) {
        let Some(&(burst, _)) = self.configs.get(usize::from(class)) else {
            return (Answer::Invalid, None);
        };
        if n > burst {
            return (Answer::Invalid, None);
        }
        if n == 0 {
            // No free pass: refused exactly when one token would be, and nothing taken.
            return match self.peek(id, class, 1, now) {
                Some((_, wait_ns, overflow)) if wait_ns > 0 => {
                    (Answer::Limited { overflow, wait_ns }, None)
                }
                _ => (Answer::Granted { overflow: false }, None),
            };
        }
        self.enter(now);
        let base = self.epoch_base;
        let landing = self.landing(id, class, now);
        let overflow = landing.is_none();
        let floor = self.floor;
        let bucket = match landing {
            Some(key) => {
                let bucket = self.entries.get_mut(&key).unwrap();
                if base.is_none() && bucket.holds_zero() {
                    // A newborn's code: dated from the floor, and written so if refused too.
                    bucket.raise_to(floor);
                }
                bucket
            }
            None => {
                self.overflow_charges[usize::from(class)] += 1;
                &mut self.overflow[usize::from(class)]
            }
        };
        let (taken, granted) = bucket.take_granting(n, now);
        if let (Some(base), false) = (base, overflow) {
            bucket.raise_to(base);
        }
        let stamp = self.stamp(class);
        let granted = granted.map(|grant| RefGrant {
            stamp,
            id,
            class,
            overflow,
            grant,
        });
        match taken {
            RefTake::Granted => (Answer::Granted { overflow }, granted),
            RefTake::Empty { wait_ns } => (Answer::Limited { overflow, wait_ns }, None),
            RefTake::ExceedsBurst => (Answer::Invalid, None),
        }
    }

    /// Gives back up to `n` tokens of `grant` at reading `now`: exactly if the bucket it was
    /// paid from is as the grant left it (no take, refund or change since, and not reclaimed),
    /// void otherwise, as the real limiter does. An entry refunded is raised to the epoch base
    /// as any value written in microseconds is.
    /// What a refund compares: how many changes the class has had, its burst and interval.
    /// The limiter compares the class word and the entry's (or overflow word's) era bit; after
    /// any change one of them differs (one change moves the class word; a second brings the
    /// word back but the pass between converted the value to the era between), so any change
    /// since the take voids the refund.
    fn stamp(&self, class: u8) -> (u64, u32, u32) {
        let (burst, interval) = self.configs[usize::from(class)];
        (self.changes[usize::from(class)], burst, interval)
    }

    /// Whether `grant`'s class was changed since its take.
    pub fn changed_since(&self, grant: &RefGrant) -> bool {
        self.stamp(grant.class) != grant.stamp
    }

    /// The tokens given back (0: void, or nothing to give).
    pub fn refund(&mut self, grant: &RefGrant, n: u32, now: u128) -> u32 {
        if n == 0 {
            // Nothing to give back: the real limiter returns before it reads the epoch.
            return 0;
        }
        // A change since the take: void, as in the limiter. An entry's refund enters the epoch
        // of its reading first, void or not.
        let moved = self.stamp(grant.class) != grant.stamp;
        if grant.overflow {
            if moved {
                return 0;
            }
            return self.overflow[usize::from(grant.class)].undo(&grant.grant, n);
        }
        self.enter(now);
        let base = self.epoch_base;
        if moved {
            return 0;
        }
        let Some(bucket) = self.entries.get_mut(&(grant.id, grant.class)) else {
            return 0;
        };
        let given = bucket.undo(&grant.grant, n);
        if given > 0 {
            // Raised to the epoch base as any microsecond value is.
            if let Some(base) = base {
                bucket.raise_to(base);
            }
        }
        given
    }

    /// (available, wait for n, overflow) as a charge would see it; reclaims at the cap first,
    /// like the real peek.
    pub fn peek(&mut self, id: u32, class: u8, n: u32, now: u128) -> Option<(u128, u128, bool)> {
        let &(burst, interval) = self.configs.get(usize::from(class))?;
        if n > burst {
            return None;
        }
        self.enter(now);
        let key = (id, class);
        let (bucket, overflow) = if let Some(b) = self.entries.get(&key) {
            (self.dated(b), false)
        } else if self.entries.len() < self.cap || self.reclaim_full(now) > 0 {
            (self.fresh(burst, interval), false)
        } else {
            (self.overflow[usize::from(class)].clone(), true)
        };
        let wait = bucket.ready_ns(n).map_or(0, |r| r.saturating_sub(now));
        Some((bucket.available(now), wait, overflow))
    }

    /// The longest debt `class` may owe after a change to `burst` per `interval`, or `None`
    /// if the change is refused: carried, it would exceed the unit's longest span
    /// (`bucket::debt`).
    pub fn longest_after(&self, class: u8, burst: u32, interval: u32) -> Option<u128> {
        let c = usize::from(class);
        let old = u128::from(self.configs[c].1);
        super::super::bucket::longest_after(self.longest[c], old, burst, interval, self.tick_ns)
    }

    /// `class`'s limits change with the clock at `now`, counted at reading `at` (one
    /// [`RefLimiter::longest_after`] takes): every bucket of the class (its entries and its
    /// overflow bucket) is converted at once, as a `TokenBucket` is (see
    /// `RefBucket::convert_at`), and the tokens it owes carry over: a full bucket stays full,
    /// and one that owed tokens still owes them all, whatever the new burst. The limiter
    /// counts a faster rate at its frozen horizon (at least `now` plus the reading tolerance,
    /// higher if the clock went back below a bound a decision raised), a slower one at `now`.
    pub fn set_config(&mut self, class: u8, burst: u32, interval: u32, now: u128, at: u128) {
        let longest = self
            .longest_after(class, burst, interval)
            .expect("a change the limiter took");
        let before = self.longest[usize::from(class)];
        self.longest[usize::from(class)] = longest;
        self.changes[usize::from(class)] += 1;
        self.enter(now);
        // In microseconds a change's pass writes each entry of the class as the change before
        // left it, in the epoch of the clock's reading; no value written is below that epoch's
        // base (a later instant never holds more tokens). Only an entry the change before
        // carried back below the base, counted at a clock gone back behind it, is raised.
        if let Some(base) = self.epoch_base {
            for (_, bucket) in self.entries.iter_mut().filter(|((_, c), _)| *c == class) {
                bucket.raise_to(base);
            }
        }
        let at = self.tick(at);
        self.configs[usize::from(class)] = (burst, interval);
        let tick_ns = self.tick_ns;
        let converted = std::iter::once(&mut self.overflow[usize::from(class)]).chain(
            self.entries
                .iter_mut()
                .filter(|((_, c), _)| *c == class)
                .map(|(_, b)| b),
        );
        for bucket in converted {
            let counted = at.max(bucket.full_at_tick().saturating_sub(before));
            let owed = bucket.owed(counted * tick_ns);
            bucket.convert_at(burst, interval, at, before);
            let after = bucket.owed(counted * tick_ns);
            assert_eq!(
                owed == 0,
                after == 0,
                "a change made a bucket full, or drained it"
            );
            assert!(
                after >= owed,
                "a change forgave tokens owed: {owed} before, {after} after"
            );
        }
    }

    /// Whether a change of `class` to one per `interval` is to a faster rate.
    pub fn is_faster(&self, class: u8, interval: u32) -> bool {
        interval < self.configs[usize::from(class)].1
    }

    /// Whether the limiter has `class`.
    pub fn has_class(&self, class: u8) -> bool {
        usize::from(class) < self.configs.len()
    }

    /// The burst `class` has now.
    pub fn burst(&self, class: u8) -> u32 {
        self.configs[usize::from(class)].0
    }

    /// Tokens in `(id, class)`'s own entry, if it has one.
    pub fn entry_tokens(&self, id: u32, class: u8, now: u128) -> Option<u128> {
        self.entries
            .get(&(id, class))
            .map(|b| self.dated(b).available(now))
    }
}
