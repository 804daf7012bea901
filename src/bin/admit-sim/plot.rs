//! `--svg FILE`: the human's wait distribution, one CDF curve per variant of a scenario.

use plotters::prelude::*;
use std::path::Path;

/// Draws one cumulative-distribution curve per `(label, waits)` on a log time axis; `waits`
/// sorted.
pub fn waits_svg(path: &Path, runs: &[(String, Vec<std::time::Duration>)]) -> Result<(), String> {
    let fail = |e: &dyn std::fmt::Display| format!("--svg {}: {e}", path.display());
    let micros = |d: &std::time::Duration| (d.as_secs_f64() * 1e6).max(1.0);
    let max = runs
        .iter()
        .flat_map(|(_, waits)| waits.iter().map(micros))
        .fold(10.0_f64, f64::max);
    let root = SVGBackend::new(path, (900, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "human op wait, enqueue to applied (CDF)",
            ("sans-serif", 22),
        )
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(56)
        .build_cartesian_2d((1.0..max * 1.5).log_scale(), 0.0..1.0)
        .map_err(|e| fail(&e))?;
    chart
        .configure_mesh()
        .x_desc("wait (log scale)")
        .x_label_formatter(&|us| label(*us))
        .y_desc("fraction of the human's ops")
        .draw()
        .map_err(|e| fail(&e))?;
    let colours = [RED, BLUE, GREEN, MAGENTA];
    for (i, (label, waits)) in runs.iter().enumerate() {
        let colour = colours.get(i % colours.len()).copied().unwrap_or(BLACK);
        let n = waits.len().max(1) as f64;
        let points = waits
            .iter()
            .enumerate()
            .map(|(k, w)| (micros(w), (k + 1) as f64 / n));
        chart
            .draw_series(LineSeries::new(points, colour.stroke_width(2)))
            .map_err(|e| fail(&e))?
            .label(label.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.9))
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(|e| fail(&e))?;
    root.present().map_err(|e| fail(&e))
}

fn label(us: f64) -> String {
    if us >= 1e6 {
        format!("{:.0} s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.0} ms", us / 1e3)
    } else {
        format!("{us:.0} µs")
    }
}
