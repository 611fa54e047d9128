;; Imports a host function that neither waPC nor WASI provide.
(module
  (import "wapc" "__launch_missiles" (func $launch (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "__guest_call") (param i32 i32) (result i32)
    (call $launch (i32.const 0) (i32.const 0))))
