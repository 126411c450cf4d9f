#!/bin/sh
# make-certs.sh DIR: the certificates the TLS tests use, made with the
# openssl command line into DIR (created if needed), all signed by one
# test CA unless said otherwise:
#   ca.crt ca.key            the test CA
#   server.crt server.key    for localhost and 127.0.0.1 (masters, redlockd)
#   client.crt client.key    a client certificate (CN redlockd-test-client)
#   expired.crt expired.key  for localhost and 127.0.0.1, valid only in 2020
#   wrongname.crt wrongname.key  for wrong.example only
#   other-ca.crt other.crt other.key  a second CA and a server certificate
#                            it signed, for localhost and 127.0.0.1 (an
#                            unknown CA to the first)
# Keys are EC P-256; certificates last 30 days (but expired.crt).  Exits
# non-zero with openssl's message when something fails.
set -eu
dir=$1
mkdir -p "$dir"
cd "$dir"
days=30
san_local="subjectAltName=DNS:localhost,IP:127.0.0.1"

key() {
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null
}

# ca NAME SUBJECT: a self-signed CA
ca() {
    key "$1.key"
    openssl req -x509 -new -key "$1.key" -subj "$2" -days $days -out "$1.crt" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
}

# leaf NAME CA SUBJECT EXT [faketime]: a certificate signed by CA
leaf() {
    name=$1 signer=$2 subject=$3 ext=$4 when=${5:-}
    key "$name.key"
    openssl req -new -key "$name.key" -subj "$subject" -out "$name.csr"
    printf '%s\n' "$ext" > "$name.ext"
    if [ -n "$when" ]; then
        faketime "$when" openssl x509 -req -in "$name.csr" -CA "$signer.crt" -CAkey "$signer.key" \
            -CAcreateserial -days 1 -extfile "$name.ext" -out "$name.crt" 2>/dev/null
    else
        openssl x509 -req -in "$name.csr" -CA "$signer.crt" -CAkey "$signer.key" \
            -CAcreateserial -days $days -extfile "$name.ext" -out "$name.crt" 2>/dev/null
    fi
    rm -f "$name.csr" "$name.ext"
}

ca ca "/CN=redlockd test CA"
leaf server ca "/CN=localhost" "$san_local"
leaf client ca "/CN=redlockd-test-client" "extendedKeyUsage=clientAuth"
leaf wrongname ca "/CN=wrong.example" "subjectAltName=DNS:wrong.example"
leaf expired ca "/CN=localhost" "$san_local" "2020-01-01 00:00:00"
ca other-ca "/CN=another test CA"
leaf other other-ca "/CN=localhost" "$san_local"
chmod 600 ./*.key
