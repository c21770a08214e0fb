package loadtest

// The waiting-room run's ending: the checks of what must hold, the report,
// and the readers it uses (the sockets' queue frames, the gateway's
// metrics). RunRoom in room.go drives the run.

import (
	"bufio"
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
	"time"

	"github.com/fasthttp/websocket"

	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/pause"
	"github.com/flashsale/seckill/seckill/waitroom"
)

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
	detail := fmt.Sprintf("%d of %d sampled told sold_out or closed within %v", rep.ClosedSeen, rep.ClosedSampled, closeWait)
	if rep.ClosedUnread > 0 {
		detail += fmt.Sprintf(", %d could not be read", rep.ClosedUnread)
	}
	if !rep.Closed {
		detail += "; nobody was told sold_out or closed during the run: did the stock sell out within -duration?"
	}
	add("everyone left waiting is told sold_out or closed", rep.ClosedSeen == rep.ClosedSampled, detail)
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
		_ = pause.For(ctx, 200*time.Millisecond)
	}
	_ = api.do(ctx, "stats", http.MethodGet, "/api/v1/admin/vouchers/"+url.PathEscape(vid)+"/stats", api.adminAuth(), nil, &q)
	rep.Queue = q.Queue
	sold := st.Created + st.Paid
	// A buy whose every try went unanswered (the client's timeout) may have
	// its order all the same: it is the one kind of order without a 202.
	unanswered := rep.BuyRefused["error"]
	add("every 202 persisted", st.Reserved == 0 && sold >= int64(len(orders)) && sold <= int64(len(orders))+unanswered,
		fmt.Sprintf("%d accepted, %d created or paid (at most %d more from buys never answered), %d still reserved", len(orders), sold, unanswered, st.Reserved))
	add("no oversell", sold <= st.StockTotal && st.StockLeft+sold == st.StockTotal,
		fmt.Sprintf("total %d = left %d + sold %d", st.StockTotal, st.StockLeft, sold))
	// A pass is spent by a buy that got an order, or by a final refusal
	// after the claim (sold out in Redis, the limit); a refusal before it
	// (the catalog's sold out) or one that is not the shopper's keeps it.
	spent := rep.BuyRefused["sold_out"] + rep.BuyRefused["limit_exceeded"] + rep.BuyRefused["ended"]
	used := rep.Queue["passes_used"]
	add("passes used: one per order, at most one per final refusal", used >= int64(len(orders)) && used <= int64(len(orders))+spent+unanswered,
		fmt.Sprintf("passes_used %d, orders %d, sold_out/limit/ended %d, never answered %d", used, len(orders), spent, unanswered))
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
	fmt.Fprintf(w, "push: %d sockets got %d queue frames, %d of them were told their shopper was admitted (shortest gap %.0f ms as they arrived, runs at most %.0f ms sooner than one a second); pass pushed p50 %.0f ms p99 %.0f ms max %.0f ms after the admission step; place updates p50 %.0f ms p99 %.0f ms (server: age of the latest line move a frame tells, when it is handed to the socket); gateway: %.0f line moves read, %.0f frames written\n",
		rep.Sockets, rep.SocketFrames, rep.SocketsAdmitted, rep.MinFrameGapMS, rep.FrameBunchMS, rep.AdmittedPush.P50MS, rep.AdmittedPush.P99MS, rep.AdmittedPush.MaxMS,
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

// roomSocket is one shopper's socket, keeping its queue frames. news
// receives the first frame that tells the wait is over (admitted with the
// pass, closed, expired): the watcher acts on it, as the page does.
type roomSocket struct {
	conn   *websocket.Conn
	news   chan roomQueue
	mu     sync.Mutex
	frames []roomFrame
}

type roomFrame struct {
	at time.Time
	q  roomQueue
}

func readRoomSocket(conn *websocket.Conn) *roomSocket {
	s := &roomSocket{conn: conn, news: make(chan roomQueue, 1)}
	go func() {
		for {
			_, msg, err := conn.ReadMessage()
			if err != nil {
				return
			}
			at := time.Now()
			var f api.Frame
			if json.Unmarshal(msg, &f) == nil && f.Type == api.FrameQueue && f.Queue != nil {
				s.mu.Lock()
				s.frames = append(s.frames, roomFrame{at, *f.Queue})
				s.mu.Unlock()
				if q := *f.Queue; (waitroom.State(q.State) == waitroom.StateAdmitted && q.Pass != nil) || lineOver(waitroom.State(q.State)) || waitroom.State(q.State) == waitroom.StateExpired {
					select {
					case s.news <- q:
					default: // told already
					}
				}
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
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/metrics: %s", base, resp.Status)
	}
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
