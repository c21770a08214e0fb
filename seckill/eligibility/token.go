// Package eligibility decides who may enter a voucher's line or draw: one
// person, one chance. A voucher with entry.token_required takes entries
// only with an entry token its merchant signed (a JWT signed with Ed25519,
// "EdDSA", by a key the platform knows), naming the shopper, the voucher,
// a key unique to the person, an expiry and optionally a lane; a voucher
// with entry.allowlist takes entries only from the user ids and person keys
// an operator uploaded. The line (seckill/waitroom) and the draw
// (seckill/draw) know nothing of it: the gateway asks this package before
// either is joined.
//
// Its Redis keys are this package's alone (store.go):
//
//	eligibility:{v42}:persons  hash  sha256(person key) -> user id holding the place
//	eligibility:{v42}:allow    set   'u:<user id>' and 'p:<sha256(person key)>'
//
// What a merchant signs, and how, is in this folder's README.md.
package eligibility

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
)

// Rules of the entry tokens this platform accepts.
const (
	// Algorithm is the only signing algorithm accepted: Ed25519.
	Algorithm = "EdDSA"
	// Leeway is the clock skew tolerated on exp and nbf between the
	// merchant's signer and this server.
	Leeway = 30 * time.Second
	// MaxTokenLen bounds what is parsed at all; a real token is a few
	// hundred bytes.
	MaxTokenLen = 2048
	// MaxPersonLen bounds a person key. A merchant sends an opaque key
	// (a hash of what identifies the person to it), never the identity.
	MaxPersonLen = 128
	// MaxLifetime is the longest an entry token may live (exp - iat when
	// iat is set): a token is for one sale, not a standing pass.
	MaxLifetime = 7 * 24 * time.Hour
)

// Lane is an entry's lane in a line.
type Lane string

// The lanes. A token without a lane is in LaneStandard.
const (
	LaneStandard Lane = "standard"
	// LanePriority entries stand ahead of every standard one in the
	// pre-queue (seckill/waitroom). In a draw lanes change nothing.
	LanePriority Lane = "priority"
)

// Entry is what a valid token grants: the person it names, the lane, and
// until when.
type Entry struct {
	// Person is the merchant's key of the person: one place per key.
	Person    string
	Lane      Lane
	ExpiresAt time.Time
}

// Claims are an entry token's payload.
type Claims struct {
	// Subject (sub) is the platform user id, in decimal.
	jwt.RegisteredClaims
	// VoucherID is the voucher, in decimal.
	VoucherID string `json:"voucher_id"`
	// Person is the merchant's key of the person (1 to MaxPersonLen
	// bytes), the same for every account of that person.
	Person string `json:"person"`
	// Lane is "", "standard" or "priority".
	Lane string `json:"lane,omitempty"`
}

// Keys are the merchants' public keys, by key id (the token's kid).
type Keys map[string]ed25519.PublicKey

// ParseKeys reads SECKILL_ENTRY_TOKEN_KEYS: comma-separated kid=key pairs,
// each key the base64 (standard or URL alphabet, padded or not) of either
// the 32 bytes of an Ed25519 public key or its DER SubjectPublicKeyInfo
// (what `openssl pkey -pubout -outform DER` writes). Empty: no keys.
func ParseKeys(s string) (Keys, error) {
	keys := Keys{}
	for _, pair := range strings.Split(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		kid, b64, ok := strings.Cut(pair, "=")
		kid = strings.TrimSpace(kid)
		if !ok || kid == "" {
			return nil, fmt.Errorf("eligibility: %q is not kid=base64-public-key", pair)
		}
		if _, dup := keys[kid]; dup {
			return nil, fmt.Errorf("eligibility: key id %q is named twice", kid)
		}
		key, err := decodeKey(strings.TrimSpace(b64))
		if err != nil {
			return nil, fmt.Errorf("eligibility: key %q: %w", kid, err)
		}
		keys[kid] = key
	}
	return keys, nil
}

