;; `__guest_call` with the wrong signature.
(module
  (memory (export "memory") 1)
  (func (export "__guest_call") (param i32) (result i32) (i32.const 1)))
