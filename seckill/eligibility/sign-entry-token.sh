#!/bin/sh
# sign-entry-token.sh: a merchant's entry token, signed with openssl alone
# (what it signs and why: README.md beside this file).
#
#   sign-entry-token.sh KEY.pem KID USER_ID VOUCHER_ID PERSON [LANE] [TTL_SECONDS]
#
# KEY.pem is the merchant's Ed25519 private key (openssl genpkey -algorithm
# ed25519 -out KEY.pem); KID names its public key in SECKILL_ENTRY_TOKEN_KEYS;
# PERSON is the merchant's key of the person (e.g. a hex HMAC of what
# identifies them), LANE standard (the default) or priority, TTL_SECONDS the
# token's life (default 3600). Prints the token.
set -eu
[ $# -ge 5 ] || { echo "usage: $0 KEY.pem KID USER_ID VOUCHER_ID PERSON [LANE] [TTL_SECONDS]" >&2; exit 2; }
key=$1 kid=$2 sub=$3 voucher=$4 person=$5 lane=${6:-standard} ttl=${7:-3600}

b64url() { openssl base64 -A | tr '+/' '-_' | tr -d '='; }

now=$(date +%s)
header=$(printf '{"alg":"EdDSA","typ":"JWT","kid":"%s"}' "$kid" | b64url)
payload=$(printf '{"sub":"%s","voucher_id":"%s","person":"%s","lane":"%s","iat":%d,"exp":%d}' \
	"$sub" "$voucher" "$person" "$lane" "$now" $((now + ttl)) | b64url)

input=$(mktemp)
trap 'rm -f "$input"' EXIT
printf '%s.%s' "$header" "$payload" >"$input"
sig=$(openssl pkeyutl -sign -inkey "$key" -rawin -in "$input" | b64url)
printf '%s.%s.%s\n' "$header" "$payload" "$sig"