func decodeKey(b64 string) (ed25519.PublicKey, error) {
	var raw []byte
	var err error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if raw, err = enc.DecodeString(b64); err == nil {
			break
		}
	}
	if err != nil {
		return nil, errors.New("not base64")
	}
	if len(raw) == ed25519.PublicKeySize {
		return ed25519.PublicKey(raw), nil
	}
	pub, err := x509.ParsePKIXPublicKey(raw)
	if err != nil {
		return nil, fmt.Errorf("neither 32 bytes nor a DER public key: %w", err)
	}
	key, ok := pub.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("a %T, not an Ed25519 key", pub)
	}
	return key, nil
}

// Verifier checks entry tokens against the merchants' keys. It is safe for
// concurrent use.
type Verifier struct {
	keys   Keys
	parser *jwt.Parser
}

// NewVerifier returns the verifier of keys (none: every token is refused).
// now is the clock (nil: time.Now).
func NewVerifier(keys Keys, now func() time.Time) *Verifier {
	if now == nil {
		now = time.Now
	}
	return &Verifier{keys: keys, parser: jwt.NewParser(
		jwt.WithValidMethods([]string{Algorithm}),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(Leeway),
		jwt.WithTimeFunc(now),
	)}
}

// refuse is a not_eligible refusal whose message says what is wrong and
// what to do.
func refuse(format string, args ...any) error {
	return apperr.Publicf(seckill.ErrNotEligible, format, args...)
}

// Verify checks token for userID's entry of voucherID: the signature by a
// known key, the expiry, the voucher, the shopper, the person key and the
// lane. Any fault is seckill.ErrNotEligible with a message for the shopper.
func (v *Verifier) Verify(token string, voucherID, userID int64) (Entry, error) {
	const ask = "ask the merchant for a new entry token for this voucher and your account"
	if token == "" {
		return Entry{}, refuse("this voucher takes entries only with an entry token from its merchant: get one from the merchant and send it in the Seckill-Entry-Token header")
	}
	if len(token) > MaxTokenLen {
		return Entry{}, refuse("the entry token is longer than %d bytes; %s", MaxTokenLen, ask)
	}
	var c Claims
	_, err := v.parser.ParseWithClaims(token, &c, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		key, ok := v.keys[kid]
		if !ok {
			return nil, fmt.Errorf("unknown key id %q", kid)
		}
		return key, nil
	})
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return Entry{}, refuse("the entry token has expired; %s", ask)
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return Entry{}, refuse("the entry token is not valid yet; try again at its time, or %s", ask)
	case err != nil:
		return Entry{}, refuse("the entry token is not signed by a key this platform knows for its merchant (or is malformed); %s", ask)
	}
	if c.VoucherID != strconv.FormatInt(voucherID, 10) {
		return Entry{}, refuse("the entry token is for another voucher; %s", ask)
	}
	if c.Subject != strconv.FormatInt(userID, 10) {
		return Entry{}, refuse("the entry token is for another account; sign in with the account it names, or %s", ask)
	}
	if c.Person == "" || len(c.Person) > MaxPersonLen {
		return Entry{}, refuse("the entry token names no person key (1 to %d bytes); %s", MaxPersonLen, ask)
	}
	if c.IssuedAt != nil && c.ExpiresAt.Sub(c.IssuedAt.Time) > MaxLifetime {
		return Entry{}, refuse("the entry token lives longer than %s; %s", MaxLifetime, ask)
	}
	lane := Lane(c.Lane)
	switch lane {
	case "":
		lane = LaneStandard
	case LaneStandard, LanePriority:
	default:
		return Entry{}, refuse("the entry token names an unknown lane %q (standard or priority); %s", c.Lane, ask)
	}
	return Entry{Person: c.Person, Lane: lane, ExpiresAt: c.ExpiresAt.UTC()}, nil
}
