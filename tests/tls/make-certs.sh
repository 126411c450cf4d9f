#!/bin/sh
# make-certs.sh DIR: the certificates the TLS tests use, made with the
# openssl command line into DIR (created if needed), all signed by one
# test CA unless said otherwise:
#   ca.crt ca.key            the test CA
#   server.crt server.key    for localhost and 127.0.0.1 (masters, redlockd)
#   client.crt client.key    a client certificate (CN redlockd-test-client)
#   named.crt named.key      a client certificate, CN named-client, with the
#                            DNS subjectAltName worker.example
#   stranger.crt stranger.key  a client certificate, CN stranger-client
#   revoked.crt revoked.key  a client certificate (CN redlockd-revoked-client)
#                            that ca.crl revokes
#   ca.crl                   the test CA's CRL (PEM): revoked.crt only
#   server-rsa.crt server-rsa.key  for localhost and 127.0.0.1, an RSA key
#                            (for the ciphers of RSA certificates)
#   expired.crt expired.key  for localhost and 127.0.0.1, valid only in 2020
#   wrongname.crt wrongname.key  for wrong.example only
#   other-ca.crt other.crt other.key  a second CA and a server certificate
#                            it signed, for localhost and 127.0.0.1 (an
#                            unknown CA to the first)
# Keys are EC P-256 (but server-rsa.key, RSA 2048); certificates last 30 days (but expired.crt).  Exits
# non-zero with openssl's message when something fails.
set -eu
dir=$1
mkdir -p "$dir"
cd "$dir"
days=30
san_local="subjectAltName=DNS:localhost,IP:127.0.0.1"

key() {
    if [ "$1" = server-rsa.key ]; then
        openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$1" 2>/dev/null
    else
        openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null
    fi
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
leaf server-rsa ca "/CN=localhost" "$san_local"
leaf named ca "/CN=named-client" "extendedKeyUsage=clientAuth
subjectAltName=DNS:worker.example"
leaf stranger ca "/CN=stranger-client" "extendedKeyUsage=clientAuth"
leaf revoked ca "/CN=redlockd-revoked-client" "extendedKeyUsage=clientAuth"

# The CRL: openssl ca with a database of its own in crl.d (then removed).
mkdir -p crl.d
: > crl.d/index.txt
echo 01 > crl.d/crlnumber
cat > crl.d/ca.cnf <<EOF
[ ca ]
default_ca = test_ca
[ test_ca ]
database = crl.d/index.txt
crlnumber = crl.d/crlnumber
default_md = sha256
default_crl_days = $days
EOF
openssl ca -config crl.d/ca.cnf -cert ca.crt -keyfile ca.key -revoke revoked.crt 2>/dev/null
openssl ca -config crl.d/ca.cnf -cert ca.crt -keyfile ca.key -gencrl -out ca.crl 2>/dev/null
rm -rf crl.d
chmod 600 ./*.key
