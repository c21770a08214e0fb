package auth

import (
	"strings"
	"sync"
	"time"
)

// maxVerified bounds the verified-token cache: a flash crowd of 65536
// shoppers retrying at once fits; past it the cache starts over.
const maxVerified = 1 << 16

// verifiedTokens remembers the tokens this process has verified, so that a
// shopper's later requests cost a map lookup instead of two base64 and two
// JSON decodes and an HMAC: under a flash crowd, where every shopper presses
// again and again, that parse was two thirds of the gateway's allocations per
// buy and a tenth of its CPU (see make bench and deploy/tools/bench/README.md, the profile
// notes).
//
// It is safe because the key is the whole token, signature included: only a
// token whose signature and claims this process checked can hit, and a hit
// still checks exp (within Leeway) against the clock. Tokens are not revoked
// before exp on this platform, so nothing else can change the verdict.
type verifiedTokens struct {
	mu sync.RWMutex
	m  map[string]verifiedToken
}

type verifiedToken struct {
	userID int64
	exp    time.Time
}

// get returns the user of a token verified before and still unexpired at now.
func (v *verifiedTokens) get(token string, now time.Time) (int64, bool) {
	v.mu.RLock()
	e, ok := v.m[token]
	v.mu.RUnlock()
	if !ok || !now.Before(e.exp.Add(Leeway)) {
		// An expired token goes through the parser again, which says so.
		return 0, false
	}
	return e.userID, true
}

// put remembers a verified token. token may point into a request buffer: the
// key is a copy.
func (v *verifiedTokens) put(token string, userID int64, exp time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil || len(v.m) >= maxVerified {
		v.m = make(map[string]verifiedToken, 1024)
	}
	v.m[strings.Clone(token)] = verifiedToken{userID: userID, exp: exp}
}
