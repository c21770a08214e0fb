// Package remind tells a shopper that their turn to buy has come (a
// waiting room's pass, a draw's win, a returned unit) when their tab is not
// open: by Web Push where their browser allowed it, by e-mail where they
// gave an address (README.md in this folder).
//
// Every gateway hears every turn on the waiting room's channel
// (waitroom.ParseTurn); one of them claims it in Redis and its Reminder
// queues it in memory, waits Delay, and
// reminds only if the pass is still unused then: a shopper whose tab is
// open has the pass on their socket at once and has usually bought by
// then. Sending happens here, on workers of a bounded queue, never on the
// buying path; failures are retried with backoff until the turn ends.
package remind

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/seckill/waitroom"
)

// Turn is a shopper's turn to buy, until ValidUntil, as the waiting room
// publishes it on waitroom.Channel.
type Turn = waitroom.Turn

// TurnCheck tells whether a turn is still to be taken (*waitroom.Room
// implements it): true while the shopper holds an unused, unexpired pass.
// MissWouldHold tells whether that pass, missed, would be held for the
// sale's grace: the reminder's deadline is then the hold's end.
type TurnCheck interface {
	PassUnused(ctx context.Context, voucherID, userID int64) (bool, error)
	MissWouldHold(ctx context.Context, voucherID, userID int64) (bool, error)
}

// Defaults of Config.
const (
	DefaultDelay     = 20 * time.Second
	DefaultQueueSize = 10000
	DefaultWorkers   = 4
	DefaultAttempts  = 4
	DefaultBackoff   = 2 * time.Second
)

// Config is what New builds a Reminder from; a zero field means its
// default.
type Config struct {
	// Store reads each shopper's subscriptions and address.
	Store *Store
	// Redis carries the rooms' turns (waitroom.Channel) and the claims
	// that make one gateway of the fleet remind each; nil: only turns
	// handed to TurnCame are reminded.
	Redis redis.UniversalClient
	// Pusher sends Web Push; nil: no push.
	Pusher *Pusher
	// Mailer sends e-mail; nil: no e-mail.
	Mailer *Mailer
	// Check, when set, is asked after Delay whether the turn is still
	// open; nil: every turn is reminded.
	Check TurnCheck
	// Title names a voucher's sale ("" or an error: the voucher's id).
	Title func(ctx context.Context, voucherID int64) (string, error)
	// Hold is how long a missed pass of a voucher is held for its shopper
	// (its grace_seconds) and when its sale ends (holds end with it);
	// nil: the reminder's deadline is the pass's expiry.
	Hold func(ctx context.Context, voucherID int64) (grace time.Duration, end time.Time, err error)
	// PageURL is the shopper page's address the reminder links to.
	PageURL string
	// Delay is how long after a turn came the reminder goes, if the turn
	// is still unused (DefaultDelay): keep it well under the pass's life.
	Delay time.Duration
	// QueueSize bounds the reminders held at once (DefaultQueueSize);
	// more are dropped and counted.
	QueueSize int
	// Workers send at once (DefaultWorkers).
	Workers int
	// Attempts is how often one message is tried (DefaultAttempts), the
	// waits between doubling from Backoff (DefaultBackoff).
	Attempts int
	Backoff  time.Duration
	// Registerer receives the collectors (metrics.go); nil: none.
	Registerer prometheus.Registerer
	Log        *slog.Logger
}

// Reminder queues turns and sends their reminders. TurnCame is safe for
// concurrent use; Run does the work.
type Reminder struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	now     func() time.Time

	mu    sync.Mutex
	queue jobs
	wake  chan struct{}
	// ready is closed once the turns' channel is subscribed.
	ready chan struct{}
}

