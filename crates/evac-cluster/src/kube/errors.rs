//! Error texts for people: kube-rs' own texts hide the cause in the source chain ("ServiceError:
//! client error (Connect)") or print the API server's answer as a Rust debug dump.

use kube::core::ErrorResponse;
use kube::runtime::watcher;

/// An error and its sources on one line, each cause once.
pub(super) fn error_text(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// A client error: the API server's message when it answered, else the transport error.
pub(super) fn kube_error_text(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(response) => response_text(response),
        other => error_text(other),
    }
}

/// A watch error, saying which step failed.
pub(super) fn watch_error_text(error: &watcher::Error) -> String {
    match error {
        watcher::Error::InitialListFailed(error) => format!("list failed: {}", kube_error_text(error)),
        watcher::Error::WatchStartFailed(error) => {
            format!("watch failed to start: {}", kube_error_text(error))
        }
        watcher::Error::WatchError(response) => format!("watch failed: {}", response_text(response)),
        watcher::Error::WatchFailed(error) => format!("watch failed: {}", kube_error_text(error)),
        other => error_text(other),
    }
}

/// `<message> (<code> <reason>)`, e.g. `pods is forbidden: ... (403 Forbidden)`.
fn response_text(response: &ErrorResponse) -> String {
    format!("{} ({} {})", response.message, response.code, response.reason)
}
