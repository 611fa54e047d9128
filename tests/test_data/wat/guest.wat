;; A hand-written waPC guest for the host tests. `__guest_call` fetches the operation and payload
;; with `__guest_request` and dispatches on the operation's first byte:
;;
;;   echo      answers the payload
;;   count     increments four counters (a mutable global, a word of a data segment, a word
;;             written by wapc_init, a word of untouched zero memory) and answers their values
;;             as four little-endian u32s: on fresh state that is always 101, 1001, 501, 1
;;   more      grows memory by one page and answers memory.size (u32): on fresh state always 3
;;   spin      loops forever
;;   grow      grows memory one page at a time until growth fails, then answers "grew"
;;   busy      counts to 2,000,000, then answers "done"
;;   trap      increments the counters, then hits `unreachable` (in $boom)
;;   fail      increments the counters, then answers an error: "guest says no"
;;   oob       answers a buffer outside its memory
;;   validate  answers "not json"
;;   zero      returns 0 without an error message
;;
;; wapc_init reports each initialisation with __host_call("test", "init", "init", "").
;;
;; Memory: 0..1024 scratch (the answer at 512), 1024.. the operation, 65536.. the payload.
(module
  (import "wapc" "__guest_request" (func $request (param i32 i32)))
  (import "wapc" "__guest_response" (func $respond (param i32 i32)))
  (import "wapc" "__guest_error" (func $error (param i32 i32)))
  (import "wapc" "__host_call"
    (func $host_call (param i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 2)
  (global $calls (mut i32) (i32.const 100))
  (data (i32.const 16) "guest says no")
  (data (i32.const 48) "grew")
  (data (i32.const 64) "done")
  (data (i32.const 80) "not json")
  (data (i32.const 96) "unknown operation")
  (data (i32.const 128) "testinit")
  ;; The data-segment counter: 1000.
  (data (i32.const 4096) "\e8\03\00\00")

  (func $init (export "wapc_init")
    ;; Tell the host an instance was initialised: __host_call("test", "init", "init", "").
    (drop (call $host_call
      (i32.const 128) (i32.const 4) (i32.const 132) (i32.const 4) (i32.const 132) (i32.const 4)
      (i32.const 0) (i32.const 0)))
    ;; The counter written during initialisation: 500.
    (i32.store (i32.const 8192) (i32.const 500)))

  (func $bump (param $addr i32) (result i32)
    (i32.store (local.get $addr) (i32.add (i32.load (local.get $addr)) (i32.const 1)))
    (i32.load (local.get $addr)))

  (func $count
    (global.set $calls (i32.add (global.get $calls) (i32.const 1)))
    (i32.store (i32.const 512) (global.get $calls))
    (i32.store (i32.const 516) (call $bump (i32.const 4096)))
    (i32.store (i32.const 520) (call $bump (i32.const 8192)))
    (i32.store (i32.const 524) (call $bump (i32.const 32768))))

  (func $boom
    unreachable)

  (func $guest_call (export "__guest_call") (param $op_len i32) (param $msg_len i32) (result i32)
    (local $op i32) (local $i i32)
    (call $request (i32.const 1024) (i32.const 65536))
    (local.set $op (i32.load8_u (i32.const 1024)))
    ;; e: echo
    (if (i32.eq (local.get $op) (i32.const 101))
      (then (call $respond (i32.const 65536) (local.get $msg_len)) (return (i32.const 1))))
    ;; c: count
    (if (i32.eq (local.get $op) (i32.const 99))
      (then (call $count) (call $respond (i32.const 512) (i32.const 16)) (return (i32.const 1))))
    ;; m: more
    (if (i32.eq (local.get $op) (i32.const 109))
      (then
        (drop (memory.grow (i32.const 1)))
        (i32.store (i32.const 512) (memory.size))
        (call $respond (i32.const 512) (i32.const 4))
        (return (i32.const 1))))
    ;; s: spin
    (if (i32.eq (local.get $op) (i32.const 115))
      (then (loop $forever (br $forever))))
    ;; g: grow
    (if (i32.eq (local.get $op) (i32.const 103))
      (then
        (block $failed
          (loop $again
            (br_if $failed (i32.eq (memory.grow (i32.const 1)) (i32.const -1)))
            (br $again)))
        (call $respond (i32.const 48) (i32.const 4))
        (return (i32.const 1))))
    ;; b: busy
    (if (i32.eq (local.get $op) (i32.const 98))
      (then
        (loop $again
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br_if $again (i32.lt_u (local.get $i) (i32.const 2000000))))
        (call $respond (i32.const 64) (i32.const 4))
        (return (i32.const 1))))
    ;; t: trap
    (if (i32.eq (local.get $op) (i32.const 116))
      (then (call $count) (call $boom)))
    ;; f: fail
    (if (i32.eq (local.get $op) (i32.const 102))
      (then (call $count) (call $error (i32.const 16) (i32.const 13)) (return (i32.const 0))))
    ;; o: oob
    (if (i32.eq (local.get $op) (i32.const 111))
      (then (call $respond (i32.const -16) (i32.const 64)) (return (i32.const 1))))
    ;; v: validate
    (if (i32.eq (local.get $op) (i32.const 118))
      (then (call $respond (i32.const 80) (i32.const 8)) (return (i32.const 1))))
    ;; z: zero
    (if (i32.eq (local.get $op) (i32.const 122))
      (then (return (i32.const 0))))
    (call $error (i32.const 96) (i32.const 17))
    (i32.const 0))
)
