package remind_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/notify/remind"
)

// A pair GenerateVAPID made passes, padded or not; halves of two pairs, a
// key that is no base64url and a private key that is no P-256 scalar fail.
func TestCheckVAPID(t *testing.T) {
	a, err := remind.GenerateVAPID("mailto:ops@shop.example")
	require.NoError(t, err)
	b, err := remind.GenerateVAPID("mailto:ops@shop.example")
	require.NoError(t, err)
	require.NoError(t, remind.CheckVAPID(a.PublicKey, a.PrivateKey))
	require.NoError(t, remind.CheckVAPID(a.PublicKey+"=", a.PrivateKey+"="), "padding is taken")

	require.ErrorContains(t, remind.CheckVAPID(a.PublicKey, b.PrivateKey), "not the private key's")
	require.ErrorContains(t, remind.CheckVAPID("not base64!", a.PrivateKey), "public key is not base64url")
	require.ErrorContains(t, remind.CheckVAPID(a.PublicKey, "not base64!"), "private key is not base64url")
	require.ErrorContains(t, remind.CheckVAPID(a.PublicKey, "AAAA"), "not a P-256 key")
}
