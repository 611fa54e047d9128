//! The AdmissionReview envelope (`admission.k8s.io/v1`): [`evac_core::model::envelope`], with
//! anyhow's errors for the command line.

use anyhow::Result;
use serde_json::value::RawValue;

/// The AdmissionRequest inside an input that is either a whole AdmissionReview or a bare request.
pub fn request_from_input(input: &[u8]) -> Result<Box<RawValue>> {
    Ok(evac_core::model::envelope::request_from_input(input)?)
}
