//! The profile through a verb layer double: both arms wired in the documented order, a record
//! log, and a backend seam that fails the test if it is reached when it must not be.

use admit::clock::{Clock, ManualClock};
use admit::registrar::*;

/// A clock reading far enough on that every reading these tests hand to an `_at` method is one
/// the clock has already produced (see `clock::ReadingAhead`).
const LATE: u64 = 1 << 60;
use admit::limiter::LimiterConfigError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

const MS: u64 = 1_000_000;
const SEC: u64 = 1_000 * MS;

// ---------------------------------------------------------------------------------------------
// The verb layer double

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Mint,
    Retire,
}

impl Verb for Op {
    const ALL: &'static [Self] = &[Op::Mint, Op::Retire];

    fn index(self) -> usize {
        self as usize
    }

    fn name(self) -> &'static str {
        match self {
            Op::Mint => "mint",
            Op::Retire => "retire",
        }
    }
}

/// One thing the verb layer did, in the order it did it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Event(Bucket),
    Intent,
    Checks,
    Backend,
    Outcome,
}

/// The record store, the backend seam and the sink, all logging into one sequence.
#[derive(Debug, Default)]
struct Recorder {
    steps: Mutex<Vec<Step>>,
    events: Mutex<Vec<(Vec<u8>, Op, Bucket)>>,
}

impl Recorder {
    fn push(&self, step: Step) {
        self.steps.lock().unwrap().push(step);
    }

    /// The steps logged since the last call.
    fn take(&self) -> Vec<Step> {
        std::mem::take(&mut *self.steps.lock().unwrap())
    }

    fn events(&self) -> Vec<(Vec<u8>, Op, Bucket)> {
        self.events.lock().unwrap().clone()
    }
}

impl LimitedSink<Op> for Recorder {
    fn limited(&self, event: LimitedEvent<'_, Op>) {
        self.push(Step::Event(event.bucket()));
        self.events
            .lock()
            .unwrap()
            .push((event.identity().to_vec(), event.verb(), event.bucket()));
    }
}

#[derive(Debug, Clone, Copy)]
enum Request {
    /// Refused on the pre-derivation arm.
    Malformed(MismatchCause),
    /// Goes to the post-derivation arm.
    Derivable,
}

/// What the backend does when reached.
#[derive(Debug, Clone, Copy)]
enum Backend {
    /// Reaching it fails the test.
    Unreachable,
    Answers(Result<(), RegistrarError>),
}

const MINTS: Backend = Backend::Answers(Ok(()));

struct VerbLayer {
    registrar: RegistrarLimiter<Op, Arc<Recorder>, ManualClock>,
    recorder: Arc<Recorder>,
}

impl VerbLayer {
    fn new(config: RegistrarConfig) -> Self {
        let recorder = Arc::new(Recorder::default());
        let registrar = RegistrarLimiter::<Op>::builder(config)
            .build_with_clock(recorder.clone(), ManualClock::new())
            .unwrap();
        Self {
            registrar,
            recorder,
        }
    }

    fn clock(&self) -> &ManualClock {
        self.registrar.clock()
    }

    fn invoke(
        &self,
        identity: &[u8],
        verb: Op,
        request: Request,
        backend: Backend,
    ) -> Result<(), RegistrarError> {
        match request {
            Request::Malformed(cause) => self.pre_derivation_arm(identity, verb, cause),
            Request::Derivable => self.post_derivation_arm(identity, verb, backend),
        }
    }

    fn pre_derivation_arm(
        &self,
        identity: &[u8],
        verb: Op,
        cause: MismatchCause,
    ) -> Result<(), RegistrarError> {
        // Check point 1, before the intent write.
        let records = self.registrar.enter_predecision(identity, verb);
        if records.should_write() {
            self.recorder.push(Step::Intent);
        }
        self.recorder.push(Step::Checks);
        let refusal = RegistrarError::ServiceInstanceMismatch { cause };
        if records.should_write() {
            self.recorder.push(Step::Outcome);
        }
        Err(refusal)
    }

    fn post_derivation_arm(
        &self,
        identity: &[u8],
        verb: Op,
        backend: Backend,
    ) -> Result<(), RegistrarError> {
        // Check point 2, before the intent write and any backend work.
        let admitted = self.registrar.enter_admission(identity, verb)?;
        self.write_intent(&admitted);
        self.recorder.push(Step::Backend);
        let answer = match backend {
            Backend::Unreachable => panic!("the backend was reached"),
            Backend::Answers(answer) => answer,
        };
        self.recorder.push(Step::Outcome);
        answer
    }

