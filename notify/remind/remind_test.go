package remind_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack"
	"github.com/flashsale/seckill/notify/remind"
	"github.com/flashsale/seckill/seckill/testlog"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// mailTo is the newest message mailpit got for addr, with its text; ok
// false while there is none.
func mailTo(t *testing.T, mail *devstack.Mailpit, addr string) (devstack.MailMessage, bool) {
	t.Helper()
	m, ok, err := mail.MessageTo(context.Background(), addr)
	require.NoError(t, err)
	return m, ok
}

// counter reads one series of a counter family from reg (0 when absent).
func counter(t *testing.T, reg *prometheus.Registry, family string, labels map[string]string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() != family {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue next
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// A shopper admitted from a waiting room is reminded, once the delay is
// over and the pass still unused: by e-mail through a real SMTP server,
// and by Web Push to each browser (signed and encrypted as a push service
// and a browser check). A subscription its push service calls gone is
// deleted; a shopper who used the pass before the delay gets nothing.
func TestTurnRemindsByMailAndPush(t *testing.T) {
	ctx := context.Background()
	store := remind.NewStore(stack.NewDatabase(t))
	mail := stack.Mailpit(t)
	keys, err := remind.GenerateVAPID("mailto:ops@shop.example")
	require.NoError(t, err)
	push := newPushService(t, keys.PublicKey)
	mailer, err := remind.NewMailer(strings.Replace(mail.SMTPURL, "smtp://", "smtp://relay:secret@", 1), "shop@shop.example")
	require.NoError(t, err)

	rdb := stack.Redis(t)
	secret := []byte("remind-test-room-secret-0123456789")
	title := func(_ context.Context, id int64) (string, error) { return fmt.Sprintf("Spring sale %d", id), nil }
	reg := prometheus.NewRegistry()
	rem, err := remind.New(remind.Config{Store: store, Mailer: mailer,
		Pusher: remind.NewPusher(keys, push.srv.Client()),
		Check:  waitroom.New(waitroom.Config{Redis: rdb, Secret: secret}),
		Title:  title,
		// The delay leaves the early shopper the time to buy, as a
		// shopper with the page open would.
		PageURL: "https://shop.example/", Delay: 2 * time.Second, Redis: rdb, Registerer: reg, Log: testlog.Logger(t, slog.LevelDebug)})
	require.NoError(t, err)
	room := waitroom.New(waitroom.Config{Redis: rdb, Secret: secret})
	// Two gateways hear every turn; each is reminded once.
	reg2 := prometheus.NewRegistry()
	other, err := remind.New(remind.Config{Store: store, Mailer: mailer, Pusher: remind.NewPusher(keys, push.srv.Client()),
		Check: waitroom.New(waitroom.Config{Redis: rdb, Secret: secret}), Title: title, PageURL: "https://shop.example/",
		Delay: 2 * time.Second, Redis: rdb, Registerer: reg2})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 2)
	go func() { done <- rem.Run(runCtx) }()
	go func() { done <- other.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done; <-done })
	<-rem.Ready()
	<-other.Ready()

	tag := strconv.FormatInt(time.Now().UnixNano(), 36)
	const buyer, early int64 = 501, 502
	buyerAddr, earlyAddr := "buyer-"+tag+"@mail.example", "early-"+tag+"@mail.example"
	require.NoError(t, store.SetEmail(ctx, buyer, buyerAddr, remind.LangEnglish))
	require.NoError(t, store.SetEmail(ctx, early, earlyAddr, remind.LangChinese))
	phone, phoneSub := push.subscribe(t, "/push/phone-"+tag)
	require.NoError(t, store.SaveSubscription(ctx, buyer, phoneSub))
	_, goneSub := push.subscribe(t, "/gone/laptop-"+tag)
	require.NoError(t, store.SaveSubscription(ctx, buyer, goneSub))
	earlyPhone, earlySub := push.subscribe(t, "/push/early-"+tag)
	require.NoError(t, store.SaveSubscription(ctx, early, earlySub))

	now := time.Now()
	line := waitroom.Line{VoucherID: 880000 + time.Now().UnixNano()%10000, BeginAt: now.Add(-time.Second), EndAt: now.Add(time.Hour), AdmitPerSecond: 100}
	for _, u := range []int64{buyer, early} {
		_, err := room.Join(ctx, line, u)
		require.NoError(t, err)
	}
	var admitted int64
	adm := waitroom.NewAdmitter(waitroom.AdmitterConfig{Room: room,
		Targets: func(context.Context) ([]waitroom.Target, error) {
			return []waitroom.Target{{Line: line, Passes: -1}}, nil
		},
		OnStep: func(_ int64, s waitroom.Step) { admitted += s.Admitted }})
	adm.Tick(ctx)
	require.EqualValues(t, 2, admitted)
	// The step announced both turns; the early one buys within the delay.
	st, err := room.Status(ctx, line, early)
	require.NoError(t, err)
	_, err = room.Claim(ctx, line.VoucherID, early, st.Pass, "remind-test-"+tag)
	require.NoError(t, err)
	bst, err := room.Status(ctx, line, buyer)
	require.NoError(t, err)
	until := bst.PassExpiresAt.UTC()

	var got devstack.MailMessage
	require.Eventually(t, func() bool {
		var ok bool
		got, ok = mailTo(t, mail, buyerAddr)
		return ok
	}, 20*time.Second, 100*time.Millisecond, "no e-mail for the buyer")
	sale := fmt.Sprintf("Spring sale %d", line.VoucherID)
	require.Contains(t, got.Subject, sale)
	require.Contains(t, got.Text, until.Format("2006-01-02 15:04:05 UTC"), "the deadline")
	require.Contains(t, got.Text, fmt.Sprintf("https://shop.example/?voucher=%d", line.VoucherID))

	require.Eventually(t, func() bool { return len(phone.messages()) == 1 }, 20*time.Second, 50*time.Millisecond)
	var payload struct {
		Title, Body, URL string
		VoucherID        string    `json:"voucher_id"`
		Until            time.Time `json:"until"`
	}
	require.NoError(t, json.Unmarshal(phone.messages()[0], &payload))
	require.Equal(t, strconv.FormatInt(line.VoucherID, 10), payload.VoucherID)
	require.True(t, until.Equal(payload.Until), "until %v, pushed %v", until, payload.Until)
	require.Contains(t, payload.Title, sale)
	require.Empty(t, phone.refusals)

	require.Eventually(t, func() bool {
		c, err := store.Contacts(ctx, buyer)
		require.NoError(t, err)
		return len(c.Push) == 1 && c.Push[0].Endpoint == phoneSub.Endpoint
	}, 20*time.Second, 50*time.Millisecond, "the gone subscription is deleted")
	both := func(family string, labels map[string]string) float64 {
		return counter(t, reg, family, labels) + counter(t, reg2, family, labels)
	}
	require.Eventually(t, func() bool {
		return both(remind.MetricTurns, map[string]string{"outcome": "used"}) == 1
	}, 20*time.Second, 50*time.Millisecond)
	require.EqualValues(t, 2, both(remind.MetricTurns, map[string]string{"outcome": "queued"}), "each turn claimed by one gateway")
	_, mailed := mailTo(t, mail, earlyAddr)
	require.False(t, mailed, "a shopper who used the turn is not reminded")
	require.Empty(t, earlyPhone.messages())
	require.EqualValues(t, 1, both(remind.MetricSends, map[string]string{"channel": "email", "result": "sent"}))
	require.EqualValues(t, 1, both(remind.MetricSends, map[string]string{"channel": "push", "result": "gone"}))
}

