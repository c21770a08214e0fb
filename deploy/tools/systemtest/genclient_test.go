package systemtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/tools/apiclient"
)

// bearer is a request editor that signs the request with token.
func bearer(token string) apiclient.RequestEditorFn {
	return func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+token)
		return nil
	}
}

// A shopper's whole journey, driven only by the client generated from
// gateway/openapi.yaml (deploy/tools/apiclient) against the real system: if the
// document cannot produce a client that works, this fails, as a mobile
// team's would. Each answer is also checked by the tests' validating client
// underneath.
func TestGeneratedClientJourney(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, nil)
	ctx := t.Context()
	c, err := apiclient.NewClientWithResponses(ts.base, apiclient.WithHTTPClient(ts.client))
	require.NoError(t, err)
	admin := bearer(ts.cfg.AdminToken)

	begin := time.Now().Add(-time.Second).UTC().Truncate(time.Second)
	created, err := c.CreateVoucherWithResponse(ctx, nil, apiclient.CreateVoucherJSONRequestBody{
		Title: "generated client", Kind: apiclient.NewVoucherKindSeckill, PriceCents: 300, Stock: 5,
		PerUserLimit: 2, BeginAt: begin, EndAt: begin.Add(time.Hour),
	}, admin)
	require.NoError(t, err)
	require.NotNil(t, created.JSON201, "create voucher: %d %s", created.StatusCode(), created.Body)
	vid := created.JSON201.Id

	name := fmt.Sprintf("gen_%d", rand.Int64N(1<<40))
	reg, err := c.RegisterWithResponse(ctx, apiclient.RegisterJSONRequestBody{Username: name, Password: "correct horse"})
	require.NoError(t, err)
	require.NotNil(t, reg.JSON201, "register: %d %s", reg.StatusCode(), reg.Body)
	require.Equal(t, name, reg.JSON201.Username)
	login, err := c.LoginWithResponse(ctx, apiclient.LoginJSONRequestBody{Username: name, Password: "correct horse"})
	require.NoError(t, err)
	require.NotNil(t, login.JSON200, "login: %d %s", login.StatusCode(), login.Body)
	require.Equal(t, reg.JSON201.Id, login.JSON200.UserId)
	me := bearer(login.JSON200.Token)

	list, err := c.ListVouchersWithResponse(ctx, nil)
	require.NoError(t, err)
	require.NotNil(t, list.JSON200, "list vouchers: %d %s", list.StatusCode(), list.Body)
	var listed *apiclient.Voucher
	for i := range *list.JSON200 {
		if (*list.JSON200)[i].Id == vid {
			listed = &(*list.JSON200)[i]
		}
	}
	require.NotNil(t, listed, "the new voucher is in the catalog")
	require.EqualValues(t, 5, listed.StockTotal)

	// Buy with an Idempotency-Key, twice: one order.
	key := "gen-" + name
	buy := func(key string) *apiclient.Purchase {
		t.Helper()
		one := int64(1)
		b, err := c.BuyWithResponse(ctx, vid, &apiclient.BuyParams{IdempotencyKey: &key}, apiclient.BuyJSONRequestBody{Quantity: &one}, me)
		require.NoError(t, err)
		require.NotNil(t, b.JSON202, "buy: %d %s", b.StatusCode(), b.Body)
		return b.JSON202
	}
	first := buy(key)
	require.Equal(t, first.OrderId, buy(key).OrderId, "a replayed Idempotency-Key returns the same order")

	// Read it until it is persisted, then pay; paying again is answered the paid order.
	var order *apiclient.Order
	require.Eventually(t, func() bool {
		o, err := c.GetOrderWithResponse(ctx, first.OrderId, me)
		if err != nil || o.JSON200 == nil {
			return false
		}
		order = o.JSON200
		return order.Status == apiclient.OrderStatusCreated
	}, time.Minute, 50*time.Millisecond, "the order is persisted")
	require.Equal(t, vid, order.VoucherId)
	require.EqualValues(t, 300, order.AmountCents)
	require.NotNil(t, order.PayDeadline)
	for range 2 {
		paid, err := c.PayOrderWithResponse(ctx, first.OrderId, me)
		require.NoError(t, err)
		require.NotNil(t, paid.JSON200, "pay: %d %s", paid.StatusCode(), paid.Body)
		require.Equal(t, apiclient.OrderStatusPaid, paid.JSON200.Status)
	}
	refused, err := c.CancelOrderWithResponse(ctx, first.OrderId, me)
	require.NoError(t, err)
	require.NotNil(t, refused.JSON409, "cancel a paid order: %d %s", refused.StatusCode(), refused.Body)
	require.EqualValues(t, "conflict", refused.JSON409.Error.Code)

	// A second order, cancelled: the stock goes back.
	second := buy(key + "-2")
	require.NotEqual(t, first.OrderId, second.OrderId)
	require.Eventually(t, func() bool {
		cancelled, err := c.CancelOrderWithResponse(ctx, second.OrderId, me)
		return err == nil && cancelled.JSON200 != nil && cancelled.JSON200.Status == apiclient.OrderStatusCancelled
	}, time.Minute, 50*time.Millisecond, "the second order is cancelled")
	mine, err := c.ListOrdersWithResponse(ctx, nil, me)
	require.NoError(t, err)
	require.NotNil(t, mine.JSON200, "list orders: %d %s", mine.StatusCode(), mine.Body)
	require.Len(t, *mine.JSON200, 2)
	require.Eventually(t, func() bool {
		v, err := c.GetVoucherWithResponse(ctx, vid, nil)
		return err == nil && v.JSON200 != nil && v.JSON200.StockLeft == 4
	}, 30*time.Second, 50*time.Millisecond, "the cancelled unit is back on sale")
}

// The answers few flows reach, each checked by the tests' validating client
// (deploy/tools/apitest): the document itself, a method a path does not serve, a
// body over the limit, an unknown path and the probes.
func TestRareAnswersMatchTheSpec(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, nil)
	big := map[string]any{"username": "someone", "password": strings.Repeat("x", 8<<10)}
	for _, c := range []struct {
		method, path string
		body         any
		status       int
	}{
		{http.MethodGet, "/openapi.yaml", nil, http.StatusOK},
		{http.MethodGet, "/", nil, http.StatusOK},
		{http.MethodGet, "/healthz", nil, http.StatusOK},
		{http.MethodGet, "/readyz", nil, http.StatusOK},
		{http.MethodGet, "/no/such/path", nil, http.StatusNotFound},
		{http.MethodDelete, "/api/v1/vouchers", nil, http.StatusMethodNotAllowed},
		{http.MethodPost, "/api/v1/sessions", big, http.StatusRequestEntityTooLarge},
	} {
		a := ts.do(t, c.method, c.path, "", c.body, nil)
		require.Equal(t, c.status, a.status, "%s %s: %s", c.method, c.path, a.raw)
	}
}