// New returns a reminder of cfg; it sends nothing until Run.
func New(cfg Config) (*Reminder, error) {
	if cfg.Store == nil {
		return nil, errors.New("remind: no store")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	defInt := func(n *int, v int) {
		if *n <= 0 {
			*n = v
		}
	}
	def(&cfg.Delay, DefaultDelay)
	def(&cfg.Backoff, DefaultBackoff)
	defInt(&cfg.QueueSize, DefaultQueueSize)
	defInt(&cfg.Workers, DefaultWorkers)
	defInt(&cfg.Attempts, DefaultAttempts)
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Reminder{cfg: cfg, log: cfg.Log.With("component", "remind"), metrics: m, now: time.Now,
		wake: make(chan struct{}, 1), ready: make(chan struct{})}, nil
}

// PublicKey is the VAPID public key pages subscribe with; "" without push.
func (r *Reminder) PublicKey() string {
	if r.cfg.Pusher == nil {
		return ""
	}
	return r.cfg.Pusher.PublicKey()
}

// Active reports whether the reminder can reach anyone (push or e-mail
// configured): a room need not read who its steps admitted otherwise.
func (r *Reminder) Active() bool { return r.cfg.Pusher != nil || r.cfg.Mailer != nil }

// Store is where the shoppers' contacts are kept.
func (r *Reminder) Store() *Store { return r.cfg.Store }

// TurnCame queues t's reminder for Delay from now. It never blocks: with
// the queue full the turn is dropped (and counted).
func (r *Reminder) TurnCame(_ context.Context, t Turn) {
	if !r.Active() {
		return
	}
	if r.add(&job{due: r.now().Add(r.cfg.Delay), turn: t}) {
		r.metrics.turn("queued")
	} else {
		r.metrics.turn("dropped")
	}
}

// channels of a message.
const (
	chanPush  = "push"
	chanEmail = "email"
)

// job is a turn to check (channel "") or one message to send.
type job struct {
	due     time.Time
	turn    Turn
	channel string
	sub     Subscription
	addr    string
	lang    string
	msg     Message
	attempt int
}

// jobs is a min-heap by due.
type jobs []*job

func (h jobs) Len() int           { return len(h) }
func (h jobs) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h jobs) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *jobs) Push(x any)        { *h = append(*h, x.(*job)) }
func (h *jobs) Pop() any {
	old := *h
	j := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return j
}

func (r *Reminder) add(j *job) bool {
	r.mu.Lock()
	if len(r.queue) >= r.cfg.QueueSize {
		r.mu.Unlock()
		return false
	}
	heap.Push(&r.queue, j)
	n := len(r.queue)
	r.mu.Unlock()
	r.metrics.depth(n)
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return true
}

// next is the earliest job when it is due; else how long until it is
// (0: the queue is empty).
func (r *Reminder) next() (*job, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.queue) == 0 {
		return nil, 0
	}
	if wait := r.queue[0].due.Sub(r.now()); wait > 0 {
		return nil, wait
	}
	j := heap.Pop(&r.queue).(*job)
	r.metrics.depth(len(r.queue))
	return j, 0
}

// Run hands due jobs to the workers until ctx ends, then returns nil once
// the workers have finished the messages in hand. What is still queued
// then is lost: a reminder is a courtesy, the page shows the turn anyway.
func (r *Reminder) Run(ctx context.Context) error {
	if r.cfg.Redis != nil && r.Active() {
		go r.listen(ctx)
	} else {
		close(r.ready)
	}
	work := make(chan *job)
	var wg sync.WaitGroup
	for range r.cfg.Workers {
		wg.Go(func() {
			for j := range work {
				r.do(context.WithoutCancel(ctx), j)
			}
		})
	}
	defer func() {
		close(work)
		wg.Wait()
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		j, wait := r.next()
		if j != nil {
			select {
			case work <- j:
				continue
			case <-ctx.Done():
				return nil
			}
		}
		if wait <= 0 {
			wait = time.Hour
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case <-r.wake:
		case <-timer.C:
		}
	}
}

// sendTimeout bounds one job: a push service or SMTP server that hangs
// holds a worker no longer, and a stopping process waits for the jobs in
// hand within its shutdown timeout.
const sendTimeout = 10 * time.Second

// do runs one job, bounded by sendTimeout.
func (r *Reminder) do(ctx context.Context, j *job) {
	ctx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	if j.channel == "" {
		r.fanOut(ctx, j.turn)
		return
	}
	var err error
	switch j.channel {
	case chanPush:
		err = r.cfg.Pusher.Push(ctx, j.sub, j.turn, j.msg)
	case chanEmail:
		err = r.cfg.Mailer.Mail(ctx, j.addr, j.lang, j.turn, j.msg)
	}
	var perm permanent
	switch {
	case err == nil:
		r.metrics.send(j.channel, "sent")
	case errors.Is(err, errGone):
		r.metrics.send(j.channel, "gone")
		if err := r.cfg.Store.forgetEndpoint(ctx, j.sub.Endpoint); err != nil {
			r.log.Warn("remind: a gone subscription is kept", "err", err)
		}
	case errors.As(err, &perm) || j.attempt+1 >= r.cfg.Attempts:
		r.metrics.send(j.channel, "failed")
		r.log.Warn("remind: reminder not sent", "channel", j.channel, "user_id", j.turn.UserID, "voucher_id", j.turn.VoucherID, "err", err)
	default:
		wait := r.cfg.Backoff << j.attempt
		if r.now().Add(wait).After(j.msg.Until) {
			r.metrics.send(j.channel, "failed")
			r.log.Warn("remind: reminder not sent before the turn ends", "channel", j.channel, "user_id", j.turn.UserID, "err", err)
			return
		}
		next := *j
		next.attempt++
		next.due = r.now().Add(wait)
		if !r.add(&next) {
			r.metrics.send(j.channel, "failed")
			return
		}
		r.metrics.send(j.channel, "retried")
	}
}

