package loadtest

// The waiting-room scenario (`loadtest room`): RunRoom drives one timeline of
// joiners, shoppers who buy with their pass, bots and watching sockets;
// roomreport.go checks and reports what it saw. RunRoom stays one function
// because its steps share the run's clock and counters in order.

import (
	"container/heap"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/pause"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// RoomReport is what a waiting-room run measured (`loadtest room`).
type RoomReport struct {
	VoucherID string `json:"voucher_id"`
	Stock     int64  `json:"stock"`
	// Joiners joined the line: Prequeue of them before begin_at (random
	// places), the rest after (arrival order); JoinErrors failed.
	Joiners    int     `json:"joiners"`
	Prequeue   int     `json:"prequeue"`
	JoinErrors int64   `json:"join_errors"`
	JoinPerSec float64 `json:"join_per_second"`
	// AdmitTarget is the room's admit_per_second; AdmitMeasured the slope
	// of the admitted count (admin stats, sampled) while the line was long
	// and the stock not nearly gone; AdmitRatio their ratio. AdmitWindowS
	// and AdmitCounted are the span and the admissions the slope was taken
	// over; AdmitChecked says whether they were enough for the ratio to be
	// checked against 5% (see admissionRate), AdmitNote why not.
	AdmitTarget   int64   `json:"admit_target"`
	AdmitMeasured float64 `json:"admit_measured"`
	AdmitRatio    float64 `json:"admit_ratio"`
	AdmitWindowS  float64 `json:"admit_window_s"`
	AdmitCounted  int64   `json:"admit_counted"`
	AdmitChecked  bool    `json:"admit_checked"`
	AdmitNote     string  `json:"admit_note,omitempty"`
	// Polls are the GETs of a place by shoppers without a socket (each
	// asks again when its estimated wait says so). Shoppers with one never
	// ask: like the page, they join and wait for the socket to push their
	// pass.
	Polls int64 `json:"polls"`
	// Bought are the honest buys with a pass answered 202; BuyRefused
	// those refused (sold out mostly).
	Bought     int64            `json:"bought"`
	BuyRefused map[string]int64 `json:"buy_refused"`
	// BuyRetries are buys sent again after a 5xx or no answer, with the
	// same Idempotency-Key and the same pass (as a page would).
	BuyRetries int64 `json:"buy_retries"`
	// Bots: buys without a pass, with a forged one, with a stolen one (an
	// admitted shopper's pass, sent with the bot's token), and the owner's
	// reuse of a used pass; every one must be 403 not_admitted.
	BotTries    map[string]int64 `json:"bot_tries"`
	BotAnswers  map[string]int64 `json:"bot_answers"`
	BotAccepted int64            `json:"bot_accepted"`
	// BotOrders are the orders of the voucher in the bots' own order
	// lists at the end (GET /api/v1/orders as each bot); BotListsRead how
	// many of the lists could be read.
	BotOrders    int `json:"bot_orders"`
	BotListsRead int `json:"bot_lists_read"`
	// Sockets watched places live: frames they got, how many sockets were
	// told their shopper was admitted (SocketsAdmitted; their shoppers buy
	// with the pass pushed, so it counts every admitted watcher), the push
	// delay of the pass (admission step to frame, Redis time), the shortest
	// gap between two frames to one socket as they arrived, and
	// FrameBunchMS, the most any run of one socket's frames arrived sooner
	// than one a second allows (see frameBunch).
	Sockets         int          `json:"sockets"`
	SocketFrames    int64        `json:"socket_frames"`
	SocketsAdmitted int          `json:"sockets_admitted"`
	AdmittedPush    LatencyStats `json:"admitted_push"`
	MinFrameGapMS   float64      `json:"min_frame_gap_ms"`
	FrameBunchMS    float64      `json:"frame_bunch_ms"`
	PlacePushP50MS  float64      `json:"place_push_p50_ms"`
	PlacePushP99MS  float64      `json:"place_push_p99_ms"`
	// Moves and Frames are the gateway's counters: line moves read from
	// Redis (one per admission step) and queue frames written.
	Moves  float64 `json:"moves"`
	Frames float64 `json:"frames"`
	// Closed is true when a shopper was told sold_out or closed during the
	// run (the stock was gone: the holds are not paid, so the room is sold
	// out until its end). ClosedSampled shoppers whose last read said
	// waiting were read again after it, until told sold_out or closed or
	// closeWait passed; ClosedSeen of them were told either.
	// ClosedAdmitted of those read were admitted after their last read
	// and before the close: not left waiting, so not in ClosedSampled.
	Closed         bool `json:"closed"`
	ClosedSampled  int  `json:"closed_sampled"`
	ClosedSeen     int  `json:"closed_seen"`
	ClosedAdmitted int  `json:"closed_admitted"`
	ClosedUnread   int  `json:"closed_unread"`
	// Queue is the room's figures at the end (admin stats).
	Queue    map[string]int64 `json:"queue"`
	Checks   []Check          `json:"checks"`
	ElapsedS float64          `json:"elapsed_s"`
}

type roomQueue = api.Queue

// roomShopper is one joiner as the tool follows it.
type roomShopper struct {
	id    int64
	token string
	due   time.Time
	index int // in the heap
	final bool
	// state is the shopper's last read of its place ("" before the first).
	state waitroom.State
	// sock is the shopper's socket, nil for those who read their place.
	sock *roomSocket
}

type dueHeap []*roomShopper

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i]; h[i].index, h[j].index = i, j }
func (h *dueHeap) Push(x any)        { s := x.(*roomShopper); s.index = len(*h); *h = append(*h, s) }
func (h *dueHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	*h = old[:len(old)-1]
	return s
}

