//! Disruption causes: placeholder until the decision lands.
