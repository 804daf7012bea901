//! A local `redis-server` and fleet limiters on it, for the fleet bench (`benches/fleet.rs`,
//! which describes them); the instruction bench (`benches/instructions.rs`) reuses them. A
//! directory module, so that Cargo does not take it for a bench.

use admit::fleet::{FailPolicy, FleetLimiter, FleetSecret};
use admit::BucketConfig;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const SECRET: [u8; 16] = *b"fleet bench key!";
pub struct Server(Child, pub u16);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn start_server() -> Option<Server> {
    if !std::path::Path::new("/usr/bin/redis-server").exists() {
        eprintln!(
            "fleet bench skipped: no /usr/bin/redis-server (apt-get install -y redis-server)"
        );
        return None;
    }
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("/usr/bin/redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let server = Server(child, port);
    let client = redis::Client::open(url(port)).unwrap();
    for _ in 0..500 {
        if let Ok(mut c) = client.get_connection_with_timeout(Duration::from_millis(100)) {
            if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                return Some(server);
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("redis-server did not answer");
}

pub fn url(port: u16) -> String {
    format!("redis://127.0.0.1:{port}/")
}

/// A budget no bench exhausts.
pub fn huge() -> BucketConfig {
    BucketConfig::new(1 << 30, Duration::from_micros(1)).unwrap()
}

pub fn fleet(port: u16, lease_cap: u32, config: BucketConfig) -> FleetLimiter {
    FleetLimiter::builder()
        .redis_url(url(port))
        .secret(FleetSecret::from_bytes(SECRET))
        .processes(4)
        .lease_cap(lease_cap)
        .fail_policy(FailPolicy::Closed)
        // The bench's server is seconds old and `huge()`'s horizon is 18 minutes: by default
        // every key would start drained (a restart must not hand out a burst), and the
        // benches would time refusals. They time a budget that is there.
        .restart_drains(false)
        .build([config])
        .unwrap()
}

/// Lets a hot identity's lease grow to the cap before timing.
pub fn warm(limiter: &FleetLimiter) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(300) {
        for _ in 0..1000 {
            let _ = limiter.try_acquire("hot", 0);
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}
