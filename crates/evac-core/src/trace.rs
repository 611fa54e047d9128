//! The checks a decision made, in the order it made them, in words: what the playground shows
//! under a verdict ("pod is a virt-launcher on node node01; ... not yet marked -> 429, mark"). Recording
//! is off for policy modules and servers; a step's text is only built when it is on.

/// The steps of one decision, or nothing when off.
#[derive(Debug, Default)]
pub struct Trace {
    steps: Option<Vec<String>>,
}

impl Trace {
    /// A trace that records nothing (what every policy module passes).
    pub fn off() -> Self {
        Self { steps: None }
    }

    /// A trace that records every step.
    pub fn on() -> Self {
        Self { steps: Some(Vec::new()) }
    }

    /// Records one step; `step` runs only when the trace is on.
    pub fn note(&mut self, step: impl FnOnce() -> String) {
        if let Some(steps) = &mut self.steps {
            steps.push(step());
        }
    }

    /// The steps so far (none when off).
    pub fn steps(&self) -> &[String] {
        self.steps.as_deref().unwrap_or_default()
    }

    /// The steps, in order.
    pub fn into_steps(self) -> Vec<String> {
        self.steps.unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::Trace;

    #[test]
    fn an_off_trace_builds_no_text() {
        let mut trace = Trace::off();
        trace.note(|| unreachable!("an off trace must not build its steps"));
        assert!(trace.steps().is_empty());
    }

    #[test]
    fn an_on_trace_keeps_the_order() {
        let mut trace = Trace::on();
        trace.note(|| "first".into());
        trace.note(|| "second".into());
        assert_eq!(trace.into_steps(), ["first", "second"]);
    }
}
