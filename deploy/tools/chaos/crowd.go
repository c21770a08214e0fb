package chaos

import (
	"context"
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/seckill/gateway/auth"
)

// crowd is a paced flash crowd on one voucher: shoppers arrive evenly over
// arrive, each asks for one unit once, with one Idempotency-Key, and retries
// with that same key on a transport error, 429 or 5xx (after Retry-After,
// capped) until patience runs out, as a well-behaved app does. With several
// gateways, shoppers are spread over them in turn, and a shopper whose
// gateway gives no answer retries on the next one, as behind a load
// balancer that has stopped sending to a dead instance.
type crowd struct {
	apis      []*api
	tokens    *auth.Tokens
	voucherID int64
	shoppers  int
	firstUser int64
	arrive    time.Duration
	patience  time.Duration

	inFlight atomic.Int64 // buy requests sent and not answered
	// firstAccepts counts the 202s that were a shopper's first answer: a
	// 202 after a 503 may be the replay of a hold the gateway kept when
	// its Kafka write was unclear.
	firstAccepts atomic.Int64

	mu       sync.Mutex
	log      []Answer        // every buy answered, in order
	accepted map[int64]int64 // order id -> user id, every 202
	keyOrder map[int64]int64 // user id -> the order id their key got
	answers  map[string]int  // every answer by status, retries included
	finals   map[string]int  // each shopper's last answer
	problems []string
}

func newCrowd(apis []*api, tokens *auth.Tokens, voucherID int64, shoppers int, firstUser int64, arrive, patience time.Duration) *crowd {
	return &crowd{apis: apis, tokens: tokens, voucherID: voucherID, shoppers: shoppers, firstUser: firstUser,
		arrive: arrive, patience: patience,
		accepted: map[int64]int64{}, keyOrder: map[int64]int64{}, answers: map[string]int{}, finals: map[string]int{}}
}

// run releases the crowd and returns when every shopper is done.
func (c *crowd) run(ctx context.Context) {
	var wg sync.WaitGroup
	began := time.Now()
	gap := c.arrive / time.Duration(c.shoppers)
	for i := range c.shoppers {
		at := began.Add(time.Duration(i) * gap)
		if d := time.Until(at); d > 0 {
			select {
			case <-ctx.Done():
				wg.Wait()
				return
			case <-time.After(d):
			}
		}
		wg.Go(func() { c.shop(ctx, c.firstUser+int64(i), i%len(c.apis)) })
	}
	wg.Wait()
}

// shop is one shopper's attempt, first on gateway gw.
func (c *crowd) shop(ctx context.Context, user int64, gw int) {
	token, _, err := c.tokens.Issue(user)
	if err != nil {
		c.problem("token for user %d: %v", user, err)
		return
	}
	key := rand.Text()
	giveUp := time.Now().Add(c.patience)
	path := "/api/v1/vouchers/" + strconv.FormatInt(c.voucherID, 10) + "/orders"
	for attempt := 0; ; attempt++ {
		var out struct {
			OrderID string `json:"order_id"`
		}
		c.inFlight.Add(1)
		sent := time.Now()
		status, retryAfter, err := c.apis[gw].call(ctx, http.MethodPost, path, token, key, map[string]any{"quantity": 1}, &out)
		c.inFlight.Add(-1)
		label := answerLabel(status, retryAfter, err)
		c.count(label, false)
		c.record(Answer{Gateway: gw, Label: label, At: sent, Took: time.Since(sent)})
		if err == nil {
			if attempt == 0 {
				c.firstAccepts.Add(1)
			}
			id, perr := strconv.ParseInt(out.OrderID, 10, 64)
			if perr != nil {
				c.problem("user %d: 2xx without an order id: %q", user, out.OrderID)
			} else {
				c.accept(user, id)
			}
			c.count(label, true)
			return
		}
		retry := status == 0 || status == http.StatusTooManyRequests || status >= 500
		if !retry || ctx.Err() != nil {
			c.count(label, true)
			return
		}
		if time.Now().After(giveUp) {
			c.count("gave up after "+label, true)
			return
		}
		if status == 0 {
			gw = (gw + 1) % len(c.apis)
		}
		wait := min(time.Duration(max(retryAfter, 0))*time.Second, time.Second)
		wait = max(wait, 200*time.Millisecond) + time.Duration(mrand.Int64N(int64(200*time.Millisecond)))
		select {
		case <-ctx.Done():
			c.count(label, true)
			return
		case <-time.After(wait):
		}
	}
}

// label503NoRetryAfter counts the 503 answers without a Retry-After, which
// the contract gives every 503.
const label503NoRetryAfter = "503 without Retry-After"

// answerLabel names an answer for the counts: "202", "409", "no answer".
func answerLabel(status, retryAfter int, err error) string {
	if status == 0 && err != nil {
		return "no answer"
	}
	if status == http.StatusServiceUnavailable && retryAfter <= 0 {
		return label503NoRetryAfter
	}
	return strconv.Itoa(status)
}

func (c *crowd) count(label string, final bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if final {
		c.finals[label]++
	} else {
		c.answers[label]++
	}
}

// Answer is one buy's answer, as the crowd saw it.
type Answer struct {
	// Gateway is the index of the gateway asked.
	Gateway int
	// Label is the answer: "202", "409", "503", "no answer" (a transport
	// error) or "503 without Retry-After".
	Label string
	// At is when the buy was sent, Took how long its answer took.
	At   time.Time
	Took time.Duration
}

func (c *crowd) record(a Answer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, a)
}

// InFlight is how many buys are sent and not answered yet.
func (c *crowd) InFlight() int64 { return c.inFlight.Load() }

// Answers are the buys answered so far, in the order their answers came.
func (c *crowd) Answers() []Answer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.log)
}

// turnedAway counts the shoppers whose last answer was neither a 202 nor
// a 409 (sold out, over the limit): those the fault sent away without an
// order.
func (c *crowd) turnedAway() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for label, count := range c.finals {
		if label != "202" && label != "409" {
			n += count
		}
	}
	return n
}

func (c *crowd) accept(user, orderID int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.keyOrder[user]; ok && prev != orderID {
		c.problems = append(c.problems, fmt.Sprintf("user %d: one Idempotency-Key got two orders, %d and %d", user, prev, orderID))
	}
	c.keyOrder[user] = orderID
	c.accepted[orderID] = user
}

func (c *crowd) problem(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

// VoucherID is the voucher the crowd buys.
func (c *crowd) VoucherID() int64 { return c.voucherID }

// Accepted is every order id a 202 gave so far, with its shopper.
func (c *crowd) Accepted() map[int64]int64 { return c.acceptedOrders() }

// acceptedOrders is every order id a 202 gave, with its shopper.
func (c *crowd) acceptedOrders() map[int64]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[int64]int64, len(c.accepted))
	for k, v := range c.accepted {
		out[k] = v
	}
	return out
}

// summary is the answers, e.g. "202×180 409×60 503×12 no answer×3".
func (c *crowd) summary() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return "answers " + labels(c.answers) + "; shoppers' last answers " + labels(c.finals)
}

func labels(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "×" + strconv.Itoa(m[k])
	}
	return strings.Join(parts, " ")
}