    /// Takes the check point's pass, so an intent cannot be written before the check.
    fn write_intent(&self, _admitted: &Admitted) {
        self.recorder.push(Step::Intent);
    }
}

fn count(steps: &[Step], step: Step) -> usize {
    steps.iter().filter(|&&s| s == step).count()
}

fn small(admission: (u32, u32), refusal: (u32, u32)) -> RegistrarConfig {
    RegistrarConfig {
        rate_limit_admission_burst: admission.0,
        rate_limit_admission_refill_interval_ms: admission.1,
        rate_limit_predecision_refusal_burst: refusal.0,
        rate_limit_predecision_refusal_refill_interval_ms: refusal.1,
    }
}

fn profile<S: LimitedSink<Op>>(
    config: RegistrarConfig,
    sink: S,
) -> RegistrarLimiter<Op, S, ManualClock> {
    RegistrarLimiter::<Op>::builder(config)
        .build_with_clock(sink, ManualClock::starting_at(LATE))
        .unwrap()
}

const TYPO: Request = Request::Malformed(MismatchCause::ServiceNameNotDnsLabel);

// ---------------------------------------------------------------------------------------------
// Check point 1

#[test]
fn a_pre_derivation_flood_past_the_burst_writes_no_record_and_keeps_the_real_refusal() {
    let layer = VerbLayer::new(RegistrarConfig::default());
    let burst = 32;
    for i in 0..100 {
        let answer = layer.invoke(b"uid:1001", Op::Mint, TYPO, Backend::Unreachable);
        assert_eq!(
            answer,
            Err(RegistrarError::ServiceInstanceMismatch {
                cause: MismatchCause::ServiceNameNotDnsLabel
            }),
            "invocation {i}: the real, permanent refusal, limited or not"
        );
        let steps = layer.recorder.take();
        if i < burst {
            assert_eq!(steps, [Step::Intent, Step::Checks, Step::Outcome], "{i}");
        } else {
            // Neither record phase, exactly one event, and the checks still ran.
            assert_eq!(
                steps,
                [Step::Event(Bucket::PredecisionRefusal), Step::Checks],
                "{i}"
            );
        }
    }
    let events = layer.recorder.events();
    assert_eq!(events.len(), 100 - burst);
    assert!(events
        .iter()
        .all(|e| *e == (b"uid:1001".to_vec(), Op::Mint, Bucket::PredecisionRefusal)));
}

#[test]
fn a_drained_refusal_bucket_does_not_starve_concurrent_mints() {
    let layer = VerbLayer::new(RegistrarConfig::default());
    // One identity, as in a real deployment: the flood and the mints share it.
    let identity = b"uid:0";
    for _ in 0..32 {
        let _ = layer.invoke(identity, Op::Mint, TYPO, Backend::Unreachable);
    }
    layer.recorder.take();
    let flood = if cfg!(miri) { 50 } else { 5_000 };
    let mints = 64;
    let admitted = std::thread::scope(|s| {
        s.spawn(|| {
            for _ in 0..flood {
                let answer = layer.invoke(identity, Op::Mint, TYPO, Backend::Unreachable);
                assert!(matches!(
                    answer,
                    Err(RegistrarError::ServiceInstanceMismatch { .. })
                ));
            }
        });
        let minter = s.spawn(|| {
            (0..mints)
                .filter(|_| {
                    layer
                        .invoke(identity, Op::Mint, Request::Derivable, MINTS)
                        .is_ok()
                })
                .count()
        });
        minter.join().unwrap()
    });
    assert_eq!(admitted, mints, "every mint admitted despite the flood");
    let steps = layer.recorder.take();
    assert_eq!(count(&steps, Step::Intent), mints, "every mint recorded");
    assert_eq!(count(&steps, Step::Outcome), mints);
    assert_eq!(count(&steps, Step::Backend), mints);
    assert_eq!(count(&steps, Step::Event(Bucket::Admission)), 0);
    assert_eq!(
        count(&steps, Step::Event(Bucket::PredecisionRefusal)),
        flood
    );
}

