//! Evacuations: placeholder until the decision lands.