// A push service that answers 503 twice gets the message on the third
// try, after backoff; each retry is counted.
func TestPushIsRetriedWithBackoff(t *testing.T) {
	ctx := context.Background()
	store := remind.NewStore(stack.NewDatabase(t))
	keys, err := remind.GenerateVAPID("https://shop.example/contact")
	require.NoError(t, err)
	push := newPushService(t, keys.PublicKey)
	phone, sub := push.subscribe(t, "/push/busy")
	phone.failFirst = 2
	require.NoError(t, store.SaveSubscription(ctx, 61, sub))
	reg := prometheus.NewRegistry()
	rem, err := remind.New(remind.Config{Store: store, Pusher: remind.NewPusher(keys, push.srv.Client()),
		Delay: time.Millisecond, Backoff: 10 * time.Millisecond, Attempts: 4, Registerer: reg, Log: testlog.Logger(t, slog.LevelDebug)})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- rem.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })

	rem.TurnCame(ctx, remind.Turn{VoucherID: 9, UserID: 61, ValidUntil: time.Now().Add(time.Minute)})
	require.Eventually(t, func() bool { return len(phone.messages()) == 1 }, 20*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool {
		return counter(t, reg, remind.MetricSends, map[string]string{"channel": "push", "result": "sent"}) == 1
	}, 20*time.Second, 20*time.Millisecond)
	require.EqualValues(t, 2, counter(t, reg, remind.MetricSends, map[string]string{"channel": "push", "result": "retried"}))
	var payload struct{ Title string }
	require.NoError(t, json.Unmarshal(phone.messages()[0], &payload))
	require.Equal(t, "Your turn: #9", payload.Title, "no catalog: the sale is named by its number")
}

