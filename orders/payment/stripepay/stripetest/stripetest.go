// Package stripetest makes Stripe webhook deliveries for tests: event JSON
// of the SDK's API version, signed exactly as Stripe signs it (HMAC-SHA256
// of "t.payload" in a `t=…,v1=…` Stripe-Signature header), since Stripe's
// mock server keeps no state and sends no events. It is imported only from
// tests.
package stripetest

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"
)

// Secret is a webhook signing secret for tests.
const Secret = "whsec_seckill_test"

// Delivery is one webhook request: its body and its Stripe-Signature.
type Delivery struct {
	Body      []byte
	Signature string
}

// Sign signs payload with secret as of at, as Stripe does.
func Sign(payload []byte, secret string, at time.Time) Delivery {
	sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: secret, Timestamp: at})
	return Delivery{Body: payload, Signature: sp.Header}
}

// Event is the JSON of an event of type typ about object, of the SDK's API
// version.
func Event(id, typ string, object map[string]any) []byte {
	b, err := json.Marshal(map[string]any{
		"id": id, "object": "event", "api_version": stripe.APIVersion, "created": time.Now().Unix(),
		"type": typ, "livemode": false, "pending_webhooks": 1,
		"data": map[string]any{"object": object},
	})
	if err != nil {
		panic(err) // maps of strings and numbers always marshal
	}
	return b
}

// PaymentIntent is a PaymentIntent object of the given status for order.
func PaymentIntent(id string, orderID, amount int64, currency, status string) map[string]any {
	return map[string]any{
		"id": id, "object": "payment_intent", "amount": amount, "currency": strings.ToLower(currency),
		"status": status, "metadata": map[string]string{"order_id": strconv.FormatInt(orderID, 10)},
	}
}

// RefundedCharge is a charge of intent piID refunded in full.
func RefundedCharge(chargeID, piID string, amount int64, currency string) map[string]any {
	return map[string]any{
		"id": chargeID, "object": "charge", "amount": amount, "amount_refunded": amount, "refunded": true,
		"currency": strings.ToLower(currency), "payment_intent": piID,
	}
}
