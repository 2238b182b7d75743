//! Writing the Prometheus text exposition format (version 0.0.4).
//!
//! The one thing to know: every label value goes through [`escape`], so a workflow slug,
//! a state, a model name or a rule id holding a backslash, a double quote or a line break
//! cannot end its sample early or forge another one. Metric and label names are the
//! server's own constants.

use std::fmt::{Display, Write};

/// Upper bounds of the turn latency histogram, in seconds.
pub const TURN_BUCKETS: &[f64] = &[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0, 120.0];
/// Upper bounds of the store commit latency histogram, in seconds.
pub const COMMIT_BUCKETS: &[f64] = &[0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0];

/// A label value as the format carries it between double quotes.
pub fn escape(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len());
    for character in value.chars() {
        match character {
            '\\' => escaped.push_str("\\\\"),
            '"' => escaped.push_str("\\\""),
            '\n' => escaped.push_str("\\n"),
            other => escaped.push(other),
        }
    }
    escaped
}

/// The text being written.
#[derive(Default)]
pub struct Exposition {
    out: String,
}

impl Exposition {
    /// The `# HELP` and `# TYPE` lines of one metric family.
    pub fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    /// One sample: `name{label="value",…} value`.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl Display) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (index, (label, value)) in labels.iter().enumerate() {
                if index > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{label}=\"{}\"", escape(value));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
    }

    /// A whole family of one sample per label set.
    pub fn counters<'a, V: Display + 'a>(
        &mut self,
        name: &str,
        kind: &str,
        help: &str,
        samples: impl IntoIterator<Item = (Vec<(&'a str, &'a str)>, V)>,
    ) {
        self.family(name, kind, help);
        for (labels, value) in samples {
            self.sample(name, &labels, value);
        }
    }

    /// The `_bucket`, `_sum` and `_count` samples of one histogram's label set.
    pub fn histogram(&mut self, name: &str, labels: &[(&str, &str)], histogram: &Histogram) {
        let bucket = format!("{name}_bucket");
        let mut cumulative = 0;
        for (bound, count) in histogram.bounds.iter().zip(&histogram.counts) {
            cumulative += count;
            let bound = bound.to_string();
            let mut with_le = labels.to_vec();
            with_le.push(("le", &bound));
            self.sample(&bucket, &with_le, cumulative);
        }
        let mut with_le = labels.to_vec();
        with_le.push(("le", "+Inf"));
        self.sample(&bucket, &with_le, histogram.count);
        self.sample(&format!("{name}_sum"), labels, histogram.sum);
        self.sample(&format!("{name}_count"), labels, histogram.count);
    }

    pub fn finish(self) -> String {
        self.out
    }
}

/// Observations sorted into fixed buckets (each count is of its own bucket; the writer
/// makes them cumulative).
#[derive(Clone, Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    counts: Vec<u64>,
    count: u64,
    sum: f64,
}

impl Histogram {
    pub fn new(bounds: &'static [f64]) -> Histogram {
        Histogram { bounds, counts: vec![0; bounds.len()], count: 0, sum: 0.0 }
    }

    pub fn observe(&mut self, seconds: f64) {
        if let Some(bucket) = self.bounds.iter().position(|bound| seconds <= *bound) {
            self.counts[bucket] += 1;
        }
        self.count += 1;
        self.sum += seconds;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_value_cannot_break_out_of_its_quotes() {
        let mut exposition = Exposition::default();
        exposition.sample("m", &[("workflow", "a\"b\\c\nd")], 1);
        assert_eq!(exposition.finish(), "m{workflow=\"a\\\"b\\\\c\\nd\"} 1\n");
    }

    #[test]
    fn histogram_buckets_are_cumulative_and_end_at_the_count() {
        let mut histogram = Histogram::new(&[1.0, 2.0]);
        for seconds in [0.5, 1.5, 1.5, 9.0] {
            histogram.observe(seconds);
        }
        let mut exposition = Exposition::default();
        exposition.histogram("h", &[("w", "x")], &histogram);
        let text = exposition.finish();
        assert!(text.contains("h_bucket{w=\"x\",le=\"1\"} 1\n"), "{text}");
        assert!(text.contains("h_bucket{w=\"x\",le=\"2\"} 3\n"), "{text}");
        assert!(text.contains("h_bucket{w=\"x\",le=\"+Inf\"} 4\n"), "{text}");
        assert!(text.contains("h_count{w=\"x\"} 4\n"), "{text}");
    }
}
