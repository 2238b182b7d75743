//! An error and its causes on one line.
//!
//! The one thing to know: many libraries' own message stops at their layer ("db error",
//! "error sending request", "error performing TLS handshake") with the reason a person
//! needs one `source()` further down, so a message shown to a person walks the chain.

/// `error` and every cause under it, `: `-joined, leaving out a cause whose text the line
/// already holds (a wrapper that repeats its source's message).
pub fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        let said = next.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        cause = next.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);

    impl std::fmt::Display for Layer {
        fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            formatter.write_str(self.0)
        }
    }

    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|layer| layer as &(dyn std::error::Error + 'static))
        }
    }

    #[test]
    fn every_cause_is_joined_once() {
        let chain = Layer("db error", Some(Box::new(Layer("FATAL: no such database", None))));
        assert_eq!(with_causes(&chain), "db error: FATAL: no such database");
        let repeated = Layer("request failed: timed out", Some(Box::new(Layer("timed out", None))));
        assert_eq!(with_causes(&repeated), "request failed: timed out");
        assert_eq!(with_causes(&Layer("alone", None)), "alone");
    }
}
