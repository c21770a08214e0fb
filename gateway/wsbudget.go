package gateway

// The budget of what one client sends on its socket (Live.MessageRate and
// Live.MessageBurst), kept by the socket's reader.

import (
	"errors"
	"time"

	"github.com/gofiber/contrib/websocket"
)

// errFlood is what a control frame's handler returns when the client is
// past its budget: ReadMessage hands it to the reader, which closes.
var errFlood = errors.New("the client sent more messages than its socket's budget")

// floodEnd is the close of a socket whose client sent past its budget.
func floodEnd() socketEnd {
	return socketEnd{code: websocket.ClosePolicyViolation,
		text: "too many messages: a ping every few seconds is plenty", reason: dropFlood}
}

// messageBudget is a token bucket: burst messages at once, then rate a
// second. It is the reader's alone (control frames' handlers run inside its
// ReadMessage), so it needs no lock, and it costs a clock read and a few
// float operations a message, against the JSON parse it saves.
type messageBudget struct {
	rate, burst, tokens float64
	last                time.Time
}

// newMessageBudget is a full budget at now; a rate below zero never runs out.
func newMessageBudget(rate, burst int, now time.Time) *messageBudget {
	return &messageBudget{rate: float64(rate), burst: float64(burst), tokens: float64(burst), last: now}
}

// take spends one message at now, or says the budget is spent.
func (b *messageBudget) take(now time.Time) bool {
	if b.rate < 0 {
		return true
	}
	b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
