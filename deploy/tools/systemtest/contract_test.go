package systemtest

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/gateway/edge"
)

// Regression tests of the retry and read-your-order promises of the contract
// (gateway/openapi.yaml): each failed before its fix.

// A just-given order id is found at once, by whichever instance is asked,
// while it is still reserved: even for a voucher created after the
// instance last listed the vouchers that can hold stock.
func TestJustGivenOrderIsFoundAtOnce(t *testing.T) {
	t.Parallel()
	// Gateways only: nothing persists the orders, so they stay reserved
	// and only Redis knows them.
	ts := startSystem(t, map[string]string{"SECKILL_ROLES": "gateway"})
	peer := ts.startPeer(t, gatewayOnly)
	shopper := ts.shopper(t, testUser())
	for i := range 3 {
		// Both instances have just read the list of vouchers that can
		// hold stock (an order read), before the voucher exists.
		for _, s := range []*testSystem{ts, peer.testSystem} {
			require.Equal(t, http.StatusOK, s.do(t, http.MethodGet, "/api/v1/orders", shopper, nil, nil).status)
		}
		vid := ts.createVoucher(t, 10, 10, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
		b := ts.buy(t, vid, shopper, 1, "")
		require.Equal(t, http.StatusAccepted, b.status, "%s", b.raw)
		oid := b.body["order_id"].(string)
		for _, s := range []*testSystem{ts, peer.testSystem} {
			got := s.do(t, http.MethodGet, "/api/v1/orders/"+oid, shopper, nil, nil)
			require.Equal(t, http.StatusOK, got.status, "try %d: a just-given order must be found: %s", i, got.raw)
			require.Equal(t, "reserved", got.body["status"])
			require.Equal(t, vid, got.body["voucher_id"])
		}
		// Someone else still gets 404 for it.
		require.Equal(t, http.StatusNotFound, ts.do(t, http.MethodGet, "/api/v1/orders/"+oid, ts.shopper(t, testUser()), nil, nil).status)
	}
}

// Paying a paid order and cancelling a cancelled one are retries of a call
// whose answer was lost: 200 with the order as it is, and nothing moves.
func TestPayAndCancelAreRetriable(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, nil)
	vid := ts.createVoucher(t, 5, 5, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	alice := ts.shopper(t, testUser())
	post := func(oid, what string) answer {
		return ts.do(t, http.MethodPost, "/api/v1/orders/"+oid+"/"+what, alice, nil, nil)
	}

	b := ts.buy(t, vid, alice, 1, "")
	require.Equal(t, http.StatusAccepted, b.status, "%s", b.raw)
	paidID := b.body["order_id"].(string)
	ts.waitStatus(t, alice, paidID, "created")
	first := post(paidID, "pay")
	require.Equal(t, http.StatusOK, first.status, "%s", first.raw)
	for range 2 {
		again := post(paidID, "pay")
		require.Equal(t, http.StatusOK, again.status, "paying a paid order answers the paid order: %s", again.raw)
		require.Equal(t, first.body, again.body, "the same order, unchanged")
	}
	require.Equal(t, http.StatusConflict, post(paidID, "cancel").status, "a paid order cannot be cancelled")

	b = ts.buy(t, vid, alice, 1, "")
	require.Equal(t, http.StatusAccepted, b.status, "%s", b.raw)
	cancelID := b.body["order_id"].(string)
	ts.waitStatus(t, alice, cancelID, "created")
	first = post(cancelID, "cancel")
	require.Equal(t, http.StatusOK, first.status, "%s", first.raw)
	ts.waitCatalogStock(t, vid, 4) // the catalog reads the stock on its refresh
	again := post(cancelID, "cancel")
	require.Equal(t, http.StatusOK, again.status, "cancelling a cancelled order answers the cancelled order: %s", again.raw)
	require.Equal(t, first.body, again.body)
	require.EqualValues(t, 4, ts.stockLeft(t, vid), "a repeated cancel gives nothing back twice")
	conflict := post(cancelID, "pay")
	require.Equal(t, http.StatusConflict, conflict.status, "a cancelled order cannot be paid")
	require.Equal(t, "conflict", conflict.errorCode())

	// Someone else's order is still 404 on a retry.
	require.Equal(t, http.StatusNotFound, ts.do(t, http.MethodPost, "/api/v1/orders/"+paidID+"/pay", ts.shopper(t, testUser()), nil, nil).status)
	ts.waitPersisted(t, vid, 2)
	ts.checkInvariants(t, vid, 5)
}

// A replayed Idempotency-Key answers with the order's current status.
func TestReplayAnswersCurrentStatus(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, nil)
	vid := ts.createVoucher(t, 10, 1, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	replay := func(token, key, oid, status string) {
		t.Helper()
		r := ts.buy(t, vid, token, 1, key)
		require.Equal(t, http.StatusAccepted, r.status, "%s", r.raw)
		require.Equal(t, oid, r.body["order_id"])
		require.Equal(t, status, r.body["status"], "a replay answers the order's current status")
	}
	buy := func(token, key string) string {
		t.Helper()
		b := ts.buy(t, vid, token, 1, key)
		require.Equal(t, http.StatusAccepted, b.status, "%s", b.raw)
		return b.body["order_id"].(string)
	}

	payer := ts.shopper(t, testUser())
	oid := buy(payer, "k-pay")
	ts.waitStatus(t, payer, oid, "created")
	replay(payer, "k-pay", oid, "created")
	require.Equal(t, http.StatusOK, ts.do(t, http.MethodPost, "/api/v1/orders/"+oid+"/pay", payer, nil, nil).status)
	replay(payer, "k-pay", oid, "paid")

	canceller := ts.shopper(t, testUser())
	oid = buy(canceller, "k-cancel")
	ts.waitStatus(t, canceller, oid, "created")
	require.Equal(t, http.StatusOK, ts.do(t, http.MethodPost, "/api/v1/orders/"+oid+"/cancel", canceller, nil, nil).status)
	replay(canceller, "k-cancel", oid, "cancelled")

	// A shopper PostgreSQL already counts at the limit (Redis does not):
	// the worker fails the order and gives the hold back.
	uid := testUser()
	v, _ := strconv.ParseInt(vid, 10, 64)
	_, err := ts.pool.Exec(context.Background(),
		`INSERT INTO voucher_buyers (voucher_id, user_id, quantity) VALUES ($1, $2, 1)`, v, uid)
	require.NoError(t, err)
	failer := ts.shopper(t, uid)
	oid = buy(failer, "k-fail")
	ts.waitStatus(t, failer, oid, "failed")
	replay(failer, "k-fail", oid, "failed")
}

// A replay of a known Idempotency-Key does not need the captcha again, for
// every kind of voucher: the first attempt burned it, and the replay sells
// nothing.
func TestCaptchaReplayForEveryKind(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, nil)
	for _, kind := range []string{"seckill", "limit", "common"} {
		t.Run(kind, func(t *testing.T) {
			vid := ts.createKindVoucher(t, kind, 10, 1, true)
			token := ts.shopper(t, testUser())
			buyWith := func(id, answer, key string) answer {
				return ts.do(t, http.MethodPost, "/api/v1/vouchers/"+vid+"/orders", token,
					map[string]any{"quantity": 1, "captcha_id": id, "captcha_answer": answer}, map[string]string{"Idempotency-Key": key})
			}
			c := ts.do(t, http.MethodGet, "/api/v1/captcha", "", nil, nil)
			require.Equal(t, http.StatusOK, c.status, "%s", c.raw)
			id := c.body["captcha_id"].(string)
			right, err := ts.rdb.Get(context.Background(), edge.CaptchaKeyPrefix+id).Result()
			require.NoError(t, err)

			first := buyWith(id, right, "key-1")
			require.Equal(t, http.StatusAccepted, first.status, "%s", first.raw)
			for _, retry := range []answer{buyWith(id, right, "key-1"), buyWith("", "", "key-1")} {
				require.Equal(t, http.StatusAccepted, retry.status, "a replay needs no new captcha: %s", retry.raw)
				require.Equal(t, first.body["order_id"], retry.body["order_id"])
			}
			// A new key is a new attempt: it needs a fresh captcha.
			fresh := buyWith(id, right, "key-2")
			require.Equal(t, http.StatusBadRequest, fresh.status, "%s", fresh.raw)
			require.Equal(t, "captcha_invalid", fresh.errorCode())
			// Another shopper's use of the same key is not a replay.
			other := ts.do(t, http.MethodPost, "/api/v1/vouchers/"+vid+"/orders", ts.shopper(t, testUser()),
				map[string]any{"quantity": 1}, map[string]string{"Idempotency-Key": "key-1"})
			require.Equal(t, "captcha_invalid", other.errorCode(), "%s", other.raw)
			want := map[string]string{"seckill": "reserved", "limit": "created", "common": "created"}[kind]
			require.Equal(t, want, first.body["status"], "%s", first.raw)
		})
	}
}
