package stripepay

import (
	"fmt"

	"github.com/flashsale/seckill/seckill"
)

// Amounts reach this adapter in the ISO 4217 minor unit of their currency,
// as a voucher's price_cents is counted (0 decimals for JPY, 2 for CNY, 3
// for KWD). Stripe counts every currency in that same unit but two: ISK,
// which ISO gives no decimals, it counts in hundredths (100 is one krona);
// MGA, which ISO gives two, it counts in whole ariary. stripeShift is how
// many decimal places Stripe's unit is below ISO's.
func stripeShift(currency string) int {
	switch currency {
	case "ISK":
		return 2
	case "MGA":
		return -2
	}
	return 0
}

// toStripe is amount, in currency's ISO minor unit, in Stripe's unit; an
// amount Stripe cannot take (a fraction of an ariary) is an error. Vouchers
// refuse such prices already (seckill.Voucher.Validate): this is the
// adapter's own guard.
func toStripe(amount int64, currency string) (int64, error) {
	switch shift := stripeShift(currency); {
	case shift > 0:
		return amount * pow10(shift), nil
	case shift < 0:
		if amount%pow10(-shift) != 0 {
			return 0, fmt.Errorf("stripepay: %d is not a whole amount of %s", amount, currency)
		}
		return amount / pow10(-shift), nil
	}
	if seckill.CurrencyExponent(currency) == 3 && amount%10 != 0 {
		// Card networks take three-decimal currencies rounded to ten.
		return 0, fmt.Errorf("stripepay: %d %s does not end in 0, as three-decimal amounts must", amount, currency)
	}
	return amount, nil
}

// fromStripe is amount, in Stripe's unit of currency, in the ISO minor unit
// (what the records hold and compare events with).
func fromStripe(amount int64, currency string) int64 {
	switch shift := stripeShift(currency); {
	case shift > 0:
		return amount / pow10(shift)
	case shift < 0:
		return amount * pow10(-shift)
	}
	return amount
}

func pow10(n int) int64 {
	p := int64(1)
	for range n {
		p *= 10
	}
	return p
}
