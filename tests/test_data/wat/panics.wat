;; A Kubewarden policy that accepts its settings and panics in `validate` as a Rust policy does:
;; it writes the panic message to standard error (WASI fd_write), then traps.
(module
  (import "wapc" "__guest_request" (func $request (param i32 i32)))
  (import "wapc" "__guest_response" (func $respond (param i32 i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 4096) "{\22valid\22:true}")
  (data (i32.const 4160) "panicked at src/lib.rs:12:5:\0aboom\0a")

  (func (export "__guest_call") (param $op_len i32) (param $msg_len i32) (result i32)
    (call $request (i32.const 1024) (i32.const 8192))
    ;; validate_settings (17 bytes): valid
    (if (i32.eq (local.get $op_len) (i32.const 17))
      (then
        (call $respond (i32.const 4096) (i32.const 14))
        (return (i32.const 1))))
    ;; validate: panic
    (i32.store (i32.const 256) (i32.const 4160))
    (i32.store (i32.const 260) (i32.const 34))
    (drop (call $fd_write (i32.const 2) (i32.const 256) (i32.const 1) (i32.const 264)))
    (unreachable))
)
