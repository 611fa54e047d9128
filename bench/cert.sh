#!/usr/bin/env bash
# A self-signed ECDSA P-256 certificate for 127.0.0.1, valid one day: DIR/tls.crt and DIR/tls.key.
#   bench/cert.sh DIR
set -euo pipefail
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$1/tls.key" \
  -out "$1/tls.crt" -days 1 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 2>/dev/null
