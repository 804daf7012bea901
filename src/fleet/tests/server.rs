//! A `redis-server` of the test's own, on a free 127.0.0.1 port, persistence off, stopped
//! when dropped. No test shares a server or depends on one left running.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BINARY: &str = "/usr/bin/redis-server";

pub struct Server {
    child: Child,
    pub port: u16,
    extra: Vec<String>,
}

/// Where the binary is, or the one-line reason the test is skipped.
fn binary() -> Result<String, String> {
    if std::path::Path::new(BINARY).exists() {
        return Ok(BINARY.to_owned());
    }
    match Command::new("sh")
        .args(["-c", "command -v redis-server"])
        .output()
    {
        Ok(out) if out.status.success() => {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
        }
        _ => Err("skipped: no redis-server binary (apt-get install -y redis-server)".to_owned()),
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

fn spawn(port: u16, extra: &[String]) -> Child {
    let bin = binary().unwrap();
    let mut cmd = Command::new(bin);
    cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd.spawn().unwrap()
}

impl Server {
    /// Starts a server, or prints why not and returns `None` (the test then skips).
    pub fn start(extra: &[&str]) -> Option<Server> {
        if let Err(reason) = binary() {
            eprintln!("{reason}");
            return None;
        }
        let extra: Vec<String> = extra.iter().map(|s| (*s).to_owned()).collect();
        let port = free_port();
        let child = spawn(port, &extra);
        let server = Server { child, port, extra };
        server.wait_for_ping();
        Some(server)
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn connection(&self) -> redis::Connection {
        let client = redis::Client::open(self.url()).unwrap();
        let con = client
            .get_connection_with_timeout(Duration::from_secs(1))
            .unwrap();
        con.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        con
    }

    /// Waits (at most 5 s) until the server has been up 2 whole seconds: past the window in
    /// which the script creates missing keys drained (its start second plus the tests'
    /// horizon of 50 ms), for tests that want a key's first lease to find a full bucket.
    pub fn wait_past_drained_start(&self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut con = self.connection();
        loop {
            let info: String = redis::cmd("INFO").arg("server").query(&mut con).unwrap();
            let up = info
                .lines()
                .find_map(|l| l.strip_prefix("uptime_in_seconds:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap();
            if up >= 2 {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "redis-server uptime stuck at {up} s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn wait_for_ping(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let client = redis::Client::open(self.url()).unwrap();
        loop {
            if let Ok(mut con) = client.get_connection_with_timeout(Duration::from_millis(200)) {
                let pong: redis::RedisResult<String> = redis::cmd("PING").query(&mut con);
                if pong.is_ok() {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "redis-server did not answer PING"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// SIGSTOP: the server holds every connection open and answers nothing.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// SIGCONT.
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    /// SIGKILL, without a restart.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts it again on the same port with empty memory.
    pub fn restart(&mut self) {
        self.child = spawn(self.port, &self.extra);
        self.wait_for_ping();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // A paused server would not die of SIGKILL any slower, but resume it anyway.
        let _ = Command::new("kill")
            .args(["-CONT", &self.child.id().to_string()])
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
