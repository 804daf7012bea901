//! A registrar verb layer wired to the `registrar` profile: both arms, an in-memory record
//! store that counts intent and outcome writes, and a backend seam that counts its calls.
//!
//! ```sh
//! cargo run --example registrar
//! ```
//!
//! Time is a `ManualClock`, so the run is instant and prints the same thing every time.

use admit::registrar::{
    size_wave, Admitted, CountingSink, MismatchCause, RegistrarConfig, RegistrarError,
    RegistrarLimiter, Verb,
};
use admit::ManualClock;
use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::error::Error;

/// The verb layer's verbs.
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

/// What a caller asks for.
struct Request<'a> {
    service_name: &'a str,
    host: &'a str,
    component: &'a str,
}

/// The durable record store, in memory: it only counts.
#[derive(Default)]
struct RecordStore {
    intents: Cell<u64>,
    outcomes: Cell<u64>,
}

impl RecordStore {
    /// The pre-derivation arm's intent: written only when check point 1 said so.
    fn write_refusal_intent(&self) {
        self.intents.set(self.intents.get() + 1);
    }

    /// The post-derivation arm's intent: needs check point 2's pass, so it cannot come first.
    fn write_intent(&self, _admitted: &Admitted) {
        self.intents.set(self.intents.get() + 1);
    }

    fn write_outcome(&self) {
        self.outcomes.set(self.outcomes.get() + 1);
    }
}

/// The backend seam: everything the post-derivation arm does after its intent.
trait Backend {
    fn mint(&self, request: &Request<'_>) -> Result<(), RegistrarError>;
}

/// A backend that remembers the names it has issued and counts its calls.
#[derive(Default)]
struct InMemoryBackend {
    calls: Cell<u64>,
    issued: RefCell<HashSet<String>>,
}

impl Backend for InMemoryBackend {
    fn mint(&self, request: &Request<'_>) -> Result<(), RegistrarError> {
        self.calls.set(self.calls.get() + 1);
        let name = format!(
            "{}.{}.{}",
            request.component, request.service_name, request.host
        );
        if self.issued.borrow_mut().insert(name) {
            Ok(())
        } else {
            Err(RegistrarError::NameCollision)
        }
    }
}

/// The verb layer: classifies a request onto one of its two arms and runs it.
struct VerbLayer<B: Backend> {
    registrar: RegistrarLimiter<Op, CountingSink, ManualClock>,
    records: RecordStore,
    backend: B,
    components: &'static [&'static str],
}

impl<B: Backend> VerbLayer<B> {
    fn invoke(
        &self,
        identity: &[u8],
        verb: Op,
        request: &Request<'_>,
    ) -> Result<(), RegistrarError> {
        match self.mismatch(request) {
            Some(_) => self.pre_derivation_arm(identity, verb, request),
            None => self.post_derivation_arm(identity, verb, request),
        }
    }

    /// The pre-derivation arm: every invocation here is a refusal by construction.
    fn pre_derivation_arm(
        &self,
        identity: &[u8],
        verb: Op,
        request: &Request<'_>,
    ) -> Result<(), RegistrarError> {
        // Check point 1, at arm entry, before the intent write.
        let records = self.registrar.enter_predecision(identity, verb);
        if records.should_write() {
            self.records.write_refusal_intent();
        }
        // The arm's checks run either way, and so does its real, permanent answer.
        let cause = self
            .mismatch(request)
            .unwrap_or(MismatchCause::NoMultiplicityEntry);
        if records.should_write() {
            self.records.write_outcome();
        }
        Err(RegistrarError::ServiceInstanceMismatch { cause })
    }

    /// The post-derivation arm: may reach the backend.
    fn post_derivation_arm(
        &self,
        identity: &[u8],
        verb: Op,
        request: &Request<'_>,
    ) -> Result<(), RegistrarError> {
        // Check point 2, at arm entry, before the intent write and any backend work.
        // A throttle returns here: no intent, no backend call, no outcome.
        let admitted = self.registrar.enter_admission(identity, verb)?;
        self.records.write_intent(&admitted);
        let answer = self.backend.mint(request);
        self.records.write_outcome();
        answer
    }

    /// Label validation and the multiplicity lookup: pure, no I/O.
    fn mismatch(&self, request: &Request<'_>) -> Option<MismatchCause> {
        if !is_dns_label(request.service_name) {
            Some(MismatchCause::ServiceNameNotDnsLabel)
        } else if !is_dns_label(request.host) {
            Some(MismatchCause::HostNotDnsLabel)
        } else if !self.components.contains(&request.component) {
            Some(MismatchCause::NoMultiplicityEntry)
        } else {
            None
        }
    }
}

