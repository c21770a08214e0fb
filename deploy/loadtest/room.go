package loadtest

import (
	"bufio"
	"container/heap"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/flashsale/seckill/seckill/waitroom"
)

// RoomReport is what a waiting-room run measured (-room).
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
	// asks again when its estimated wait says so).
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
	// Sockets watched places live: frames they got, the push delay of the
	// pass (admission step to frame, Redis time), the shortest gap between
	// two frames to one socket as they arrived, and FrameBunchMS, the most
	// any run of one socket's frames arrived sooner than one a second
	// allows (see frameBunch).
	Sockets        int          `json:"sockets"`
	SocketFrames   int64        `json:"socket_frames"`
	AdmittedPush   LatencyStats `json:"admitted_push"`
	MinFrameGapMS  float64      `json:"min_frame_gap_ms"`
	FrameBunchMS   float64      `json:"frame_bunch_ms"`
	PlacePushP50MS float64      `json:"place_push_p50_ms"`
	PlacePushP99MS float64      `json:"place_push_p99_ms"`
	// Moves and Frames are the gateway's counters: line moves read from
	// Redis (one per admission step) and queue frames written.
	Moves  float64 `json:"moves"`
	Frames float64 `json:"frames"`
	// Closed is true when a shopper was told closed during the run (the
	// room closed when the stock was gone). ClosedSampled shoppers whose
	// last read said waiting were read again after it, until told closed
	// or closeWait passed; ClosedSeen of them were told closed.
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

type roomQueue = waitroom.APIQueue

