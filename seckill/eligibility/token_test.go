package eligibility_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/eligibility"
)

// merchant is a merchant's signing key, known to the platform as kid.
type merchant struct {
	kid  string
	priv ed25519.PrivateKey
	pub  ed25519.PublicKey
}

func newMerchant(t testing.TB, kid string) merchant {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	return merchant{kid: kid, priv: priv, pub: pub}
}

// sign is a token of claims, signed by m.
func (m merchant) sign(t testing.TB, claims jwt.Claims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims)
	tok.Header["kid"] = m.kid
	s, err := tok.SignedString(m.priv)
	require.NoError(t, err)
	return s
}

// claims are a valid entry's claims of user 17 for voucher 42.
func claims(mutate ...func(*eligibility.Claims)) *eligibility.Claims {
	now := time.Now()
	c := &eligibility.Claims{
		RegisteredClaims: jwt.RegisteredClaims{Subject: "17", ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour)),
			IssuedAt: jwt.NewNumericDate(now)},
		VoucherID: "42", Person: "person-a",
	}
	for _, f := range mutate {
		f(c)
	}
	return c
}

// Every fault of a token is 403 not_eligible with a message that says
// what is wrong; a valid token grants its person and lane.
func TestVerifyRefusesEveryBadToken(t *testing.T) {
	m, other := newMerchant(t, "shop-1"), newMerchant(t, "shop-2")
	v := eligibility.NewVerifier(eligibility.Keys{m.kid: m.pub}, nil)

	e, err := v.Verify(m.sign(t, claims()), 42, 17)
	require.NoError(t, err)
	require.Equal(t, "person-a", e.Person)
	require.Equal(t, eligibility.LaneStandard, e.Lane, "no lane is the standard lane")
	e, err = v.Verify(m.sign(t, claims(func(c *eligibility.Claims) { c.Lane = "priority" })), 42, 17)
	require.NoError(t, err)
	require.Equal(t, eligibility.LanePriority, e.Lane)

	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, claims())
	hs.Header["kid"] = m.kid
	hsToken, err := hs.SignedString([]byte(m.pub))
	require.NoError(t, err)
	unknownKid := other.sign(t, claims())
	forged := merchant{kid: m.kid, priv: other.priv}.sign(t, claims())

	for name, tc := range map[string]struct {
		token, says string
		user        int64
	}{
		"missing":                   {"", "Seckill-Entry-Token", 17},
		"garbage":                   {"not.a.token", "not signed", 17},
		"too long":                  {strings.Repeat("a", eligibility.MaxTokenLen+1), "longer than", 17},
		"HS256 with the public key": {hsToken, "not signed", 17},
		"unknown key id":            {unknownKid, "not signed", 17},
		"forged signature":          {forged, "not signed", 17},
		"expired": {m.sign(t, claims(func(c *eligibility.Claims) {
			c.ExpiresAt = jwt.NewNumericDate(time.Now().Add(-time.Minute))
		})), "expired", 17},
		"no expiry":       {m.sign(t, claims(func(c *eligibility.Claims) { c.ExpiresAt = nil })), "not signed", 17},
		"another voucher": {m.sign(t, claims(func(c *eligibility.Claims) { c.VoucherID = "43" })), "another voucher", 17},
		"another account": {m.sign(t, claims()), "another account", 18},
		"no person":       {m.sign(t, claims(func(c *eligibility.Claims) { c.Person = "" })), "person key", 17},
		"person too long": {m.sign(t, claims(func(c *eligibility.Claims) {
			c.Person = strings.Repeat("p", eligibility.MaxPersonLen+1)
		})), "person key", 17},
		"unknown lane": {m.sign(t, claims(func(c *eligibility.Claims) { c.Lane = "vip" })), "unknown lane", 17},
		"lives too long": {m.sign(t, claims(func(c *eligibility.Claims) {
			c.ExpiresAt = jwt.NewNumericDate(time.Now().Add(30 * 24 * time.Hour))
		})), "lives longer", 17},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := v.Verify(tc.token, 42, tc.user)
			require.ErrorIs(t, err, seckill.ErrNotEligible)
			var pe *apperr.PublicError
			require.True(t, errors.As(err, &pe))
			require.Contains(t, pe.PublicMessage(), tc.says)
		})
	}
}

// SECKILL_ENTRY_TOKEN_KEYS takes a raw key or its DER form, in either
// base64 alphabet, and refuses anything else at start.
func TestParseKeys(t *testing.T) {
	a, b := newMerchant(t, "a"), newMerchant(t, "b")
	der, err := x509.MarshalPKIXPublicKey(b.pub)
	require.NoError(t, err)
	keys, err := eligibility.ParseKeys(" a=" + base64.RawURLEncoding.EncodeToString(a.pub) + ", b=" + base64.StdEncoding.EncodeToString(der) + ",")
	require.NoError(t, err)
	require.Equal(t, eligibility.Keys{"a": a.pub, "b": b.pub}, keys)

	none, err := eligibility.ParseKeys("")
	require.NoError(t, err)
	require.Empty(t, none)
	for _, bad := range []string{"a", "=abc", "a=***", "a=" + base64.StdEncoding.EncodeToString([]byte("short")),
		"a=" + base64.StdEncoding.EncodeToString(a.pub) + ",a=" + base64.StdEncoding.EncodeToString(a.pub)} {
		_, err := eligibility.ParseKeys(bad)
		require.Error(t, err, bad)
	}
}

// The merchant's shell example (sign-entry-token.sh, openssl alone) makes
// a token the platform accepts, with the public key in the form the README
// tells the operator to configure.
func TestMerchantShellExampleSigns(t *testing.T) {
	openssl, err := exec.LookPath("openssl")
	require.NoError(t, err, "the merchant's example needs openssl (Debian's openssl package)")
	dir := t.TempDir()
	key := filepath.Join(dir, "merchant.pem")
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("%s %v: %v: %s", name, args, err, ee.Stderr)
		}
		require.NoError(t, err)
		return strings.TrimSpace(string(out))
	}
	run(openssl, "genpkey", "-algorithm", "ed25519", "-out", key)
	pub := run("sh", "-c", openssl+" pkey -in "+key+" -pubout -outform DER | "+openssl+" base64 -A")
	keys, err := eligibility.ParseKeys("shop-1=" + pub)
	require.NoError(t, err)
	v := eligibility.NewVerifier(keys, nil)

	script, err := filepath.Abs("sign-entry-token.sh")
	require.NoError(t, err)
	token := run("sh", script, key, "shop-1", "17", "42", "5f2b9c", "priority", "600")
	e, err := v.Verify(token, 42, 17)
	require.NoError(t, err, token)
	require.Equal(t, eligibility.Entry{Person: "5f2b9c", Lane: eligibility.LanePriority, ExpiresAt: e.ExpiresAt}, e)
	require.WithinDuration(t, time.Now().Add(600*time.Second), e.ExpiresAt, time.Minute)

	_, err = v.Verify(token, 42, 18)
	require.ErrorIs(t, err, seckill.ErrNotEligible, "the token names its shopper")
	_, err = os.Stat(script)
	require.NoError(t, err)
}
