;; `wapc_init` never returns.
(module
  (memory (export "memory") 1)
  (func (export "wapc_init") (loop $forever (br $forever)))
  (func (export "__guest_call") (param i32 i32) (result i32) (i32.const 1)))
