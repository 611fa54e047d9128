;; A waPC guest that calls WASI. Operations (by first byte):
;;   w  write  writes "hello" to standard error (fd_write); answers the errno, then the count
;;   c  close  closes standard output (fd_close)
;;   s  stat   asks about standard output (fd_fdstat_get)
;;   o  open   opens a file (path_open)
;;   z  sleep  sleeps 3 s on a clock subscription (poll_oneoff)
;;   p  panic  writes "panicked at policy.rs:7: boom" to standard error, then traps
;;   x         exits with status 3 (proc_exit)
;;   r  random asks for 2 GiB of random bytes (random_get): more than its memory
;;   v  vector writes with 100,000 buffers (fd_write): more than WASI's IOV_MAX
;; Each answers the WASI errno as a little-endian u32 (write: and the count written).
(module
  (import "wapc" "__guest_request" (func $request (param i32 i32)))
  (import "wapc" "__guest_response" (func $respond (param i32 i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_close" (func $fd_close (param i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_fdstat_get" (func $fd_fdstat_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_open"
    (func $path_open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "poll_oneoff" (func $poll_oneoff (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))
  (import "wasi_snapshot_preview1" "random_get" (func $random_get (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 4096) "hello")
  (data (i32.const 4160) "panicked at policy.rs:7:\0aboom\0a")
  (data (i32.const 4224) "/etc/passwd")

  (func (export "__guest_call") (param $op_len i32) (param $msg_len i32) (result i32)
    (local $op i32)
    (call $request (i32.const 1024) (i32.const 2048))
    (local.set $op (i32.load8_u (i32.const 1024)))
    (i32.store (i32.const 516) (i32.const 0))
    ;; w: write "hello" (iovec at 256: ptr 4096, len 5), count at 516
    (if (i32.eq (local.get $op) (i32.const 119))
      (then
        (i32.store (i32.const 256) (i32.const 4096))
        (i32.store (i32.const 260) (i32.const 5))
        (i32.store (i32.const 512) (call $fd_write (i32.const 2) (i32.const 256) (i32.const 1) (i32.const 516)))))
    ;; c: close
    (if (i32.eq (local.get $op) (i32.const 99))
      (then (i32.store (i32.const 512) (call $fd_close (i32.const 1)))))
    ;; s: stat
    (if (i32.eq (local.get $op) (i32.const 115))
      (then (i32.store (i32.const 512) (call $fd_fdstat_get (i32.const 1) (i32.const 256)))))
    ;; o: open /etc/passwd relative to descriptor 3
    (if (i32.eq (local.get $op) (i32.const 111))
      (then (i32.store (i32.const 512)
        (call $path_open (i32.const 3) (i32.const 0) (i32.const 4224) (i32.const 11) (i32.const 0)
                         (i64.const 2) (i64.const 0) (i32.const 0) (i32.const 300)))))
    ;; z: one clock subscription (at 3072: userdata, tag 0 clock, id 1 monotonic, timeout 3 s)
    (if (i32.eq (local.get $op) (i32.const 122))
      (then
        (i64.store (i32.const 3072) (i64.const 7))
        (i32.store8 (i32.const 3080) (i32.const 0))
        (i32.store (i32.const 3088) (i32.const 1))
        (i64.store (i32.const 3096) (i64.const 3000000000))
        (i64.store (i32.const 3104) (i64.const 0))
        (i32.store16 (i32.const 3112) (i32.const 0))
        (i32.store (i32.const 512) (call $poll_oneoff (i32.const 3072) (i32.const 3200) (i32.const 1) (i32.const 520)))))
    ;; p: panic
    (if (i32.eq (local.get $op) (i32.const 112))
      (then
        (i32.store (i32.const 256) (i32.const 4160))
        (i32.store (i32.const 260) (i32.const 30))
        (drop (call $fd_write (i32.const 2) (i32.const 256) (i32.const 1) (i32.const 516)))
        (unreachable)))
    ;; r: random_get of 2 GiB
    (if (i32.eq (local.get $op) (i32.const 114))
      (then (i32.store (i32.const 512) (call $random_get (i32.const 0) (i32.const 0x7fffffff)))))
    ;; v: fd_write with 100,000 buffers
    (if (i32.eq (local.get $op) (i32.const 118))
      (then (i32.store (i32.const 512) (call $fd_write (i32.const 2) (i32.const 256) (i32.const 100000) (i32.const 516)))))
    ;; x: exit
    (if (i32.eq (local.get $op) (i32.const 120))
      (then (call $proc_exit (i32.const 3))))
    (call $respond (i32.const 512) (i32.const 8))
    (i32.const 1))
)
