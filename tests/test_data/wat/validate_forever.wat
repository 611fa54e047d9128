;; A waPC policy whose settings are always valid and whose `validate` never ends: the server must
;; fail that request at its deadline and keep serving.
(module
  (import "wapc" "__guest_request" (func $request (param i32 i32)))
  (import "wapc" "__guest_response" (func $respond (param i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "{\"valid\":true}")
  (func (export "wapc_init"))
  (func (export "__guest_call") (param $op_len i32) (param $msg_len i32) (result i32)
    (call $request (i32.const 1024) (i32.const 2048))
    ;; validate_settings (17 bytes) and protocol_version (16 bytes) answer; validate (8) loops.
    (if (i32.ne (local.get $op_len) (i32.const 8))
      (then (call $respond (i32.const 0) (i32.const 14)) (return (i32.const 1))))
    (loop $forever (br $forever))
    (i32.const 0)))
