//! evacuation: placeholder until the decision lands.
