;; Exports a memory but no `__guest_call`: not a waPC guest.
(module
  (memory (export "memory") 1)
  (func (export "wapc_init")))
