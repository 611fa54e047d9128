// The waPC host functions, for the module's imports only. The policy crates link Kubewarden's
// SDK, whose waPC guest exports `__guest_call` and so imports these; the page never calls
// `__guest_call` (it calls the policies' functions directly), so none of these ever runs. Each
// throws, should that change.
const absent = (name) => () => {
  throw new Error(`waPC host function ${name} called in the playground, which is not a waPC host`);
};
export const __console_log = absent("__console_log");
export const __host_call = absent("__host_call");
export const __host_response = absent("__host_response");
export const __host_response_len = absent("__host_response_len");
export const __host_error_len = absent("__host_error_len");
export const __host_error = absent("__host_error");
export const __guest_response = absent("__guest_response");
export const __guest_error = absent("__guest_error");
export const __guest_request = absent("__guest_request");
