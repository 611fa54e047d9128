//! The AdmissionReview envelope (`admission.k8s.io/v1`): [`evac_core::model::envelope`].

pub use evac_core::model::envelope::{request_from_input, NotARequest};
