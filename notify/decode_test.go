package notify

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill/apperr"
)

// FuzzDecodeMessage: whatever a shard channel carries, decodeMessage never
// panics, returns only events with a buyer, and calls every failure bad
// input. `go test` runs the seeds; `go test -fuzz FuzzDecodeMessage` more.
func FuzzDecodeMessage(f *testing.F) {
	ctx := context.Background()
	var events []string
	for i, st := range []orders.Status{orders.StatusCreated, orders.StatusPaid} {
		b, err := encodeEvent(ctx, orders.Event{
			Order: orders.Order{ID: int64(i + 1), UserID: 42, VoucherID: 7, Quantity: 1, Status: st, CreatedAt: time.Now()},
			At:    time.Now(),
		})
		require.NoError(f, err)
		events = append(events, string(b))
	}
	for _, seed := range []string{
		events[0],
		"[" + strings.Join(events, ",") + "]",
		"[" + events[0] + `,42,null,{},"s",[],{"order":5},` + events[1] + "]",
		"[" + events[0] + ",{",
		"[", "]", "[]", "", " ", "null", "nope", `{"order":{"user_id":"-1"}}`, `[[[[` + events[1] + `]]]]`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, payload string) {
		got, errs := decodeMessage(payload)
		for _, in := range got {
			require.Positive(t, in.userID)
		}
		for _, err := range errs {
			require.ErrorIs(t, err, apperr.ErrInvalidInput)
		}
	})
}