#[test]
fn on_the_pre_derivation_arm_the_limiter_runs_before_the_intent_write() {
    let layer = VerbLayer::new(small((4, 1_000), (1, 1_000)));
    layer
        .invoke(b"id", Op::Retire, TYPO, Backend::Unreachable)
        .unwrap_err();
    assert_eq!(
        layer.recorder.take(),
        [Step::Intent, Step::Checks, Step::Outcome]
    );
    layer
        .invoke(b"id", Op::Retire, TYPO, Backend::Unreachable)
        .unwrap_err();
    // The decision came first: no intent was written, and the event precedes the checks.
    assert_eq!(
        layer.recorder.take(),
        [Step::Event(Bucket::PredecisionRefusal), Step::Checks]
    );
}

// ---------------------------------------------------------------------------------------------
// Check point 2

#[test]
fn on_the_post_derivation_arm_the_limiter_runs_before_the_intent_and_the_backend() {
    let layer = VerbLayer::new(small((1, 1_000), (4, 1_000)));
    layer
        .invoke(b"id", Op::Mint, Request::Derivable, MINTS)
        .unwrap();
    assert_eq!(
        layer.recorder.take(),
        [Step::Intent, Step::Backend, Step::Outcome]
    );
    // The seam panics if reached: the throttle must come before it.
    let answer = layer.invoke(b"id", Op::Mint, Request::Derivable, Backend::Unreachable);
    assert!(matches!(answer, Err(RegistrarError::RegistrarBusy { .. })));
    assert_eq!(layer.recorder.take(), [Step::Event(Bucket::Admission)]);
}

#[test]
fn the_admission_throttle_is_typed_retryable_and_records_nothing() {
    let layer = VerbLayer::new(small((3, 500), (4, 1_000)));
    for _ in 0..3 {
        layer
            .invoke(b"ctl", Op::Mint, Request::Derivable, MINTS)
            .unwrap();
    }
    layer.recorder.take();
    let err = layer
        .invoke(b"ctl", Op::Mint, Request::Derivable, Backend::Unreachable)
        .unwrap_err();
    let RegistrarError::RegistrarBusy { retry_after } = err else {
        panic!("expected the throttle, got {err:?}");
    };
    assert!(err.is_retryable());
    assert!(retry_after.secs() >= 1);
    assert_eq!(err.retry_after(), Some(retry_after));
    assert_eq!(layer.recorder.take(), [Step::Event(Bucket::Admission)]);
    assert_eq!(
        layer.recorder.events(),
        [(b"ctl".to_vec(), Op::Mint, Bucket::Admission)]
    );
    // Another verb's admission bucket is its own.
    layer
        .invoke(b"ctl", Op::Retire, Request::Derivable, MINTS)
        .unwrap();
}

#[test]
fn the_retry_after_tracks_the_admission_accrual() {
    // Burst 2, one token per 2.5 s.
    let registrar = profile(small((2, 2_500), (1, 1_000)), NoopSink);
    let retry = |now_ns| {
        registrar
            .enter_admission_at(b"ctl", Op::Mint, now_ns)
            .map(|_| ())
            .map_err(|t| t.retry_after().secs())
    };
    let t0 = 1_000_000 * SEC; // far from the origin: the answer is a duration, not a deadline
    assert_eq!(retry(t0), Ok(()));
    assert_eq!(retry(t0), Ok(()));
    assert_eq!(retry(t0), Err(3), "2.5 s to the next token, rounded up");
    assert_eq!(retry(t0 + 1_000 * MS), Err(2), "1.5 s left");
    assert_eq!(retry(t0 + 1_600 * MS), Err(1), "0.9 s left");
    assert_eq!(retry(t0 + 2_499 * MS), Err(1), "1 ms left: never 0");
    assert_eq!(
        retry(t0 + 2_500 * MS),
        Ok(()),
        "the token the answer promised"
    );
    assert_eq!(retry(t0 + 2_500 * MS), Err(3));
    // A reading from before (a clock that went back) mints nothing.
    assert_eq!(retry(t0), Err(5));

    // Half a second per token rounds up to the one-second floor.
    let registrar = profile(small((1, 500), (1, 1_000)), NoopSink);
    assert!(registrar.enter_admission_at(b"ctl", Op::Mint, 0).is_ok());
    let throttled = registrar
        .enter_admission_at(b"ctl", Op::Mint, 0)
        .unwrap_err();
    assert_eq!(throttled.retry_after().secs(), 1);
    assert_eq!(
        RegistrarError::from(throttled),
        RegistrarError::RegistrarBusy {
            retry_after: throttled.retry_after()
        }
    );
}

