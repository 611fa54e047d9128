//! disruption-cause: placeholder until the decision lands.
