package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"hash"
	"strings"
	"sync"
	"time"
)

// stdHeader is the base64url header of every token Issue signs:
// {"alg":"HS256","typ":"JWT"} (the library marshals the header map with its
// keys sorted).
const stdHeader = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"

// maxFastPayload bounds the claims the fast path decodes into its scratch
// buffer; Issue's are about 60 bytes. Longer ones go to the library.
const maxFastPayload = 256

// macScratch is one HMAC and the buffers of one fast verification, reused
// through a pool so that a verification allocates nothing.
type macScratch struct {
	mac     hash.Hash
	signed  []byte // header.payload, the signed text
	sum     [sha256.Size]byte
	sig     [sha256.Size]byte
	payload [maxFastPayload]byte
}

// fastVerifier checks the common token, the one Issue signs, by hand: the
// header compared as a string, the signature decoded and compared in
// constant time, the claims read by a parser that knows only Issue's layout
// ({"sub":"<id>","exp":<n>,"iat":<n>}, iat optional). The library's parse
// (two base64 and two reflection JSON decodes, a map for the header, an
// HMAC built per call) was 8 µs and 46 allocations per cold token; under a
// crowd where each shopper's first buy is a cold token that was a tenth of
// the gateway's CPU (deploy/tools/bench/README.md).
//
// It only ever says yes or "ask the library": anything unusual (another
// header, a claim more, escapes, spaces, fractions, a bad signature, an
// expired token) goes to the library, which gives the refusal its usual
// words. FuzzFastVerify holds it to never accepting what the library
// refuses and to agreeing on the user and exp.
type fastVerifier struct {
	pool sync.Pool
}

func newFastVerifier(secret []byte) *fastVerifier {
	key := strings.Clone(string(secret))
	f := &fastVerifier{}
	f.pool.New = func() any {
		return &macScratch{mac: hmac.New(sha256.New, []byte(key)), signed: make([]byte, 0, MaxTokenLen)}
	}
	return f
}

// verify returns the user id and exp of token when it is an Issue-shaped
// token with a good signature, valid at now within Leeway; ok is false for
// everything else, which the caller hands to the library.
func (f *fastVerifier) verify(token string, now time.Time) (userID int64, exp time.Time, ok bool) {
	rest, found := strings.CutPrefix(token, stdHeader+".")
	if !found {
		return 0, time.Time{}, false
	}
	dot := strings.IndexByte(rest, '.')
	if dot < 0 {
		return 0, time.Time{}, false
	}
	payload, sig := rest[:dot], rest[dot+1:]
	if len(payload) > (maxFastPayload*4+2)/3 || len(sig) != 43 {
		return 0, time.Time{}, false
	}
	s := f.pool.Get().(*macScratch)
	defer f.pool.Put(s)

	if n, good := decodeRawURL(s.sig[:], sig); !good || n != sha256.Size {
		return 0, time.Time{}, false
	}
	s.mac.Reset()
	s.signed = append(s.signed[:0], token[:len(stdHeader)+1+len(payload)]...)
	s.mac.Write(s.signed)
	if !hmac.Equal(s.mac.Sum(s.sum[:0]), s.sig[:]) {
		return 0, time.Time{}, false
	}
	n, good := decodeRawURL(s.payload[:], payload)
	if !good {
		return 0, time.Time{}, false
	}
	c, good := parseIssuedClaims(s.payload[:n])
	if !good {
		return 0, time.Time{}, false
	}
	exp = time.Unix(c.exp, 0)
	if !now.Before(exp.Add(Leeway)) {
		return 0, time.Time{}, false
	}
	if c.hasIat && now.Before(time.Unix(c.iat, 0).Add(-Leeway)) {
		return 0, time.Time{}, false
	}
	return c.sub, exp, true
}

// issuedClaims are the claims of an Issue-shaped token.
type issuedClaims struct {
	sub, exp, iat int64
	hasIat        bool
}

// parseIssuedClaims reads exactly {"sub":"<id>","exp":<n>} or
// {"sub":"<id>","exp":<n>,"iat":<n>}, no spaces: sub the canonical decimal
// of a positive int64, exp and iat whole seconds of at most 10 digits
// without a leading zero (exact in the library's float64, years up to
// 2286). Anything else is not ok.
func parseIssuedClaims(b []byte) (c issuedClaims, ok bool) {
	rest, found := cutPrefix(b, `{"sub":"`)
	if !found {
		return c, false
	}
	if c.sub, rest, ok = leadingNumber(rest, 19); !ok || c.sub <= 0 {
		return c, false
	}
	if rest, found = cutPrefix(rest, `","exp":`); !found {
		return c, false
	}
	if c.exp, rest, ok = leadingNumber(rest, 10); !ok {
		return c, false
	}
	if rest, found = cutPrefix(rest, `,"iat":`); found {
		if c.iat, rest, ok = leadingNumber(rest, 10); !ok {
			return c, false
		}
		c.hasIat = true
	}
	return c, len(rest) == 1 && rest[0] == '}'
}

func cutPrefix(b []byte, prefix string) ([]byte, bool) {
	if len(b) < len(prefix) || string(b[:len(prefix)]) != prefix {
		return b, false
	}
	return b[len(prefix):], true
}

// leadingNumber reads the digits at the start of b: 1 to maxDigits of them,
// the first not 0, the value within int64.
func leadingNumber(b []byte, maxDigits int) (int64, []byte, bool) {
	i := 0
	var v uint64
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		if i == maxDigits {
			return 0, b, false
		}
		v = v*10 + uint64(b[i]-'0')
		i++
	}
	if i == 0 || b[0] == '0' || v > 1<<63-1 {
		return 0, b, false
	}
	return int64(v), b[i:], true
}

// decodeRawURL decodes unpadded base64url strictly (the library's
// RawURLEncoding.Strict(): no padding, no line breaks, unused bits zero)
// into dst; ok is false when src is not that or does not fit.
func decodeRawURL(dst []byte, src string) (int, bool) {
	if len(src)%4 == 1 {
		return 0, false
	}
	n := 0
	var acc uint32
	bits := 0
	for i := 0; i < len(src); i++ {
		v := b64url(src[i])
		if v < 0 {
			return 0, false
		}
		acc = acc<<6 | uint32(v)
		bits += 6
		if bits >= 8 {
			bits -= 8
			if n == len(dst) {
				return 0, false
			}
			dst[n] = byte(acc >> bits)
			n++
			acc &= 1<<bits - 1
		}
	}
	// Strict: the bits left over from the last character must be zero.
	return n, acc == 0
}

func b64url(c byte) int {
	switch {
	case c >= 'A' && c <= 'Z':
		return int(c - 'A')
	case c >= 'a' && c <= 'z':
		return int(c-'a') + 26
	case c >= '0' && c <= '9':
		return int(c-'0') + 52
	case c == '-':
		return 62
	case c == '_':
		return 63
	}
	return -1
}