// A pass missed is held for the sale's grace (waitroom's README), so the
// reminder names the hold's end, not the pass's: the shopper may come
// back and buy until then. Never past the sale's end, where holds end.
func TestReminderNamesTheHoldsEnd(t *testing.T) {
	ctx := context.Background()
	store := remind.NewStore(stack.NewDatabase(t))
	mail := stack.Mailpit(t)
	mailer, err := remind.NewMailer(mail.SMTPURL, "shop@shop.example")
	require.NoError(t, err)
	rdb := stack.Redis(t)
	secret := []byte("remind-hold-test-secret-0123456789")
	room := waitroom.New(waitroom.Config{Redis: rdb, Secret: secret, PassTTL: 5 * time.Second})
	now := time.Now()
	base := 890000 + now.UnixNano()%10000
	// The first sale runs an hour, the second ends before its hold would.
	ends := map[int64]time.Time{base: now.Add(time.Hour), base + 1: now.Add(30 * time.Second)}
	rem, err := remind.New(remind.Config{Store: store, Mailer: mailer, Check: room,
		Hold: func(_ context.Context, v int64) (time.Duration, time.Time, error) {
			return 90 * time.Second, ends[v], nil
		},
		Delay: time.Millisecond, Log: testlog.Logger(t, slog.LevelDebug)})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- rem.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })

	tag := strconv.FormatInt(now.UnixNano(), 36)
	for i, v := range []int64{base, base + 1} {
		user := int64(701 + i)
		addr := fmt.Sprintf("held%d-%s@mail.example", i, tag)
		require.NoError(t, store.SetEmail(ctx, user, addr, remind.LangEnglish))
		line := waitroom.Line{VoucherID: v, BeginAt: now.Add(-time.Second), EndAt: ends[v], AdmitPerSecond: 100, Grace: 90 * time.Second}
		_, err := room.Join(ctx, line, user)
		require.NoError(t, err)
		waitroom.NewAdmitter(waitroom.AdmitterConfig{Room: room,
			Targets: func(context.Context) ([]waitroom.Target, error) {
				return []waitroom.Target{{Line: line, Passes: -1}}, nil
			}}).Tick(ctx)
		st, err := room.Status(ctx, line, user)
		require.NoError(t, err)
		require.Equal(t, waitroom.StateAdmitted, st.State)
		rem.TurnCame(ctx, remind.Turn{VoucherID: v, UserID: user, Kind: waitroom.TurnPass, ValidUntil: st.PassExpiresAt})

		want := st.PassExpiresAt.Add(90 * time.Second)
		if ends[v].Before(want) {
			want = ends[v]
		}
		var got devstack.MailMessage
		require.Eventually(t, func() bool {
			var ok bool
			got, ok = mailTo(t, mail, addr)
			return ok
		}, 20*time.Second, 50*time.Millisecond, "no e-mail for sale %d", v)
		require.Contains(t, got.Text, want.UTC().Format("2006-01-02 15:04:05 UTC"), "sale %d: the hold's end", v)
		require.NotContains(t, got.Text, st.PassExpiresAt.UTC().Format("2006-01-02 15:04:05 UTC"), "sale %d: not the pass's", v)
	}
}
