package seckill_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// TestVoucherCurrency: a voucher keeps the currency its operator named; one
// named none is written down in the configured currency (so a later change
// of the setting moves no price); a row recorded before vouchers carried a
// currency reads as the configured one; a code outside ISO 4217's list is
// refused naming /currency, however well shaped.
func TestVoucherCurrency(t *testing.T) {
	t.Parallel()
	pool := stack.NewDatabase(t)
	store := pgstore.New(pool)
	catalog := seckill.NewCatalog(seckill.CatalogConfig{Store: store,
		Stock: redisstock.New(redisstock.Config{Redis: stack.Redis(t)}), Currency: "USD"})
	ctx := t.Context()

	v := validVoucher()
	v.Kind = seckill.KindLimit // not warmed: the package's tests share one Redis
	v.Currency = "JPY"
	yen, err := catalog.Create(ctx, v, nil)
	require.NoError(t, err)
	require.Equal(t, "JPY", yen.Currency)

	v.Currency = ""
	dollars, err := catalog.Create(ctx, v, nil)
	require.NoError(t, err)
	require.Equal(t, "USD", dollars.Currency)
	var stored *string
	require.NoError(t, pool.QueryRow(ctx, `SELECT currency FROM vouchers WHERE id = $1`, dollars.ID).Scan(&stored))
	require.NotNil(t, stored, "the configured currency is written down with a new voucher")
	require.Equal(t, "USD", *stored)

	_, err = pool.Exec(ctx, `UPDATE vouchers SET currency = NULL WHERE id = $1`, dollars.ID)
	require.NoError(t, err)
	later := seckill.NewCatalog(seckill.CatalogConfig{Store: store,
		Stock: redisstock.New(redisstock.Config{Redis: stack.Redis(t)}), Currency: "EUR"})
	old, err := later.Cached(ctx, dollars.ID)
	require.NoError(t, err)
	require.Equal(t, "EUR", old.Currency, "a voucher of no recorded currency is sold in the configured one")
	got, err := later.Cached(ctx, yen.ID)
	require.NoError(t, err)
	require.Equal(t, "JPY", got.Currency)

	for _, bad := range []string{"ABC", "usd", "XXX", "US", "CNYY"} {
		v.Currency = bad
		_, err := catalog.Create(ctx, v, nil)
		require.ErrorIs(t, err, apperr.ErrInvalidInput, bad)
		fields := apperr.FieldsOf(err)
		require.Len(t, fields, 1, bad)
		require.Equal(t, "/currency", fields[0].Field, bad)
	}

	// Card payments take a three-decimal price rounded to ten, and whole
	// ariary.
	for currency, price := range map[string]int64{"KWD": 1234, "MGA": 150} {
		v.Currency, v.PriceCents = currency, price
		_, err := catalog.Create(ctx, v, nil)
		fields := apperr.FieldsOf(err)
		require.Len(t, fields, 1, currency)
		require.Equal(t, "/price_cents", fields[0].Field, currency)
		v.PriceCents = price - price%100
		_, err = catalog.Create(ctx, v, nil)
		require.NoError(t, err, currency)
	}

	require.Equal(t, 0, seckill.CurrencyExponent("JPY"))
	require.Equal(t, 2, seckill.CurrencyExponent("CNY"))
	require.Equal(t, 3, seckill.CurrencyExponent("KWD"))
	require.Equal(t, -1, seckill.CurrencyExponent("ZZZ"))
}
