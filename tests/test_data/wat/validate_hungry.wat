;; A waPC policy whose settings are always valid and whose `validate` grows its memory a page at a
;; time until the host's memory limit stops it: the server must fail that request and keep serving.
(module
  (import "wapc" "__guest_request" (func $request (param i32 i32)))
  (import "wapc" "__guest_response" (func $respond (param i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "{\"valid\":true}")
  (func (export "wapc_init"))
  (func (export "__guest_call") (param $op_len i32) (param $msg_len i32) (result i32)
    (if (i32.ne (local.get $op_len) (i32.const 8))
      (then (call $respond (i32.const 0) (i32.const 14)) (return (i32.const 1))))
    (loop $more
      (br_if $more (i32.ne (memory.grow (i32.const 1)) (i32.const -1))))
    (i32.const 0)))