fn is_dns_label(s: &str) -> bool {
    (1..=63).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// The daemon's configuration file, with keys that belong to other parts of the daemon.
const CONFIG: &str = r#"
[registrar]
audit_record_dir = "/var/lib/registrar/audit"
audit_record_rotate_bytes = 67108864
rate_limit_admission_burst = 512
rate_limit_admission_refill_interval_ms = 500
rate_limit_predecision_refusal_burst = 32
rate_limit_predecision_refusal_refill_interval_ms = 1000
"#;

#[cfg(feature = "config")]
fn load_config() -> Result<RegistrarConfig, Box<dyn Error>> {
    let loaded = RegistrarConfig::from_toml_str(CONFIG)?;
    let others: Vec<&str> = loaded.other_keys.keys().map(String::as_str).collect();
    println!(
        "config: loaded [registrar]; left untouched for their owners: {}",
        others.join(", ")
    );
    Ok(loaded.config)
}

#[cfg(not(feature = "config"))]
fn load_config() -> Result<RegistrarConfig, Box<dyn Error>> {
    println!("config: built without the `config` feature; using the defaults");
    let _ = CONFIG;
    Ok(RegistrarConfig::default())
}

fn main() -> Result<(), Box<dyn Error>> {
    let config = load_config()?;
    println!(
        "buckets: admission {} (one token per {} ms), predecision_refusal {} (one per {} ms)",
        config.rate_limit_admission_burst,
        config.rate_limit_admission_refill_interval_ms,
        config.rate_limit_predecision_refusal_burst,
        config.rate_limit_predecision_refusal_refill_interval_ms,
    );
    println!("sizing: {}", size_wave(&config, 64, 8));
    println!("sizing: {}", size_wave(&config, 200, 12));

    let clock = ManualClock::new();
    let layer = VerbLayer {
        registrar: RegistrarLimiter::<Op>::builder(config)
            .build_with_clock(CountingSink::new(), clock.clone())?,
        records: RecordStore::default(),
        backend: InMemoryBackend::default(),
        components: &[
            "web", "db", "cache", "queue", "search", "metrics", "logs", "auth",
        ],
    };
    let control_plane = b"uid:0";
    // Prints what one step wrote and called, and returns the running totals.
    let report = |before: (u64, u64, u64, u64)| {
        let now = (
            layer.records.intents.get(),
            layer.records.outcomes.get(),
            layer.backend.calls.get(),
            layer.registrar.sink().counts().predecision_refusal
                + layer.registrar.sink().counts().admission,
        );
        println!(
            "  intent records +{}, outcome records +{}, backend calls +{}, limited +{}",
            now.0 - before.0,
            now.1 - before.1,
            now.2 - before.2,
            now.3 - before.3
        );
        now
    };
    let mut mark = (0, 0, 0, 0);

    println!("\n1. uid:0 floods the pre-derivation arm with 100 malformed mints");
    let malformed = Request {
        service_name: "Not_A_Label",
        host: "host-1",
        component: "web",
    };
    let mut answers = HashSet::new();
    for _ in 0..100 {
        if let Err(err) = layer.invoke(control_plane, Op::Mint, &malformed) {
            answers.insert(err.to_string());
        }
    }
    for answer in &answers {
        println!("  every caller was told: {answer}");
    }
    mark = report(mark);

    println!("\n2. the same identity brings up 64 hosts x 8 modules = 512 mints");
    let mut minted = 0;
    let mut throttled = 0;
    for host in 0..64 {
        let host = format!("host-{host}");
        for component in layer.components {
            let request = Request {
                service_name: "fleet",
                host: &host,
                component,
            };
            match layer.invoke(control_plane, Op::Mint, &request) {
                Ok(()) => minted += 1,
                Err(err) if err.is_retryable() => throttled += 1,
                Err(err) => return Err(err.into()),
            }
        }
    }
    println!("  minted {minted}, throttled {throttled}: the flood spent no admission budget");
    mark = report(mark);

    println!("\n3. uid:0 sends one more mint at once: the admission bucket is empty");
    let extra = Request {
        service_name: "fleet",
        host: "host-64",
        component: "web",
    };
    let retry_after = match layer.invoke(control_plane, Op::Mint, &extra) {
        Err(RegistrarError::RegistrarBusy { retry_after }) => {
            println!("  {}", RegistrarError::RegistrarBusy { retry_after });
            retry_after
        }
        other => return Err(format!("expected the throttle, got {other:?}").into()),
    };
    mark = report(mark);

    println!("\n4. uid:0 waits {retry_after} (simulated), then retries");
    clock.advance(retry_after.as_duration());
    match layer.invoke(control_plane, Op::Mint, &extra) {
        Ok(()) => println!("  minted"),
        Err(err) => return Err(err.into()),
    }
    mark = report(mark);

    println!("\n5. uid:0 repeats an earlier mint: a determined refusal, never the throttle");
    let repeat = Request {
        service_name: "fleet",
        host: "host-0",
        component: "web",
    };
    if let Err(err) = layer.invoke(control_plane, Op::Mint, &repeat) {
        println!("  {err} (retryable: {})", err.is_retryable());
    }
    report(mark);

    let counts = layer.registrar.sink().counts();
    println!("\nsummary");
    println!(
        "  records: {} intents, {} outcomes; backend calls: {}",
        layer.records.intents.get(),
        layer.records.outcomes.get(),
        layer.backend.calls.get()
    );
    println!(
        "  limited invocations: predecision_refusal {}, admission {} (throttled)",
        counts.predecision_refusal, counts.admission
    );
    println!(
        "  bucket entries: {} of a cap of {} ({} bytes, fixed)",
        layer.registrar.len(),
        layer.registrar.cap(),
        layer.registrar.memory_bytes()
    );
    Ok(())
}
