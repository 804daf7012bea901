//! Result tables: printed for people, serialised for machines, from the same cells.

use serde_json::{json, Map, Value};
use std::borrow::Cow;
use std::fmt::Write as _;
use std::time::Duration;

/// One number or word in a table.
#[derive(Debug, Clone)]
pub enum Cell {
    Count(u64),
    Bytes(u64),
    Time(Duration),
    Text(String),
}

impl Cell {
    fn render(&self) -> String {
        match self {
            Self::Count(n) => group_digits(*n),
            Self::Bytes(n) => render_bytes(*n),
            Self::Time(d) => render_duration(*d),
            Self::Text(t) => t.clone(),
        }
    }

    fn json(&self) -> Value {
        match self {
            Self::Count(n) | Self::Bytes(n) => json!(n),
            Self::Time(d) => json!(u64::try_from(d.as_micros()).unwrap_or(u64::MAX)),
            Self::Text(t) => json!(t),
        }
    }
}

fn group_digits(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Bytes in the largest unit that keeps the number at least 1 (B, KiB, MiB, GiB).
pub fn render_bytes(n: u64) -> String {
    const KIB: f64 = 1024.0;
    let x = n as f64;
    if n < 1024 {
        format!("{n} B")
    } else if x < KIB * KIB {
        format!("{:.1} KiB", x / KIB)
    } else if x < KIB * KIB * KIB {
        format!("{:.1} MiB", x / (KIB * KIB))
    } else {
        format!("{:.1} GiB", x / (KIB * KIB * KIB))
    }
}

fn render_duration(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1_000.0 {
        format!("{us:.0} µs")
    } else if us < 1_000_000.0 {
        format!("{:.1} ms", us / 1e3)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

/// A row: a label and one cell per column.
#[derive(Debug, Clone)]
pub struct Row {
    pub label: Cow<'static, str>,
    /// Key of the row in JSON (snake_case, units in the name where there are any).
    pub key: Cow<'static, str>,
    pub cells: Vec<Cell>,
}

/// One scenario's summary.
#[derive(Debug, Clone)]
pub struct Table {
    /// The scenario name, as given on the command line.
    pub scenario: &'static str,
    /// The heading printed above the table (and pasted in README.md).
    pub heading: &'static str,
    pub columns: Vec<String>,
    pub rows: Vec<Row>,
    pub notes: Vec<String>,
}

impl Table {
    pub fn new(scenario: &'static str, heading: &'static str, columns: Vec<String>) -> Self {
        Self {
            scenario,
            heading,
            columns,
            rows: Vec::new(),
            notes: Vec::new(),
        }
    }

    pub fn row(
        &mut self,
        label: impl Into<Cow<'static, str>>,
        key: impl Into<Cow<'static, str>>,
        cells: Vec<Cell>,
    ) {
        self.rows.push(Row {
            label: label.into(),
            key: key.into(),
            cells,
        });
    }

    pub fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }

    /// The table as text.
    pub fn render(&self) -> String {
        let label_width = self
            .rows
            .iter()
            .map(|r| r.label.chars().count())
            .max()
            .unwrap_or(0);
        let rendered: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| r.cells.iter().map(Cell::render).collect())
            .collect();
        let widths: Vec<usize> = self
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| {
                rendered
                    .iter()
                    .filter_map(|cells| cells.get(i).map(|s| s.chars().count()))
                    .chain(std::iter::once(c.chars().count()))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        let _ = writeln!(out, "== {} ==", self.heading);
        let _ = write!(out, "{:label_width$}", "");
        for (c, w) in self.columns.iter().zip(&widths) {
            let _ = write!(out, "  {c:>w$}");
        }
        out.push('\n');
        for (row, cells) in self.rows.iter().zip(&rendered) {
            let _ = write!(out, "{:label_width$}", &*row.label);
            for (cell, w) in cells.iter().zip(&widths) {
                let _ = write!(out, "  {cell:>w$}");
            }
            out.push('\n');
        }
        for note in &self.notes {
            let _ = writeln!(out, "  {note}");
        }
        out
    }

    /// The table as JSON: `{"heading", "columns", "rows": {key: {column: value}}, "notes"}`.
    pub fn json(&self) -> Value {
        let mut rows = Map::new();
        for row in &self.rows {
            let mut cells = Map::new();
            for (column, cell) in self.columns.iter().zip(&row.cells) {
                cells.insert(column.clone(), cell.json());
            }
            rows.insert(row.key.to_string(), Value::Object(cells));
        }
        json!({
            "heading": self.heading,
            "columns": self.columns,
            "rows": rows,
            "notes": self.notes,
        })
    }
}

/// Percentiles of a sample (nearest rank); zero for an empty sample.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted
        .get(rank.saturating_sub(1).min(sorted.len() - 1))
        .copied()
        .unwrap_or(Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_are_grouped_and_durations_scaled() {
        assert_eq!(group_digits(1234567), "1,234,567");
        assert_eq!(group_digits(12), "12");
        assert_eq!(render_bytes(512), "512 B");
        assert_eq!(render_bytes(24_848), "24.3 KiB");
        assert_eq!(render_bytes(12_288_000_000), "11.4 GiB");
        assert_eq!(render_duration(Duration::from_micros(15)), "15 µs");
        assert_eq!(render_duration(Duration::from_micros(1500)), "1.5 ms");
        assert_eq!(render_duration(Duration::from_millis(2500)), "2.50 s");
    }

    #[test]
    fn percentiles_use_nearest_rank() {
        let s: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&s, 50.0), Duration::from_millis(50));
        assert_eq!(percentile(&s, 99.0), Duration::from_millis(99));
        assert_eq!(percentile(&s, 100.0), Duration::from_millis(100));
        assert_eq!(percentile(&[], 50.0), Duration::ZERO);
    }

    #[test]
    fn json_carries_every_cell() {
        let mut t = Table::new("x", "x", vec!["a".into(), "b".into()]);
        t.row(
            "Row one",
            "row_one",
            vec![Cell::Count(3), Cell::Time(Duration::from_micros(7))],
        );
        let v = t.json();
        assert_eq!(v["rows"]["row_one"]["a"], json!(3));
        assert_eq!(v["rows"]["row_one"]["b"], json!(7));
    }
}