#[test]
fn determined_outcomes_are_never_turned_into_the_throttle() {
    let layer = VerbLayer::new(small((8, 1_000), (1, 60_000)));
    // On the pre-derivation arm: the same permanent refusal with records and without.
    for cause in [
        MismatchCause::ServiceNameNotDnsLabel,
        MismatchCause::HostNotDnsLabel,
        MismatchCause::NoMultiplicityEntry,
    ] {
        for _ in 0..3 {
            let err = layer
                .invoke(
                    b"x",
                    Op::Mint,
                    Request::Malformed(cause),
                    Backend::Unreachable,
                )
                .unwrap_err();
            assert_eq!(err, RegistrarError::ServiceInstanceMismatch { cause });
            assert!(!err.is_retryable());
        }
    }
    assert_eq!(layer.recorder.events().len(), 8, "records were suppressed");
    // On the post-derivation arm: an admitted invocation's determined answer passes through.
    let permanent = [
        RegistrarError::SpecConflict,
        RegistrarError::NameCollision,
        RegistrarError::HostMismatch,
        RegistrarError::RegistrarUnavailable {
            reason: UnavailableReason::BackendUnavailable,
        },
    ];
    for err in permanent {
        let answer = layer.invoke(
            b"x",
            Op::Mint,
            Request::Derivable,
            Backend::Answers(Err(err)),
        );
        assert_eq!(answer, Err(err));
    }
    // The throttle is distinguishable from every permanent variant, by variant alone.
    let busy = RegistrarError::RegistrarBusy {
        retry_after: RetryAfter::from_secs(1).unwrap(),
    };
    let family = [
        RegistrarError::ServiceInstanceMismatch {
            cause: MismatchCause::NoMultiplicityEntry,
        },
        RegistrarError::SpecConflict,
        RegistrarError::NameCollision,
        RegistrarError::HostMismatch,
        RegistrarError::RegistrarUnavailable {
            reason: UnavailableReason::IntentUnrecordable,
        },
        busy,
    ];
    let retryable: Vec<_> = family.iter().filter(|e| e.is_retryable()).collect();
    assert_eq!(retryable, [&busy]);
    for err in &family[..5] {
        assert_eq!(err.retry_after(), None);
        assert!(!matches!(err, RegistrarError::RegistrarBusy { .. }));
        assert!(!err.to_string().contains("retry after"), "{err}");
    }
}

// ---------------------------------------------------------------------------------------------
// Token buckets: full start, no persistence, no second burst

#[test]
#[cfg_attr(
    miri,
    ignore = "1,100 charges at the default burst; the rule is the limiter's"
)]
fn a_fresh_profile_admits_a_full_burst_and_a_restarted_one_starts_full() {
    let config = RegistrarConfig::default();
    for life in 0..2 {
        // A restart: a new profile, nothing carried over.
        let registrar = profile(config, CountingSink::new());
        for i in 0..512 {
            assert!(
                registrar.enter_admission(b"ctl", Op::Mint).is_ok(),
                "life {life}: mint {i} of the first burst"
            );
        }
        assert!(registrar.enter_admission(b"ctl", Op::Mint).is_err());
        for _ in 0..32 {
            assert_eq!(
                registrar.enter_predecision(b"ctl", Op::Mint),
                Records::Write
            );
        }
        assert_eq!(registrar.enter_predecision(b"ctl", Op::Mint), Records::Skip);
        assert_eq!(registrar.sink().counts().admission, 1);
    }
}

#[test]
fn a_bucket_drained_at_a_boundary_yields_one_token_not_a_second_burst() {
    let registrar = profile(small((4, 1_000), (1, 1_000)), NoopSink);
    let drained_at = 999 * MS;
    for _ in 0..4 {
        assert!(registrar
            .enter_admission_at(b"ctl", Op::Mint, drained_at)
            .is_ok());
    }
    assert!(registrar
        .enter_admission_at(b"ctl", Op::Mint, 1_000 * MS)
        .is_err());
    // One interval later: exactly one token.
    let later = drained_at + SEC;
    assert!(registrar
        .enter_admission_at(b"ctl", Op::Mint, later)
        .is_ok());
    assert!(registrar
        .enter_admission_at(b"ctl", Op::Mint, later)
        .is_err());
}

