package stripepay

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStripeUnits: amounts in a currency's ISO 4217 minor unit go to
// Stripe unchanged for zero-, two- and three-decimal currencies alike, in
// hundredths for ISK and whole ariary for MGA, and come back to what they
// were; an amount Stripe cannot take is refused, never rounded.
func TestStripeUnits(t *testing.T) {
	for _, c := range []struct {
		currency    string
		iso, stripe int64
	}{
		{"JPY", 1200, 1200}, {"KRW", 5000, 5000}, {"CNY", 999, 999}, {"USD", 1, 1},
		{"KWD", 1230, 1230}, {"ISK", 500, 50000}, {"MGA", 120000, 1200},
	} {
		got, err := toStripe(c.iso, c.currency)
		require.NoError(t, err, c.currency)
		require.Equal(t, c.stripe, got, c.currency)
		require.Equal(t, c.iso, fromStripe(got, c.currency), c.currency)
	}
	_, err := toStripe(1234, "KWD")
	require.Error(t, err, "a three-decimal amount must end in 0")
	_, err = toStripe(150, "MGA")
	require.Error(t, err, "a fraction of an ariary")
}
