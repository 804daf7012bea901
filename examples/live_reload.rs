//! Every limit in one `[admit]` TOML file, reloaded into the running primitives when the file
//! changes: all of it, or, if any key is wrong, none of it (feature `config`, on by default).
//!
//! ```sh
//! cargo run --example live_reload                      # a scripted run on a scratch copy
//! cargo run --example live_reload -- admit.toml        # watch your own file (Ctrl-C stops)
//! ```
//!
//! The file is `docs/admit.example.toml` (every key, commented). A server builds its limits
//! once with `LiveLimits::load(path)`, hands the primitives (`live.limiter()`,
//! `live.in_flight()`, ...) to the code that decides, and calls `live.reload(path)` when the
//! file changes: on SIGHUP, from an admin endpoint, or, as here, when its modification time
//! moves. A rejected file leaves the running limits as they were, and the error names the key
//! to fix.
//!
//! Without an argument, the example copies that file to a scratch directory, and edits it
//! three times as an operator would: a raised burst (applied), a typo'd rate (refused,
//! nothing applied), and a change to a size fixed at build (refused). It exits non-zero if
//! any of those did otherwise.

use admit::live::LiveLimits;
use std::error::Error;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The documented example file, every key in it.
const EXAMPLE: &str = include_str!("../docs/admit.example.toml");

/// Reloads `path` if its modification time moved since `seen`; prints what happened.
fn reload_if_changed(
    live: &LiveLimits,
    path: &Path,
    seen: &mut SystemTime,
) -> Result<(), Box<dyn Error>> {
    let modified = std::fs::metadata(path)?.modified()?;
    if modified != *seen {
        *seen = modified;
        match live.reload(path) {
            Ok(reloaded) => println!("{}: {reloaded}", path.display()),
            // The running limits stay; the error names the key and what is wrong with it.
            Err(e) => println!("{}: kept the running limits: {e}", path.display()),
        }
    }
    Ok(())
}

/// Watches `path` until the process is stopped.
fn watch(path: &Path) -> Result<(), Box<dyn Error>> {
    let live = LiveLimits::load(path)?;
    println!("loaded {}; watching it for changes", path.display());
    let mut seen = std::fs::metadata(path)?.modified()?;
    loop {
        std::thread::sleep(Duration::from_secs(1));
        reload_if_changed(&live, path, &mut seen)?;
    }
}

/// A scratch directory of this process's own, removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The scripted run: three edits of a copy of the example file.
fn scripted() -> Result<(), Box<dyn Error>> {
    let dir = Scratch(std::env::temp_dir().join(format!("admit-live-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0)?;
    let path = dir.0.join("admit.toml");
    std::fs::write(&path, EXAMPLE)?;

    let live = LiveLimits::load(&path)?;
    let limiter = live
        .limiter()
        .ok_or("the example file has [admit.limiter]")?
        .clone();
    let burst = |class| limiter.config(class).map(|c| c.burst());
    println!("loaded {}: class 0 bursts {:?}", path.display(), burst(0));
    // The same client, 25 calls at once: the burst of 20 admits 20.
    let admitted = (0..25)
        .filter(|_| limiter.try_acquire("client-7", 0).is_ok())
        .count();
    println!("client-7: {admitted} of 25 calls admitted");

    let edits: [(&str, &str, &str, bool); 3] = [
        (
            "raise class 0's burst to 40",
            "burst = 20\nrate = \"10/s\"",
            "burst = 40\nrate = \"10/s\"",
            true,
        ),
        (
            "a typo in class 0's rate",
            "burst = 40\nrate = \"10/s\"",
            "burst = 80\nrate = \"10/sec\"",
            false,
        ),
        (
            "change the cap, fixed at build",
            "cap = 4096",
            "cap = 8192",
            false,
        ),
    ];
    let mut text = EXAMPLE.to_owned();
    let mut seen = std::fs::metadata(&path)?.modified()?;
    for (what, from, to, applies) in edits {
        if !text.contains(from) {
            return Err(format!("the example file no longer holds {from:?}").into());
        }
        text = text.replacen(from, to, 1);
        std::fs::write(&path, &text)?;
        println!("\nedit: {what}");
        // A watcher polls the modification time; here it is read at once (a file system
        // with coarse timestamps may not have moved it, so the reload is also forced).
        let before = burst(0);
        match live.reload(&path) {
            Ok(reloaded) if applies => println!("  {reloaded}"),
            Err(e) if !applies => println!("  refused, nothing applied: {e}"),
            Ok(reloaded) => return Err(format!("expected a refusal, got {reloaded}").into()),
            Err(e) => return Err(format!("expected it to apply, got {e}").into()),
        }
        seen = std::fs::metadata(&path)?.modified().unwrap_or(seen);
        println!("  class 0 bursts {:?} (was {before:?})", burst(0));
        if !applies {
            // Put the good line back, as the operator would after reading the error.
            text = text.replacen(to, from, 1);
            std::fs::write(&path, &text)?;
        }
    }
    // The watcher's own loop, once: the file was rewritten to what is running.
    reload_if_changed(&live, &path, &mut seen)?;
    if burst(0) != Some(40) {
        return Err(format!("class 0 should burst 40, bursts {:?}", burst(0)).into());
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    match std::env::args_os().nth(1) {
        Some(path) => watch(Path::new(&path)),
        None => scripted(),
    }
}
