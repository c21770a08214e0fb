package seckill

// DefaultCurrency is a voucher's currency when neither the operator nor
// the configuration (SECKILL_CURRENCY) names one.
const DefaultCurrency = "CNY"

// ValidCurrency says whether code is an active ISO 4217 currency, spelt as
// the standard spells it (three capital letters).
func ValidCurrency(code string) bool {
	return CurrencyExponent(code) >= 0
}

// CurrencyExponent is how many decimal digits code's minor unit has (0 for
// JPY, 2 for CNY, 3 for KWD), the unit a price_cents counts in; -1 for a
// code that is not an active ISO 4217 currency. The list is ISO 4217's
// active currencies; funds, precious metals and the testing codes (XTS,
// XXX) are left out: nothing is sold in them.
func CurrencyExponent(code string) int {
	switch code {
	case "BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG", "RWF", "UGX", "VND", "VUV", "XAF",
		"XOF", "XPF":
		return 0
	case "BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND":
		return 3
	case "AED", "AFN", "ALL", "AMD", "AOA", "ARS", "AUD", "AWG", "AZN", "BAM", "BBD", "BDT", "BGN", "BMD",
		"BND", "BOB", "BRL", "BSD", "BTN", "BWP", "BYN", "BZD", "CAD", "CDF", "CHF", "CNY", "COP", "CRC",
		"CUP", "CVE", "CZK", "DKK", "DOP", "DZD", "EGP", "ERN", "ETB", "EUR", "FJD", "FKP", "GBP", "GEL",
		"GHS", "GIP", "GMD", "GTQ", "GYD", "HKD", "HNL", "HTG", "HUF", "IDR", "ILS", "INR", "IRR", "JMD",
		"KES", "KGS", "KHR", "KPW", "KYD", "KZT", "LAK", "LBP", "LKR", "LRD", "LSL", "MAD", "MDL", "MGA",
		"MKD", "MMK", "MNT", "MOP", "MRU", "MUR", "MVR", "MWK", "MXN", "MYR", "MZN", "NAD", "NGN", "NIO",
		"NOK", "NPR", "NZD", "PAB", "PEN", "PGK", "PHP", "PKR", "PLN", "QAR", "RON", "RSD", "RUB", "SAR",
		"SBD", "SCR", "SDG", "SEK", "SGD", "SHP", "SLE", "SOS", "SRD", "SSP", "STN", "SVC", "SYP", "SZL",
		"THB", "TJS", "TMT", "TOP", "TRY", "TTD", "TWD", "TZS", "UAH", "USD", "UYU", "UZS", "VED", "VES",
		"WST", "XCD", "YER", "ZAR", "ZMW", "ZWG":
		return 2
	}
	return -1
}

// CurrencyOr is v's currency, or def for a voucher whose record names none
// (one made before vouchers carried a currency: it was always sold in the
// configured one).
func (v Voucher) CurrencyOr(def string) string {
	if v.Currency != "" {
		return v.Currency
	}
	return def
}
