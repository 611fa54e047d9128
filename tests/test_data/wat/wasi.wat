;; A waPC guest that changes its WASI context. Operations (by first byte):
;;   close  closes standard output (fd 1)
;;   stat   asks about standard output (fd_fdstat_get)
;;   both   closes standard output, then asks about it
;; Each answers the last WASI errno as a little-endian u32: on a fresh context `close` and
;; `stat` answer 0, and `both` answers 8 (EBADF).
(module
  (import "wapc" "__guest_request" (func $request (param i32 i32)))
  (import "wapc" "__guest_response" (func $respond (param i32 i32)))
  (import "wasi_snapshot_preview1" "fd_close" (func $fd_close (param i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_fdstat_get" (func $fd_fdstat_get (param i32 i32) (result i32)))
  (memory (export "memory") 1)

  (func (export "__guest_call") (param $op_len i32) (param $msg_len i32) (result i32)
    (local $op i32)
    (call $request (i32.const 1024) (i32.const 2048))
    (local.set $op (i32.load8_u (i32.const 1024)))
    ;; c: close
    (if (i32.eq (local.get $op) (i32.const 99))
      (then (i32.store (i32.const 512) (call $fd_close (i32.const 1)))))
    ;; s: stat
    (if (i32.eq (local.get $op) (i32.const 115))
      (then (i32.store (i32.const 512) (call $fd_fdstat_get (i32.const 1) (i32.const 256)))))
    ;; b: both
    (if (i32.eq (local.get $op) (i32.const 98))
      (then
        (drop (call $fd_close (i32.const 1)))
        (i32.store (i32.const 512) (call $fd_fdstat_get (i32.const 1) (i32.const 256)))))
    (call $respond (i32.const 512) (i32.const 4))
    (i32.const 1))
)