// fanOut checks that t is still open and queues one message per way the
// shopper can be reached.
func (r *Reminder) fanOut(ctx context.Context, t Turn) {
	if !r.now().Before(t.ValidUntil) {
		r.metrics.turn("used")
		return
	}
	until := t.ValidUntil
	if r.cfg.Check != nil {
		open, err := r.cfg.Check.PassUnused(ctx, t.VoucherID, t.UserID)
		if err != nil {
			// Unsure: a reminder too many beats a missed turn.
			r.log.Warn("remind: cannot tell whether the turn was used; reminding", "user_id", t.UserID, "voucher_id", t.VoucherID, "err", err)
		} else if !open {
			r.metrics.turn("used")
			return
		}
		until = r.deadline(ctx, t)
	}
	c, err := r.cfg.Store.Contacts(ctx, t.UserID)
	if err != nil {
		r.metrics.turn("failed")
		r.log.Warn("remind: cannot read a shopper's contacts", "user_id", t.UserID, "err", err)
		return
	}
	reach := 0
	title := r.title(ctx, t.VoucherID)
	page := r.pageOf(t.VoucherID)
	if r.cfg.Pusher != nil {
		for _, sub := range c.Push {
			reach++
			r.queueSend(&job{turn: t, channel: chanPush, sub: sub, lang: sub.Lang, msg: message(sub.Lang, title, page, until)})
		}
	}
	if r.cfg.Mailer != nil && c.Email != "" {
		reach++
		r.queueSend(&job{turn: t, channel: chanEmail, addr: c.Email, lang: c.EmailLang, msg: message(c.EmailLang, title, page, until)})
	}
	if reach == 0 {
		r.metrics.turn("unreachable")
	}
}

// deadline is when t's shopper may last come back and buy: the end of
// the hold a missed pass keeps (waitroom's README, "A missed turn is
// held"), never past the sale's end; the pass's expiry when the pass
// would not be held or the room cannot tell (the earlier time is the
// safe one to promise).
func (r *Reminder) deadline(ctx context.Context, t Turn) time.Time {
	if r.cfg.Hold == nil {
		return t.ValidUntil
	}
	held, err := r.cfg.Check.MissWouldHold(ctx, t.VoucherID, t.UserID)
	if err != nil || !held {
		return t.ValidUntil
	}
	grace, end, err := r.cfg.Hold(ctx, t.VoucherID)
	if err != nil || grace <= 0 {
		return t.ValidUntil
	}
	until := t.ValidUntil.Add(grace)
	if !end.IsZero() && end.Before(until) {
		until = end
	}
	if until.Before(t.ValidUntil) {
		return t.ValidUntil
	}
	return until
}

func (r *Reminder) queueSend(j *job) {
	j.due = r.now()
	if !r.add(j) {
		r.metrics.send(j.channel, "failed")
	}
}

// title is the sale's name, or its number when the catalog cannot say.
func (r *Reminder) title(ctx context.Context, voucherID int64) string {
	if r.cfg.Title != nil {
		if s, err := r.cfg.Title(ctx, voucherID); err == nil && s != "" {
			return s
		}
	}
	return fmt.Sprintf("#%d", voucherID)
}

// pageOf is the shopper page's address for a voucher.
func (r *Reminder) pageOf(voucherID int64) string {
	u, err := url.Parse(r.cfg.PageURL)
	if err != nil || r.cfg.PageURL == "" {
		u = &url.URL{Path: "/"}
	}
	q := u.Query()
	q.Set("voucher", strconv.FormatInt(voucherID, 10))
	u.RawQuery = q.Encode()
	return u.String()
}