// roomShopper is one joiner as the tool follows it.
type roomShopper struct {
	id    int64
	token string
	due   time.Time
	index int // in the heap
	final bool
	// state is the shopper's last read of its place ("" before the first).
	state waitroom.State
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
			watchers = append(watchers, readRoomSocket(conn))
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
	if err := sleep(ctx, time.Until(begin.Add(-offset))); err != nil {
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
		if !s.final {
			s.due = now
			heap.Push(h, s)
		}
	}
	var polls, bought, retries atomic.Int64
	closed := atomic.Bool{}
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
		s.state = q.State
		switch q.State {
		case waitroom.StateWaiting:
			wait := time.Duration(float64(q.Position) / float64(cfg.RoomRate) * 0.8 * float64(time.Second))
			mu.Lock()
			s.due = time.Now().Add(min(max(wait, 300*time.Millisecond), maxPollGap))
			heap.Push(h, s)
			mu.Unlock()
		case waitroom.StateAdmitted:
			if q.Pass == nil {
				return // used already
			}
			key := "room-" + strconv.FormatInt(s.id, 36)
			hdr := map[string]string{"Authorization": "Bearer " + s.token, "Seckill-Pass": *q.Pass, "Idempotency-Key": key}
			var status int
			var body []byte
			var err error
			// A buy with no answer or a 5xx is sent again as it was: the
			// same key replays an order already taken, and the room takes
			// the same pass again with the same key.
			for try := range buyTries {
				if try > 0 {
					retries.Add(1)
					if sleep(run, time.Duration(try)*200*time.Millisecond) != nil {
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
				stolen = append(stolen, *q.Pass+"\x00"+s.token)
			default:
				rep.BuyRefused[decodeAPIError("", status, body).Code]++
			}
		default:
			if q.State == waitroom.StateClosed {
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
					_ = sleep(run, min(wait, 50*time.Millisecond))
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
						_ = sleep(run, 50*time.Millisecond)
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
				_ = sleep(run, 20*time.Millisecond)
			}
		})
	}
	pollers.Wait()
	stop()
	bots.Wait()
	sampler.Wait()
	rep.Polls, rep.Bought, rep.BuyRetries = polls.Load(), bought.Load(), retries.Load()

	mu.Lock()
	rate := admissionRate(samples, cfg.Stock, cfg.RoomRate)
	mu.Unlock()
	rep.AdmitMeasured, rep.AdmitRatio, rep.AdmitWindowS = rate.perSecond, rate.ratio, rate.window.Seconds()
	rep.AdmitCounted, rep.AdmitChecked, rep.AdmitNote = rate.admitted, rate.checked, rate.note

	// Everyone still waiting when the room closed is told closed.
	rep.Closed = closed.Load()
	sampleClosed(ctx, api, queuePath, *h, &rep)

	// The sockets' figures.
	var admittedPush []time.Duration
	minGap := time.Duration(math.MaxInt64)
	for _, w := range watchers {
		w.mu.Lock()
		rep.SocketFrames += int64(len(w.frames))
		rep.FrameBunchMS = max(rep.FrameBunchMS, ms(frameBunch(w.frames, time.Second)))
		for i, f := range w.frames {
			if i > 0 {
				minGap = min(minGap, f.at.Sub(w.frames[i-1].at))
			}
			if f.q.State == waitroom.StateAdmitted && f.q.PassExpiresAt != nil {
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
	if m, err := scrapeMetrics(ctx, client, base); err == nil {
		rep.Moves, rep.Frames = m.sum("seckill_queue_moves_total", ""), m.sum("seckill_queue_frames_total", "")
		rep.PlacePushP50MS = 1000 * m.quantile("seckill_queue_push_delay_seconds", `kind="place"`, 0.5)
		rep.PlacePushP99MS = 1000 * m.quantile("seckill_queue_push_delay_seconds", `kind="place"`, 0.99)
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

// roomChecks waits for the accepted orders to persist and checks what must
// hold.
func roomChecks(ctx context.Context, api *apiClient, rep *RoomReport, vid string, orders []string, buyers map[int64]bool, cfg Config) []Check {
	var checks []Check
	add := func(name string, ok bool, detail string) {
		checks = append(checks, Check{Name: name, OK: ok, Detail: detail})
	}
	add("no bot bought anything", rep.BotAccepted == 0, fmt.Sprintf("%d bot buys, %d accepted: %v", sum(rep.BotTries), rep.BotAccepted, rep.BotAnswers))
	// Once the stock is gone the catalog answers sold out first, as for
	// everyone; before that every bot buy is refused for its pass.
	notAdmitted, soldOut := rep.BotAnswers["403 not_admitted"], rep.BotAnswers["409 sold_out"]
	add("every bot buy refused: 403 not_admitted (409 sold_out after the sell-out)", notAdmitted+soldOut == sum(rep.BotTries),
		fmt.Sprintf("%d not_admitted + %d sold_out of %d", notAdmitted, soldOut, sum(rep.BotTries)))
	if rep.AdmitChecked {
		add("admission rate held within 5%", rep.AdmitRatio > 0.95 && rep.AdmitRatio < 1.05,
			fmt.Sprintf("%.0f/s measured for %d/s over %.1f s and %d admissions", rep.AdmitMeasured, rep.AdmitTarget, rep.AdmitWindowS, rep.AdmitCounted))
	}
	detail := fmt.Sprintf("%d of %d sampled told closed within %v", rep.ClosedSeen, rep.ClosedSampled, closeWait)
	if rep.ClosedUnread > 0 {
		detail += fmt.Sprintf(", %d could not be read", rep.ClosedUnread)
	}
	if !rep.Closed {
		detail += "; nobody was told closed during the run: did the stock sell out within -duration?"
	}
	add("everyone left waiting is told closed", rep.ClosedSeen == rep.ClosedSampled, detail)
	if rep.Sockets > 0 {
		add("at most one queue frame a second per socket", rep.FrameBunchMS < float64(frameJitter.Milliseconds()),
			fmt.Sprintf("frames arrived at most %.0f ms sooner than one a second allows (under %v of delivery jitter is allowed); shortest gap %.0f ms",
				rep.FrameBunchMS, frameJitter, rep.MinFrameGapMS))
	}

	// Every 202 persisted: the stats show them created (or paid), none
	// still only reserved.
	deadline := time.Now().Add(cfg.PersistWait)
	var st apiStats
	var q struct {
		Queue map[string]int64 `json:"queue"`
	}
	for time.Now().Before(deadline) {
		if err := api.do(ctx, "stats", http.MethodGet, "/api/v1/admin/vouchers/"+url.PathEscape(vid)+"/stats", api.adminAuth(), nil, &st); err == nil &&
			st.Reserved == 0 && st.Created+st.Paid >= int64(len(orders)) {
			break
		}
		_ = sleep(ctx, 200*time.Millisecond)
	}
	_ = api.do(ctx, "stats", http.MethodGet, "/api/v1/admin/vouchers/"+url.PathEscape(vid)+"/stats", api.adminAuth(), nil, &q)
	rep.Queue = q.Queue
	sold := st.Created + st.Paid
	add("every 202 persisted", st.Reserved == 0 && sold == int64(len(orders)),
		fmt.Sprintf("%d accepted, %d created or paid, %d still reserved", len(orders), sold, st.Reserved))
	add("no oversell", sold <= st.StockTotal && st.StockLeft+sold == st.StockTotal,
		fmt.Sprintf("total %d = left %d + sold %d", st.StockTotal, st.StockLeft, sold))
	// A pass is spent by a buy that got an order, or by a final refusal
	// after the claim (sold out in Redis, the limit); a refusal before it
	// (the catalog's sold out) or one that is not the shopper's keeps it.
	spent := rep.BuyRefused["sold_out"] + rep.BuyRefused["limit_exceeded"] + rep.BuyRefused["ended"]
	used := rep.Queue["passes_used"]
	add("passes used: one per order, at most one per final refusal", used >= int64(len(orders)) && used <= int64(len(orders))+spent,
		fmt.Sprintf("passes_used %d, orders %d, sold_out/limit/ended %d", used, len(orders), spent))
	// The per-user limit: each buyer's own orders.
	over := 0
	for id := range buyers {
		tok, err := mintToken(api.secret, id, time.Now().Add(time.Hour))
		if err != nil {
			continue
		}
		var list []apiOrder
		if api.do(ctx, "orders", http.MethodGet, "/api/v1/orders", "Bearer "+tok, nil, &list) == nil {
			var n int64
			for _, o := range list {
				if o.VoucherID == vid && o.Status != "cancelled" && o.Status != "failed" {
					n += o.Quantity
				}
			}
			if n > cfg.PerUserLimit {
				over++
			}
		}
	}
	add("per-user limit held", over == 0, fmt.Sprintf("%d buyers over the limit of %d", over, cfg.PerUserLimit))
	// The bots' own order lists hold nothing of the voucher: not a
	// reservation, not a failed order.
	for b := range cfg.RoomBots {
		tok, err := mintToken(api.secret, botID(cfg, b), time.Now().Add(time.Hour))
		if err != nil {
			continue
		}
		var list []apiOrder
		if api.do(ctx, "orders", http.MethodGet, "/api/v1/orders", "Bearer "+tok, nil, &list) == nil {
			rep.BotListsRead++
			for _, o := range list {
				if o.VoucherID == vid {
					rep.BotOrders++
				}
			}
		}
	}
	add("the bots' order lists are empty", rep.BotListsRead == cfg.RoomBots && rep.BotOrders == 0,
		fmt.Sprintf("%d orders in %d of %d bots' lists read", rep.BotOrders, rep.BotListsRead, cfg.RoomBots))
	return checks
}

// botID is the user id of bot b: after every shopper's.
func botID(cfg Config, b int) int64 { return cfg.FirstUserID + int64(cfg.Room) + int64(b) }

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

func writeRoomReport(w io.Writer, cfg Config, rep RoomReport) {
	if cfg.JSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
		return
	}
	fmt.Fprintf(w, "waiting room of voucher %s (stock %d, %d/s): %d joined (%d in the pre-queue, %d errors) at %.0f/s\n",
		rep.VoucherID, rep.Stock, rep.AdmitTarget, rep.Joiners, rep.Prequeue, rep.JoinErrors, rep.JoinPerSec)
	fmt.Fprintf(w, "admission: %.0f/s measured for %d/s (%.3f) over %.1f s and %d admissions", rep.AdmitMeasured, rep.AdmitTarget, rep.AdmitRatio, rep.AdmitWindowS, rep.AdmitCounted)
	if rep.AdmitNote != "" {
		fmt.Fprintf(w, " (a figure, not checked: %s)", rep.AdmitNote)
	}
	fmt.Fprintf(w, "\n%d place reads by shoppers without a socket; %d bought with a pass (%d buys sent again after a 5xx or no answer), refused %v\n",
		rep.Polls, rep.Bought, rep.BuyRetries, rep.BuyRefused)
	fmt.Fprintf(w, "push: %d sockets got %d queue frames (shortest gap %.0f ms as they arrived, runs at most %.0f ms sooner than one a second); pass pushed p50 %.0f ms p99 %.0f ms max %.0f ms after the admission step; place updates p50 %.0f ms p99 %.0f ms (server: age of the latest line move a frame tells, when it is handed to the socket); gateway: %.0f line moves read, %.0f frames written\n",
		rep.Sockets, rep.SocketFrames, rep.MinFrameGapMS, rep.FrameBunchMS, rep.AdmittedPush.P50MS, rep.AdmittedPush.P99MS, rep.AdmittedPush.MaxMS,
		rep.PlacePushP50MS, rep.PlacePushP99MS, rep.Moves, rep.Frames)
	fmt.Fprintf(w, "bots: %v → %v\n", rep.BotTries, rep.BotAnswers)
	fmt.Fprintf(w, "room at the end: %v; closed told to %d of %d sampled still waiting (%d admitted before the close); %.0f s in all\n",
		rep.Queue, rep.ClosedSeen, rep.ClosedSampled, rep.ClosedAdmitted, rep.ElapsedS)
	for _, c := range rep.Checks {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "  %s %s: %s\n", mark, c.Name, c.Detail)
	}
}

// roomSocket is one shopper's socket, keeping its queue frames.
type roomSocket struct {
	conn   *websocket.Conn
	mu     sync.Mutex
	frames []roomFrame
}

type roomFrame struct {
	at time.Time
	q  roomQueue
}

func readRoomSocket(conn *websocket.Conn) *roomSocket {
	s := &roomSocket{conn: conn}
	go func() {
		for {
			_, msg, err := conn.ReadMessage()
			if err != nil {
				return
			}
			at := time.Now()
			var f struct {
				Type  string    `json:"type"`
				Queue roomQueue `json:"queue"`
			}
			if json.Unmarshal(msg, &f) == nil && f.Type == waitroom.FrameQueue {
				s.mu.Lock()
				s.frames = append(s.frames, roomFrame{at, f.Queue})
				s.mu.Unlock()
			}
		}
	}()
	return s
}

// metricsText is a Prometheus text exposition, as scraped.
type metricsText []string

func scrapeMetrics(ctx context.Context, c *http.Client, base string) (metricsText, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var lines metricsText
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if l := sc.Text(); !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return lines, sc.Err()
}

// sum adds the samples of name whose labels contain label.
func (m metricsText) sum(name, label string) float64 {
	var total float64
	for _, l := range m {
		if !strings.HasPrefix(l, name) || !strings.Contains(l, label) {
			continue
		}
		rest := l[len(name):]
		if rest != "" && rest[0] != ' ' && rest[0] != '{' {
			continue
		}
		f := strings.Fields(l)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			total += v
		}
	}
	return total
}

// quantile estimates q of histogram name (labels containing label) from its
// buckets: the upper bound of the first bucket holding q of the count.
func (m metricsText) quantile(name, label string, q float64) float64 {
	type bucket struct{ le, n float64 }
	var bs []bucket
	for _, l := range m {
		if !strings.HasPrefix(l, name+"_bucket{") || !strings.Contains(l, label) {
			continue
		}
		i := strings.Index(l, `le="`)
		j := strings.Index(l[i+4:], `"`)
		le, err := strconv.ParseFloat(l[i+4:i+4+j], 64)
		if err != nil {
			le = math.Inf(1)
		}
		f := strings.Fields(l)
		n, _ := strconv.ParseFloat(f[len(f)-1], 64)
		bs = append(bs, bucket{le, n})
	}
	if len(bs) == 0 || bs[len(bs)-1].n == 0 {
		return 0
	}
	total := bs[len(bs)-1].n
	for _, b := range bs {
		if b.n >= q*total {
			return b.le
		}
	}
	return math.Inf(1)
}