// RunRoom is the waiting-room scenario: cfg.Room shoppers join a voucher's
// line, cfg.RoomPrequeue of them in the pre-queue and the rest after
// begin_at; the room admits cfg.RoomRate a second; admitted shoppers buy
// with their pass; cfg.RoomBots bots try without a pass, with forged and
// with stolen passes; cfg.RoomSockets shoppers watch their place on a
// socket. It checks that no bot bought anything, the admission rate, and
// the usual invariants (no oversell, the limit, every 202 persisted).
func RunRoom(ctx context.Context, cfg Config, stdout io.Writer) (RoomReport, error) {
	start := time.Now()
	tr := newTransport(cfg.Concurrency)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: cfg.Timeout}
	base := strings.TrimRight(cfg.BaseURL, "/")
	api := &apiClient{base: base, admin: cfg.AdminToken, http: client, secret: []byte(cfg.JWTSecret)}
	offset, _, err := syncClock(ctx, client, base)
	if err != nil {
		return RoomReport{}, err
	}
	serverNow := func() time.Time { return time.Now().Add(offset) }
	begin := serverNow().Add(cfg.OpenIn).Truncate(time.Second).Add(time.Second)
	v, err := api.createVoucher(ctx, newVoucher{
		Title: "loadtest waiting room", Kind: "seckill", PriceCents: cfg.PriceCents, Stock: cfg.Stock,
		PerUserLimit: cfg.PerUserLimit, BeginAt: begin, EndAt: begin.Add(time.Hour),
		WaitingRoom: &roomSpec{AdmitPerSecond: cfg.RoomRate, PrequeueSeconds: int64(cfg.OpenIn/time.Second) + 60},
	})
	if err != nil {
		return RoomReport{}, err
	}
	rep := RoomReport{VoucherID: v.ID, Stock: cfg.Stock, Joiners: cfg.Room, AdmitTarget: cfg.RoomRate,
		BuyRefused: map[string]int64{}, BotTries: map[string]int64{}, BotAnswers: map[string]int64{}}
	exp := begin.Add(2 * time.Hour)
	shoppers := make([]*roomShopper, cfg.Room)
	for i := range shoppers {
		id := cfg.FirstUserID + int64(i)
		tok, err := mintToken(api.secret, id, exp)
		if err != nil {
			return rep, err
		}
		shoppers[i] = &roomShopper{id: id, token: tok}
	}
	queuePath := "/api/v1/vouchers/" + url.PathEscape(v.ID) + "/queue"
	buyPath := "/api/v1/vouchers/" + url.PathEscape(v.ID) + "/orders"
	var mu sync.Mutex // guards rep's maps, the heap and what follows
	stolen := []string{}
	var orders []string
	buyers := map[int64]bool{}

	// Sockets: every (Room/Sockets)-th shopper watches its place live.
	var watchers []*roomSocket
	if cfg.RoomSockets > 0 {
		wsURL := strings.Replace(base, "http", "ws", 1) + "/api/v1/ws?token="
		step := max(1, cfg.Room/cfg.RoomSockets)
		for i := 0; i < cfg.Room && len(watchers) < cfg.RoomSockets; i += step {
			conn, _, err := websocket.DefaultDialer.DialContext(ctx, wsURL+url.QueryEscape(shoppers[i].token), nil)
			if err != nil {
				return rep, fmt.Errorf("loadtest: socket: %w", err)
			}
			shoppers[i].sock = readRoomSocket(conn)
			watchers = append(watchers, shoppers[i].sock)
		}
		defer func() {
			for _, w := range watchers {
				_ = w.conn.Close()
			}
		}()
	}
	rep.Sockets = len(watchers)

	// Joins: the pre-queue share before begin_at, the rest after it.
	var joinErrs atomic.Int64
	join := func(from, to int) {
		var next atomic.Int64
		next.Store(int64(from))
		var wg sync.WaitGroup
		for range cfg.Concurrency {
			wg.Go(func() {
				for {
					i := int(next.Add(1) - 1)
					if i >= to || ctx.Err() != nil {
						return
					}
					s := shoppers[i]
					status, _, err := api.raw(ctx, http.MethodPost, queuePath, map[string]string{"Authorization": "Bearer " + s.token}, nil)
					if err != nil || status != http.StatusOK {
						joinErrs.Add(1)
						s.final = true
					}
				}
			})
		}
		wg.Wait()
	}
	pre := int(float64(cfg.Room) * cfg.RoomPrequeue)
	joinStart := time.Now()
	join(0, pre)
	rep.Prequeue = pre
	if serverNow().After(begin) {
		fmt.Fprintf(stdout, "warning: the pre-queue joins ended %v after begin_at; raise -open-in\n", serverNow().Sub(begin).Round(time.Millisecond))
	}
	joinTook := time.Since(joinStart)
	if err := pause.For(ctx, time.Until(begin.Add(-offset))); err != nil {
		return rep, err
	}

	// From begin_at: the stats sampler, the late joiners, the shoppers
	// asking for their place when their estimated wait says so, the bots.
	run, stop := context.WithTimeout(ctx, cfg.Duration)
	defer stop()
	var samples []admitSample
	var sampler sync.WaitGroup
	sampler.Go(func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for run.Err() == nil {
			var st struct {
				Queue map[string]int64 `json:"queue"`
			}
			sent := time.Now()
			if err := api.do(run, "stats", http.MethodGet, "/api/v1/admin/vouchers/"+url.PathEscape(v.ID)+"/stats", api.adminAuth(), nil, &st); err == nil && st.Queue != nil {
				// The figures were read somewhere in the round trip: its
				// middle is the best guess of when.
				at := sent.Add(time.Since(sent) / 2)
				mu.Lock()
				samples = append(samples, admitSample{at, st.Queue["admitted"], st.Queue["waiting"]})
				mu.Unlock()
			}
			select {
			case <-run.Done():
			case <-t.C:
			}
		}
	})
	lateStart := time.Now()
	join(pre, cfg.Room)
	rep.JoinErrors = joinErrs.Load()
	rep.JoinPerSec = float64(cfg.Room) / (joinTook + time.Since(lateStart)).Seconds()

	h := &dueHeap{}
	now := time.Now()
	for _, s := range shoppers {
		if !s.final && s.sock == nil {
			s.due = now
			heap.Push(h, s)
		}
	}
	var polls, bought, retries atomic.Int64
	closed := atomic.Bool{}
	// buy sends an admitted shopper's buy with its pass. A buy with no
	// answer or a 5xx is sent again as it was: the same key replays an
	// order already taken, and the room takes the same pass again with the
	// same key.
	buy := func(s *roomShopper, pass string) {
		key := "room-" + strconv.FormatInt(s.id, 36)
		hdr := map[string]string{"Authorization": "Bearer " + s.token, "Seckill-Pass": pass, "Idempotency-Key": key}
		var status int
		var body []byte
		var err error
		for try := range buyTries {
			if try > 0 {
				retries.Add(1)
				if pause.For(run, time.Duration(try)*200*time.Millisecond) != nil {
					break
				}
			}
			status, body, err = api.raw(run, http.MethodPost, buyPath, hdr, map[string]any{"quantity": 1})
			if err == nil && status < 500 {
				break
			}
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			rep.BuyRefused["error"]++
		case status == http.StatusAccepted:
			bought.Add(1)
			var p struct {
				OrderID string `json:"order_id"`
			}
			_ = json.Unmarshal(body, &p)
			orders = append(orders, p.OrderID)
			buyers[s.id] = true
			stolen = append(stolen, pass+"\x00"+s.token)
		default:
			rep.BuyRefused[decodeAPIError("", status, body).Code]++
		}
	}
	poll := func(s *roomShopper) {
		auth := map[string]string{"Authorization": "Bearer " + s.token}
		status, body, err := api.raw(run, http.MethodGet, queuePath, auth, nil)
		polls.Add(1)
		var q roomQueue
		if err != nil || status != http.StatusOK || json.Unmarshal(body, &q) != nil {
			mu.Lock()
			s.due = time.Now().Add(time.Second)
			heap.Push(h, s)
			mu.Unlock()
			return
		}
		s.state = waitroom.State(q.State)
		switch waitroom.State(q.State) {
		case waitroom.StateWaiting:
			wait := time.Duration(float64(q.Position) / float64(cfg.RoomRate) * 0.8 * float64(time.Second))
			mu.Lock()
			s.due = time.Now().Add(min(max(wait, 300*time.Millisecond), maxPollGap))
			heap.Push(h, s)
			mu.Unlock()
		case waitroom.StateAdmitted:
			if q.Pass != nil { // else used already
				buy(s, *q.Pass)
			}
		default:
			if lineOver(waitroom.State(q.State)) {
				closed.Store(true)
			}
		}
	}
	var pollers sync.WaitGroup
	for range cfg.Concurrency {
		pollers.Go(func() {
			for run.Err() == nil && !closed.Load() {
				mu.Lock()
				if h.Len() == 0 {
					mu.Unlock()
					return
				}
				s := (*h)[0]
				if wait := time.Until(s.due); wait > 0 {
					mu.Unlock()
					_ = pause.For(run, min(wait, 50*time.Millisecond))
					continue
				}
				heap.Pop(h)
				mu.Unlock()
				poll(s)
			}
		})
	}
	// Bots: their own accounts, buying all through the sale.
	var bots sync.WaitGroup
	for b := range cfg.RoomBots {
		bots.Go(func() {
			id := botID(cfg, b)
			tok, err := mintToken(api.secret, id, exp)
			if err != nil {
				return
			}
			kinds := []string{"no pass", "forged pass", "stolen pass", "reused pass"}
			for i := 0; run.Err() == nil && !closed.Load(); i++ {
				kind := kinds[i%len(kinds)]
				hdr := map[string]string{"Authorization": "Bearer " + tok, "Idempotency-Key": fmt.Sprintf("bot-%d-%d", b, i)}
				switch kind {
				case "forged pass":
					hdr["Seckill-Pass"] = fmt.Sprintf("p1.%s.%d.%d.forged", v.ID, id, time.Now().Add(time.Minute).UnixMilli())
				case "stolen pass", "reused pass":
					mu.Lock()
					var p string
					if len(stolen) > 0 {
						p = stolen[(b+i)%len(stolen)]
					}
					mu.Unlock()
					if p == "" {
						_ = pause.For(run, 50*time.Millisecond)
						continue
					}
					pass, owner, _ := strings.Cut(p, "\x00")
					hdr["Seckill-Pass"] = pass
					if kind == "reused pass" { // the owner, a second buy with a new key
						hdr["Authorization"] = "Bearer " + owner
					}
				}
				status, body, err := api.raw(run, http.MethodPost, buyPath, hdr, map[string]any{"quantity": 1})
				if err != nil && run.Err() != nil {
					return // cut by the end of the run, not answered by the system
				}
				mu.Lock()
				rep.BotTries[kind]++
				switch {
				case err != nil:
					rep.BotAnswers["error"]++
				case status == http.StatusAccepted:
					rep.BotAccepted++
					rep.BotAnswers["202"]++
				default:
					rep.BotAnswers[strconv.Itoa(status)+" "+decodeAPIError("", status, body).Code]++
				}
				mu.Unlock()
				_ = pause.For(run, 20*time.Millisecond)
			}
		})
	}
	// Watchers: like the page, they joined and wait for their socket to
	// tell them the wait is over; they buy with the pass it pushes.
	var watching sync.WaitGroup
	for _, s := range shoppers {
		if s.sock == nil || s.final {
			continue
		}
		watching.Go(func() {
			select {
			case <-run.Done():
			case q := <-s.sock.news:
				s.state = waitroom.State(q.State)
				switch {
				case waitroom.State(q.State) == waitroom.StateAdmitted:
					buy(s, *q.Pass)
				case lineOver(waitroom.State(q.State)):
					closed.Store(true)
				}
			}
		})
	}
	pollers.Wait()
	if !closed.Load() {
		// The pollers ran out of shoppers before the close: the watchers
		// may still be waiting for their turn.
		watching.Wait()
	}
	stop()
	watching.Wait()
	bots.Wait()
	sampler.Wait()
	rep.Polls, rep.Bought, rep.BuyRetries = polls.Load(), bought.Load(), retries.Load()

	mu.Lock()
	rate := admissionRate(samples, cfg.Stock, cfg.RoomRate)
	mu.Unlock()
	rep.AdmitMeasured, rep.AdmitRatio, rep.AdmitWindowS = rate.perSecond, rate.ratio, rate.window.Seconds()
	rep.AdmitCounted, rep.AdmitChecked, rep.AdmitNote = rate.admitted, rate.checked, rate.note

	// Everyone still waiting at the sell-out is told sold_out (or closed).
	rep.Closed = closed.Load()
	sampleClosed(ctx, api, queuePath, *h, &rep)

	// The sockets' figures.
	var admittedPush []time.Duration
	minGap := time.Duration(math.MaxInt64)
	for _, w := range watchers {
		w.mu.Lock()
		rep.SocketFrames += int64(len(w.frames))
		if slices.ContainsFunc(w.frames, func(f roomFrame) bool { return waitroom.State(f.q.State) == waitroom.StateAdmitted }) {
			rep.SocketsAdmitted++
		}
		rep.FrameBunchMS = max(rep.FrameBunchMS, ms(frameBunch(w.frames, time.Second)))
		for i, f := range w.frames {
			if i > 0 {
				minGap = min(minGap, f.at.Sub(w.frames[i-1].at))
			}
			if waitroom.State(f.q.State) == waitroom.StateAdmitted && f.q.PassExpiresAt != nil {
				admittedAt := f.q.PassExpiresAt.Add(-waitroom.DefaultPassTTL)
				admittedPush = append(admittedPush, f.at.Add(offset).Sub(admittedAt))
			}
		}
		w.mu.Unlock()
	}
	rep.AdmittedPush = latencyStats(admittedPush)
	if minGap != time.Duration(math.MaxInt64) {
		rep.MinFrameGapMS = ms(minGap)
	}
	// The gateway's own figures, from its ops listener when given (else 0).
	if cfg.MetricsURL != "" {
		if m, err := scrapeMetrics(ctx, client, cfg.MetricsURL); err == nil {
			rep.Moves, rep.Frames = m.sum("seckill_queue_moves_total", ""), m.sum("seckill_queue_frames_total", "")
			rep.PlacePushP50MS = 1000 * m.quantile("seckill_queue_push_delay_seconds", `kind="place"`, 0.5)
			rep.PlacePushP99MS = 1000 * m.quantile("seckill_queue_push_delay_seconds", `kind="place"`, 0.99)
		}
	}

	// The invariants, through the API.
	rep.Checks = roomChecks(ctx, api, &rep, v.ID, orders, buyers, cfg)
	rep.ElapsedS = time.Since(start).Seconds()
	writeRoomReport(stdout, cfg, rep)
	for _, c := range rep.Checks {
		if !c.OK {
			return rep, fmt.Errorf("loadtest: room: %s failed: %s", c.Name, c.Detail)
		}
	}
	return rep, nil
}