// ---------------------------------------------------------------------------------------------
// Identity, cap and overflow

/// A connection as a transport would hand it over: its peer credentials and its own pid.
struct Connection {
    uid: u32,
    pid: u32,
}

impl Connection {
    /// Stable for one caller: what the verb layer must carry.
    fn identity(&self) -> Vec<u8> {
        format!("uid:{}", self.uid).into_bytes()
    }

    /// Varies per connection by construction: the hazard.
    fn identity_with_pid(&self) -> Vec<u8> {
        format!("uid:{} pid:{}", self.uid, self.pid).into_bytes()
    }
}

#[test]
fn two_connections_from_one_caller_spend_the_same_bucket() {
    let registrar = profile(small((3, 60_000), (1, 60_000)), CountingSink::new());
    let first = Connection { uid: 0, pid: 4_100 };
    let second = Connection { uid: 0, pid: 4_217 };
    assert_eq!(
        first.identity(),
        second.identity(),
        "one caller, one identity"
    );
    for _ in 0..3 {
        assert!(registrar
            .enter_admission(&first.identity(), Op::Mint)
            .is_ok());
    }
    // Hanging up and dialling again does not buy a fresh budget.
    assert!(registrar
        .enter_admission(&second.identity(), Op::Mint)
        .is_err());
    assert_eq!(registrar.len(), 1);
    // The profile keys on the bytes as given, so an identity that renders the pid would:
    // this is why the stability above is asserted rather than assumed.
    assert!(registrar
        .enter_admission(&second.identity_with_pid(), Op::Mint)
        .is_ok());
    assert_eq!(registrar.len(), 2);
}

#[test]
fn one_identity_holds_four_independent_buckets() {
    let registrar = profile(small((1, 60_000), (1, 60_000)), CountingSink::new());
    assert!(registrar.enter_admission(b"ctl", Op::Mint).is_ok());
    assert!(registrar.enter_admission(b"ctl", Op::Mint).is_err());
    // The three other buckets of the same identity are untouched.
    assert!(registrar.enter_admission(b"ctl", Op::Retire).is_ok());
    assert_eq!(
        registrar.enter_predecision(b"ctl", Op::Mint),
        Records::Write
    );
    assert_eq!(
        registrar.enter_predecision(b"ctl", Op::Retire),
        Records::Write
    );
    assert_eq!(registrar.len(), 4);
}

// ---------------------------------------------------------------------------------------------
// The sink

#[test]
fn each_counter_moves_only_for_a_flood_on_its_own_bucket() {
    let registrar = profile(small((12, 60_000), (8, 60_000)), CountingSink::new());
    for _ in 0..30 {
        let _ = registrar.enter_predecision(b"x", Op::Mint);
    }
    assert_eq!(
        registrar.sink().counts(),
        LimitedCounts {
            predecision_refusal: 22,
            admission: 0
        }
    );
    for _ in 0..40 {
        let _ = registrar.enter_admission(b"x", Op::Retire);
    }
    assert_eq!(
        registrar.sink().counts(),
        LimitedCounts {
            predecision_refusal: 22,
            admission: 28
        }
    );
    assert_eq!(registrar.sink().count(Bucket::Admission), 28);
}

#[test]
fn the_profile_works_with_a_sink_that_does_nothing() {
    let counting = profile(small((3, 1_000), (2, 1_000)), CountingSink::new());
    let silent = profile(small((3, 1_000), (2, 1_000)), NoopSink);
    for i in 0..10u64 {
        let now = i * 300 * MS;
        assert_eq!(
            counting.enter_predecision_at(b"x", Op::Mint, now),
            silent.enter_predecision_at(b"x", Op::Mint, now)
        );
        assert_eq!(
            counting.enter_admission_at(b"x", Op::Mint, now).is_ok(),
            silent.enter_admission_at(b"x", Op::Mint, now).is_ok()
        );
    }
    assert!(counting.sink().counts().admission > 0);
}

/// A trivial forwarding wrapper: counts on its own, then hands every event on.
struct Forward<S> {
    seen: AtomicU64,
    inner: S,
}

impl<V: Verb, S: LimitedSink<V>> LimitedSink<V> for Forward<S> {
    fn limited(&self, event: LimitedEvent<'_, V>) {
        self.seen.fetch_add(1, Ordering::Relaxed);
        self.inner.limited(event);
    }
}

