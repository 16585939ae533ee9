//! The one table `make bench` prints: every figure, and for those with a
//! target, the target (one number, in the figure's own unit) and whether it
//! was met.

use std::time::Duration;

pub enum Unit {
    Millis,
    Mebibytes,
    Count,
    Text(String),
}

pub enum Target {
    Below(f64),
    Exactly(f64),
}

pub struct Row {
    pub figure: String,
    pub value: f64,
    pub unit: Unit,
    pub target: Option<Target>,
}

impl Row {
    pub fn new(figure: impl Into<String>, value: f64, unit: Unit) -> Row {
        Row {
            figure: figure.into(),
            value,
            unit,
            target: None,
        }
    }

    pub fn millis(figure: impl Into<String>, duration: Duration) -> Row {
        Row::new(figure, duration.as_secs_f64() * 1000.0, Unit::Millis)
    }

    pub fn target(mut self, target: Target) -> Row {
        self.target = Some(target);
        self
    }

    fn show(&self, value: f64) -> String {
        match &self.unit {
            Unit::Millis => format!("{value:.3} ms"),
            Unit::Mebibytes => format!("{value:.2} MiB"),
            Unit::Count => format!("{value}"),
            Unit::Text(text) => text.clone(),
        }
    }
}

pub fn percentile(values: &[Duration], p: f64) -> Duration {
    let mut sorted = values.to_vec();
    sorted.sort();
    sorted
        .get(((sorted.len().max(1) - 1) as f64 * p).round() as usize)
        .copied()
        .unwrap_or_default()
}

pub fn print(rows: &[Row]) {
    println!("| figure | measured | target | |");
    println!("| --- | --- | --- | --- |");
    for row in rows {
        let (target, verdict) = match &row.target {
            None => (String::new(), ""),
            Some(Target::Below(limit)) => (
                format!("< {}", row.show(*limit)),
                if row.value < *limit { "met" } else { "MISSED" },
            ),
            Some(Target::Exactly(expected)) => (
                row.show(*expected),
                if row.value == *expected { "met" } else { "MISSED" },
            ),
        };
        println!("| {} | {} | {target} | {verdict} |", row.figure, row.show(row.value));
    }
}
