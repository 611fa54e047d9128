//! A policy module's glue, declared once: [`policy!`](crate::policy) writes what every evac
//! policy crate needs to be a Kubewarden waPC module, around the policy's own evaluation.

/// Declares a policy crate's waPC module around its evaluation: what the crate's `lib.rs` states
/// is only its settings type (one of the core's, see [`DecisionSettings`](crate::DecisionSettings))
/// and how `validate` evaluates a payload. It writes:
///
/// - `pub fn settings_answer(payload) -> Result<Vec<u8>, GuestError>`: Kubewarden's
///   SettingsValidationResponse for the settings, encoded, as the module's `validate_settings`
///   answers (a program linking the crate calls it directly);
/// - in the policy module only (wasm32-wasip1): the arena allocator as the global allocator, and
///   `wapc_init`, the waPC entry point, registering `validate`, `validate_settings` and
///   `protocol_version` (Kubewarden's `v1`). Linked into another program (the browser
///   playground), the crate is its functions and the program keeps its own allocator.
///
/// `validate` is a closure-like expression of the payload, returning an [`Answer`](crate::Answer):
/// in the module, the host's capabilities are `host_capabilities` (wasm32-wasip1 only) and
/// the clock is [`wall_clock`](crate::wall_clock). `evaluate_at: f` stands for that with
/// `f(payload, cluster, now, trace)` and no trace.
///
/// ```ignore
/// evac_policy_guest::policy! {
///     settings: evac_core::eviction::Settings,
///     validate: |payload| evaluate(payload, &evac_policy_guest::host_capabilities()),
/// }
/// ```
#[macro_export]
macro_rules! policy {
    // A decision read from the cluster at the wall clock, untraced: `evaluate_at(payload, cluster,
    // now, trace)`.
    (settings: $settings:ty, evaluate_at: $evaluate_at:path $(,)?) => {
        $crate::policy! {
            settings: $settings,
            validate: |payload| {
                let cluster = $crate::host_capabilities();
                $evaluate_at(payload, &cluster, $crate::wall_clock(), &mut $crate::evac_core::trace::Trace::off())
            },
        }
    };
    (settings: $settings:ty, validate: |$payload:ident| $evaluate:expr $(,)?) => {
        // Only in the policy module: linked into another program, the policy is its functions
        // and the program keeps its own allocator.
        #[cfg(target_os = "wasi")]
        #[global_allocator]
        static ALLOCATOR: $crate::allocator::Arena = $crate::allocator::Arena::new();

        /// The waPC entry point: registers the operations the host calls. Only in the policy
        /// module (wasm32-wasip1): another program linking the crate calls its functions itself.
        // An exported, unmangled symbol is how every waPC host finds the entry point.
        #[cfg(target_os = "wasi")]
        #[allow(unsafe_code)]
        #[no_mangle]
        pub extern "C" fn wapc_init() {
            use $crate::kubewarden_policy_sdk::wapc_guest as guest;
            guest::register_function("validate", validate);
            guest::register_function("validate_settings", validate_settings);
            guest::register_function(
                "protocol_version",
                $crate::kubewarden_policy_sdk::protocol_version_guest,
            );
        }

        #[cfg(target_os = "wasi")]
        fn validate($payload: &[u8]) -> $crate::kubewarden_policy_sdk::wapc_guest::CallResult {
            // The error's text is the waPC error the host reads.
            Ok($evaluate?)
        }

        #[cfg(target_os = "wasi")]
        fn validate_settings(payload: &[u8]) -> $crate::kubewarden_policy_sdk::wapc_guest::CallResult {
            Ok(settings_answer(payload)?)
        }

        /// Validates the policy's settings: Kubewarden's SettingsValidationResponse, encoded, as
        /// the module's `validate_settings` answers.
        pub fn settings_answer(payload: &[u8]) -> Result<Vec<u8>, $crate::GuestError> {
            $crate::settings_answer::<$settings>(payload)
        }
    };
}
