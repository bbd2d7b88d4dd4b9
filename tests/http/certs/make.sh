#!/bin/sh
# Test-only TLS material for tests/http/test_http_tls.py, committed so the suites need no openssl in the
# lab cells: a CA and two server certificates it signs (the second stands for a rotated one), for
# localhost, 127.0.0.1 and ::1, valid for 100 years. Never use these keys for anything else.
#   sh tests/http/certs/make.sh      (run from anywhere; rewrites the files)
set -eu
cd "$(dirname "$0")"
days=36500
# The extensions Python 3.13+ asks for by default (VERIFY_X509_STRICT): a CA that says what its key signs,
# and leaves that say what theirs do and name the key that signed them.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days $days -subj "/CN=mcpserver test CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -addext "subjectKeyIdentifier=hash" -keyout ca.key -out ca.pem 2>/dev/null
for name in first second; do
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=mcpserver test $name" \
        -keyout "$name.key" -out "$name.csr" 2>/dev/null
    printf '%s\n' 'subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1' 'extendedKeyUsage=serverAuth' \
        'keyUsage=critical,digitalSignature' 'basicConstraints=critical,CA:FALSE' 'subjectKeyIdentifier=hash' \
        'authorityKeyIdentifier=keyid' > "$name.ext"
    openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days $days \
        -extfile "$name.ext" -out "$name.pem" 2>/dev/null
    rm "$name.csr" "$name.ext"
done
rm -f ca.srl ca.key  # nothing more is ever signed