#[test]
fn a_forwarding_wrapper_around_the_counting_sink_moves_both_counters() {
    let counts = Arc::new(CountingSink::new());
    let wrapper = Forward {
        seen: AtomicU64::new(0),
        inner: counts.clone(),
    };
    let registrar = profile(small((2, 1_000), (3, 1_000)), wrapper);
    for _ in 0..10 {
        let _ = registrar.enter_predecision(b"x", Op::Mint);
        let _ = registrar.enter_admission(b"x", Op::Mint);
    }
    assert_eq!(
        counts.counts(),
        LimitedCounts {
            predecision_refusal: 7,
            admission: 8
        }
    );
    assert_eq!(registrar.sink().seen.load(Ordering::Relaxed), 15);
}

#[test]
fn racing_invocations_emit_exactly_one_event_per_limited_one() {
    let registrar = profile(small((50, 60_000), (20, 60_000)), CountingSink::new());
    let threads = 4;
    let each = if cfg!(miri) { 20 } else { 500 };
    let granted = AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                for _ in 0..each {
                    if registrar.enter_admission(b"ctl", Op::Mint).is_ok() {
                        granted.fetch_add(1, Ordering::Relaxed);
                    }
                    let _ = registrar.enter_predecision(b"ctl", Op::Mint);
                }
            });
        }
    });
    let total = threads * each;
    assert_eq!(granted.load(Ordering::Relaxed), 50);
    assert_eq!(
        registrar.sink().counts(),
        LimitedCounts {
            predecision_refusal: total - 20,
            admission: total - 50
        }
    );
}

// ---------------------------------------------------------------------------------------------
// Sizing: a realistic bring-up

#[test]
#[cfg_attr(
    miri,
    ignore = "1,000 invocations at the default burst; no new memory access pattern"
)]
fn a_realistic_bring_up_of_64_hosts_by_8_modules_is_never_throttled() {
    let layer = VerbLayer::new(RegistrarConfig::default());
    assert!(size_wave(layer.registrar.config(), 64, 8).covered());
    // The control plane mints the whole wave at once, with the odd operator typo mixed in.
    for host in 0..64 {
        for _module in 0..8 {
            layer
                .invoke(b"uid:0", Op::Mint, Request::Derivable, MINTS)
                .unwrap();
        }
        if host % 8 == 0 {
            let _ = layer.invoke(b"uid:0", Op::Mint, TYPO, Backend::Unreachable);
        }
    }
    let steps = layer.recorder.take();
    assert_eq!(count(&steps, Step::Backend), 512);
    assert_eq!(
        count(&steps, Step::Intent),
        512 + 8,
        "every mint and typo recorded"
    );
    assert!(layer.recorder.events().is_empty(), "nothing was limited");

    // The same wave with every host its own identity: 64 entries, far below the cap.
    let layer = VerbLayer::new(RegistrarConfig::default());
    for host in 0..64u32 {
        for _module in 0..8 {
            let id = format!("host-{host}");
            layer
                .invoke(id.as_bytes(), Op::Mint, Request::Derivable, MINTS)
                .unwrap();
        }
    }
    assert!(layer.recorder.events().is_empty());
    assert_eq!(layer.registrar.len(), 64);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "3,300 invocations; the arithmetic is also checked in sizing.rs"
)]
fn a_wave_beyond_the_burst_completes_in_the_documented_extra_time() {
    let layer = VerbLayer::new(RegistrarConfig::default());
    let sizing = size_wave(layer.registrar.config(), 200, 12);
    assert!(!sizing.covered());
    let start = layer.clock().now_ns();
    let mut pending = sizing.mints();
    while pending > 0 {
        match layer.invoke(b"uid:0", Op::Mint, Request::Derivable, MINTS) {
            Ok(()) => pending -= 1,
            // The caller honours the retry-after.
            Err(err) => {
                layer
                    .clock()
                    .advance(err.retry_after().unwrap().as_duration());
            }
        }
    }
    let elapsed = (layer.clock().now_ns() - start) / SEC;
    assert_eq!(elapsed, sizing.extra_secs());
    assert_eq!(elapsed, 944);
}

// ---------------------------------------------------------------------------------------------
// Building

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Misnumbered;

impl Verb for Misnumbered {
    const ALL: &'static [Self] = &[Misnumbered];
    fn index(self) -> usize {
        1
    }
    fn name(self) -> &'static str {
        "misnumbered"
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unlisted {
    Listed,
    Forgotten,
}

impl Verb for Unlisted {
    const ALL: &'static [Self] = &[Unlisted::Listed];
    fn index(self) -> usize {
        self as usize
    }
    fn name(self) -> &'static str {
        "unlisted"
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NoVerbs {}

impl Verb for NoVerbs {
    const ALL: &'static [Self] = &[];
    fn index(self) -> usize {
        match self {}
    }
    fn name(self) -> &'static str {
        match self {}
    }
}

#[test]
fn building_refuses_a_broken_verb_set_a_bad_cap_and_a_bad_config() {
    let config = RegistrarConfig::default();
    assert_eq!(
        RegistrarLimiter::<Misnumbered>::builder(config)
            .build(NoopSink)
            .unwrap_err(),
        RegistrarBuildError::Verbs(VerbSetError::IndexMismatch {
            position: 0,
            name: "misnumbered",
            index: 1
        })
    );
    assert_eq!(
        RegistrarLimiter::<NoVerbs>::builder(config)
            .build(NoopSink)
            .unwrap_err(),
        RegistrarBuildError::Verbs(VerbSetError::Empty)
    );
    assert_eq!(
        RegistrarLimiter::<Op>::builder(config)
            .cap(0)
            .build(NoopSink)
            .unwrap_err(),
        RegistrarBuildError::Limiter(LimiterConfigError::ZeroCap)
    );
    let zero = RegistrarConfig {
        rate_limit_predecision_refusal_refill_interval_ms: 0,
        ..config
    };
    let err = RegistrarLimiter::<Op>::builder(zero)
        .build(NoopSink)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        RegistrarConfigError::InvalidValue {
            key: RateLimitKey::PredecisionRefusalRefillIntervalMs,
            found: "0".into(),
            problem: ValueProblem::Zero
        }
        .to_string()
    );
    assert!(err
        .to_string()
        .contains("rate_limit_predecision_refusal_refill_interval_ms"));
}

#[test]
fn a_verb_missing_from_all_fails_closed_and_visibly() {
    let registrar = RegistrarLimiter::<Unlisted>::builder(RegistrarConfig::default())
        .build_with_clock(CountingSink::new(), ManualClock::new())
        .unwrap();
    assert!(registrar.enter_admission(b"x", Unlisted::Listed).is_ok());
    let throttled = registrar
        .enter_admission(b"x", Unlisted::Forgotten)
        .unwrap_err();
    assert_eq!(throttled.retry_after().secs(), 1);
    assert_eq!(
        registrar.enter_predecision(b"x", Unlisted::Forgotten),
        Records::Skip
    );
    assert_eq!(
        registrar.sink().counts(),
        LimitedCounts {
            predecision_refusal: 1,
            admission: 1
        }
    );
    assert_eq!(
        registrar.overflow_charges(Unlisted::Forgotten, Bucket::Admission),
        None
    );
}

/// A reading far ahead of the profile's clock fails closed for that one
/// call (throttled, or records skipped) and moves nothing another caller sees.
#[test]
fn a_reading_ahead_of_the_clock_fails_closed_and_changes_nothing() {
    let clock = ManualClock::starting_at(5 * SEC);
    let registrar = RegistrarLimiter::<Op>::builder(small((1, 1_000), (1, 1_000)))
        .cap(2)
        .build_with_clock(CountingSink::new(), clock.clone())
        .unwrap();
    let now = clock.now_ns();
    assert!(registrar.enter_admission_at(b"a", Op::Mint, now).is_ok());
    assert!(registrar.enter_admission_at(b"b", Op::Mint, now).is_ok());
    let throttled = registrar
        .enter_admission_at(b"c", Op::Mint, u64::MAX)
        .unwrap_err();
    assert!(throttled.retry_after().secs() >= 1);
    assert_eq!(
        registrar.enter_predecision_at(b"c", Op::Mint, u64::MAX),
        Records::Skip
    );
    assert!(registrar.reclaim_full_at(u64::MAX).is_err());
    // Both drained entries are still there: a and b stay throttled at the real reading.
    assert_eq!(registrar.len(), 2);
    assert!(registrar.enter_admission_at(b"a", Op::Mint, now).is_err());
    assert!(registrar.enter_admission_at(b"b", Op::Mint, now).is_err());
    assert_eq!(
        registrar.overflow_charges(Op::Mint, Bucket::Admission),
        Some(0)
    );
}
