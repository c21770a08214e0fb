package loadtest

// The real crowd, RunCrowd's phases in order. The sale is the long part:
// its sockets, honest shoppers, bots and visitors run side by side and share
// its counters, so it stays one function rather than passing them around.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ErrCrowd is RunCrowd's error when the system answered 5xx or oversold.
var ErrCrowd = errors.New("loadtest: crowd")

// RunCrowd runs the real crowd against cfg.BaseURL, in phases:
//
//  1. The catalog: GET /healthz, GET /api/v1/vouchers and GET
//     /api/v1/vouchers/{id}, cfg.CatalogReads/2 each, in turn in five
//     rounds on the same cfg.Concurrency connections (each a page with its
//     own address that revalidates with If-None-Match), with PostgreSQL's
//     transactions counted at rest and around the catalog reads.
//  2. The sale: cfg.Sockets open sockets, a voucher of cfg.Stock opening
//     cfg.OpenIn later, cfg.Buyers honest shoppers buying once at random
//     moments of cfg.CrowdFor, cfg.Bots bots buying as fast as they can, and
//     cfg.Visitors pages reading the catalog, with PostgreSQL's transactions
//     counted around it.
//
// The report goes to stdout (a table, or JSON with cfg.JSON); notes to
// stderr. The error wraps ErrCrowd when a 5xx came or the sale oversold,
// another error when the run could not be made.
func RunCrowd(ctx context.Context, cfg Config, stdout, stderr io.Writer) (CrowdReport, error) {
	if err := cfg.Validate(); err != nil {
		return CrowdReport{}, err
	}
	r := newRunner(cfg, stderr)
	defer r.transport.CloseIdleConnections()
	c := &crowdRun{runner: r, src: newSourceAddrs(cfg.BaseURL, !cfg.OneAddress)}
	rep, err := c.run(ctx)
	if rep.Healthz.Requests == 0 {
		return rep, err
	}
	var outErr error
	if cfg.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		outErr = enc.Encode(rep)
	} else {
		outErr = WriteCrowdText(stdout, rep)
	}
	if err == nil {
		var problems []string
		if rep.FiveXX > 0 {
			problems = append(problems, fmt.Sprintf("%d answers were 5xx", rep.FiveXX))
		}
		if rep.Sale.AcceptedUnits > rep.Sale.Stock {
			problems = append(problems, fmt.Sprintf("%d units accepted of a stock of %d", rep.Sale.AcceptedUnits, rep.Sale.Stock))
		}
		if len(problems) > 0 {
			err = fmt.Errorf("%w: %s", ErrCrowd, strings.Join(problems, "; "))
		}
	}
	return rep, errors.Join(err, outErr)
}

// crowdRun is the state of one RunCrowd.
type crowdRun struct {
	*runner
	src *sourceAddrs
	pg  *xactCounter
	// buyFiveXX counts the sale's 5xx answers to buys, retried ones too.
	buyFiveXX int
}

func (c *crowdRun) run(ctx context.Context) (CrowdReport, error) {
	cfg := c.cfg
	rep := CrowdReport{BaseURL: c.api.base, Seed: c.seed, SourceAddresses: c.src.on}
	offset, clock, err := syncClock(ctx, c.client, c.api.base)
	if err != nil {
		return rep, fmt.Errorf("loadtest: %w", err)
	}
	c.offset, c.clockMethod, rep.Clock = offset, clock.Method, clock

	ids, err := c.fillCatalog(ctx)
	if err != nil {
		return rep, fmt.Errorf("loadtest: %w", err)
	}
	rep.CatalogVouchers = len(ids)

	rep.Postgres.SettleMS = ms(cfg.PGSettle)
	if url, source, err := databaseURL(cfg.DatabaseURL, cfg.DataDir); err != nil {
		rep.Postgres.Error = err.Error()
	} else {
		rep.Postgres.Source = source
		c.pg = &xactCounter{url: url}
	}

	// Phase 1: the catalog beside /healthz, on the same pages.
	pages := make([]*visitor, cfg.Concurrency)
	for i := range pages {
		pages[i] = newVisitor(c.src, cfg.Timeout, cfg.FreshShare, c.rng.Uint64())
	}
	defer closeVisitors(pages)
	half := cfg.CatalogReads / 2
	listURL := c.api.base + "/api/v1/vouchers"
	healthURL := c.api.base + "/healthz"
	single := func(i int) string { return listURL + "/" + url.PathEscape(ids[i%len(ids)]) }

	c.note("PostgreSQL at rest for %s", cfg.PGSettle)
	restStart := time.Now()
	rep.Postgres.AtRest = c.window(ctx, &rep.Postgres, func() {})
	rep.Postgres.AtRestMS = ms(time.Since(restStart))
	rep.Postgres.CatalogReads = 2 * half
	catalogStart := time.Now()
	rep.Postgres.CatalogXacts = c.window(ctx, &rep.Postgres, func() {
		// Five rounds of the three routes in turn: a machine whose load
		// drifts (other work, a timer) weighs on each alike.
		const rounds = 5
		c.note("GET /healthz, GET /api/v1/vouchers and GET /api/v1/vouchers/{id} (%d vouchers) ×%d each on %d connections, in %d rounds",
			len(ids), half, cfg.Concurrency, rounds)
		var health, list, one pathLoad
		for r := range rounds {
			n := half / rounds
			if r == rounds-1 {
				n = half - n*(rounds-1)
			}
			loadPath(ctx, &health, pages, n, func(int) string { return healthURL }, nil, r == 0)
			loadPath(ctx, &list, pages, n, func(int) string { return listURL }, nil, r == 0)
			loadPath(ctx, &one, pages, n, single, nil, r == 0)
		}
		rep.Healthz, rep.List, rep.Single = health.result(), list.result(), one.result()
		rep.Healthz.Path, rep.List.Path, rep.Single.Path = "/healthz", "/api/v1/vouchers", "/api/v1/vouchers/{id}"
	})
	rep.Postgres.CatalogWindowMS = ms(time.Since(catalogStart))
	if p := &rep.Postgres; p.CatalogXacts >= 0 {
		p.CatalogShare = float64(p.CatalogXacts) / float64(p.CatalogReads)
		if p.AtRest >= 0 && p.AtRestMS > 0 {
			p.CatalogBackground = float64(p.AtRest) * p.CatalogWindowMS / p.AtRestMS
		}
	}
	if h := rep.Healthz.ServedPerSecond; h > 0 {
		rep.ListShare = rep.List.ServedPerSecond / h
		rep.SingleShare = rep.Single.ServedPerSecond / h
	}
	if ctx.Err() != nil {
		return rep, ctx.Err()
	}

	// Phase 2: the sale.
	var saleErr error
	rep.Postgres.SaleXacts = c.window(ctx, &rep.Postgres, func() {
		saleErr = c.sale(ctx, &rep, ids)
	})
	if rep.Postgres.SaleXacts >= 0 {
		rep.Postgres.SaleXactsPerSecond = float64(rep.Postgres.SaleXacts) / cfg.CrowdFor.Seconds()
	}
	rep.FiveXX = rep.Healthz.FiveXX + rep.List.FiveXX + rep.Single.FiveXX + rep.Visitors.FiveXX + c.buyFiveXX
	rep.Notes = crowdNotes(rep)
	return rep, saleErr
}

// window counts PostgreSQL's transactions around work: counter, work, wait
// PGSettle, counter. It returns −1 when they could not be read (the reason
// goes to pg.Error once).
func (c *crowdRun) window(ctx context.Context, pg *PostgresReport, work func()) int64 {
	var before int64
	var err error
	if c.pg != nil {
		before, err = c.pg.read(ctx)
	}
	work()
	if c.pg == nil || err != nil {
		if err != nil && pg.Error == "" {
			pg.Error = err.Error()
		}
		return -1
	}
	t := time.NewTimer(c.cfg.PGSettle)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
		return -1
	}
	after, err := c.pg.read(ctx)
	if err != nil {
		if pg.Error == "" {
			pg.Error = err.Error()
		}
		return -1
	}
	return max(0, after-before-1) // the first read's own transaction
}

// fillCatalog creates on-sale vouchers until the list holds CatalogSize,
// and returns the listed ids.
func (c *crowdRun) fillCatalog(ctx context.Context) ([]string, error) {
	var list []apiVoucher
	if err := c.api.do(ctx, "list vouchers", http.MethodGet, "/api/v1/vouchers", "", nil, &list); err != nil {
		return nil, err
	}
	if missing := c.cfg.CatalogSize - len(list); missing > 0 {
		c.note("creating %d vouchers so the catalog lists %d", missing, c.cfg.CatalogSize)
		now := time.Now().Add(c.offset).UTC().Truncate(time.Second)
		for i := range missing {
			if _, err := c.api.createVoucher(ctx, newVoucher{
				Title: fmt.Sprintf("crowd catalog voucher %d", len(list)+i+1), Kind: "common", PriceCents: 500,
				Stock: 1000, PerUserLimit: 2, BeginAt: now.Add(-time.Minute), EndAt: now.Add(30 * 24 * time.Hour),
			}); err != nil {
				return nil, err
			}
		}
		// Their transactions reach pg_stat_database within PGSettle: wait,
		// so that they do not count as the system's at rest.
		c.note("waiting %s for PostgreSQL to publish those", c.cfg.PGSettle)
		select {
		case <-time.After(c.cfg.PGSettle):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		list = nil
		if err := c.api.do(ctx, "list vouchers", http.MethodGet, "/api/v1/vouchers", "", nil, &list); err != nil {
			return nil, err
		}
	}
	if len(list) == 0 {
		return nil, errors.New("the catalog lists no voucher, even after creating some")
	}
	ids := make([]string, len(list))
	for i, v := range list {
		ids[i] = v.ID
	}
	return ids, nil
}

func closeVisitors(vs []*visitor) {
	for _, v := range vs {
		v.client.CloseIdleConnections()
	}
}

// buy is one answered (or failed) buy of the sale.
type buy struct {
	at      time.Time // when the answer came
	latency time.Duration
	outcome Outcome
	status  int
	detail  string
	qty     int64
}

// sale runs phase 2 into rep.
func (c *crowdRun) sale(ctx context.Context, rep *CrowdReport, catalogIDs []string) error {
	cfg := c.cfg
	s := &rep.Sale
	s.Stock, s.PerUserLimit, s.Buyers, s.Bots, s.BotConns = cfg.Stock, cfg.PerUserLimit, cfg.Buyers, cfg.Bots, cfg.BotConns
	s.CrowdForMS = ms(cfg.CrowdFor)
	tokenExp := time.Now().Add(cfg.CrowdFor + cfg.OpenIn + time.Hour)
	visitorToken := func(i int) (string, error) {
		return mintToken(c.api.secret, cfg.FirstUserID+int64(cfg.Buyers+cfg.Bots+i), tokenExp)
	}

	c.note("opening %d sockets", cfg.Sockets)
	socks := openSockets(ctx, c.api.base, cfg.Sockets, c.src, visitorToken)
	rep.Sockets.Asked, rep.Sockets.Open, rep.Sockets.WithTokens = cfg.Sockets, len(socks.list), socks.withAuth
	if len(socks.refused) > 0 {
		rep.Sockets.Refused = socks.refused
	}
	// The readers append to each socket's list until it is closed; the
	// lists are read only after.
	closeSockets := sync.OnceFunc(func() {
		rep.Sockets.ClosedByServer = socks.close()
		rep.Sockets.Messages, rep.Sockets.VoucherMessages = socks.messages.Load(), socks.vouchers.Load()
	})
	defer closeSockets()

	begin := wholeSecondUp(time.Now().Add(c.offset).Add(cfg.OpenIn).UTC())
	v, err := c.api.createVoucher(ctx, newVoucher{
		Title: "crowd " + begin.Format(time.RFC3339), Kind: cfg.Kind, PriceCents: cfg.PriceCents,
		Stock: cfg.Stock, PerUserLimit: cfg.PerUserLimit, BeginAt: begin, EndAt: begin.Add(cfg.CrowdFor + 10*time.Minute),
	})
	if err != nil {
		return fmt.Errorf("loadtest: %w", err)
	}
	s.VoucherID = v.ID
	ids := append([]string{v.ID}, catalogIDs...)
	buyURL := c.api.base + "/api/v1/vouchers/" + url.PathEscape(v.ID) + "/orders"

	// Everyone is ready before the opening: tokens minted, moments drawn.
	type shopperPlan struct {
		auth string
		at   time.Duration // after the opening
	}
	honest := make([]shopperPlan, cfg.Buyers)
	for i := range honest {
		tok, err := mintToken(c.api.secret, cfg.FirstUserID+int64(i), tokenExp)
		if err != nil {
			return err
		}
		honest[i] = shopperPlan{auth: "Bearer " + tok, at: time.Duration(c.rng.Float64() * float64(cfg.CrowdFor))}
	}
	botAuth := make([]string, cfg.Bots)
	for i := range botAuth {
		tok, err := mintToken(c.api.secret, cfg.FirstUserID+int64(cfg.Buyers+i), tokenExp)
		if err != nil {
			return err
		}
		botAuth[i] = "Bearer " + tok
	}
	c.note("voucher %s (stock %d, limit %d) opens %s by the server clock; %d honest shoppers, %d bots × %d connections, %d pages reading the catalog, %d sockets open",
		v.ID, cfg.Stock, cfg.PerUserLimit, begin.Format(time.RFC3339), cfg.Buyers, cfg.Bots, cfg.BotConns, cfg.Visitors, len(socks.list))

	openWall := begin.Add(-c.offset)
	if d := time.Until(openWall); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	opened := time.Now()
	stopAt := opened.Add(cfg.CrowdFor)
	stop := make(chan struct{})
	time.AfterFunc(cfg.CrowdFor, func() { close(stop) })

	var (
		mu        sync.Mutex
		honestRes = make([]buy, cfg.Buyers)
		retries   atomic.Int64
		botRes    []buy
		fiveXX    atomic.Int64
		wg        sync.WaitGroup
	)
	// The pages that keep reading the catalog during the sale.
	pageSeed := c.rng.Uint64()
	wg.Go(func() {
		if cfg.Visitors == 0 {
			return
		}
		pages := make([]*visitor, cfg.Visitors)
		for i := range pages {
			pages[i] = newVisitor(c.src, cfg.Timeout, cfg.FreshShare, pageSeed+uint64(i))
		}
		defer closeVisitors(pages)
		var during pathLoad
		loadPath(ctx, &during, pages, 0, func(i int) string {
			if i%2 == 0 {
				return c.api.base + "/api/v1/vouchers"
			}
			return c.api.base + "/api/v1/vouchers/" + url.PathEscape(ids[i/2%len(ids)])
		}, stop, true)
		rep.Visitors = during.result()
		rep.Visitors.Path = "catalog during the sale"
	})
	for i, p := range honest {
		wg.Go(func() {
			client := clientFrom(c.src.take(), 1, cfg.Timeout)
			defer client.CloseIdleConnections()
			t := time.NewTimer(time.Until(opened.Add(p.at)))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
			key := fmt.Sprintf("crowd-%s-%d", v.ID, i)
			var b buy
			for try := 0; ; try++ {
				b = c.sendBuy(ctx, client, buyURL, p.auth, key)
				if b.status >= 500 {
					fiveXX.Add(1)
				}
				retriable := b.status >= 500 || (b.status == 0 && b.outcome == OutcomeError)
				if !retriable || try == 3 || ctx.Err() != nil {
					break
				}
				retries.Add(1)
				time.Sleep(time.Duration(50<<try) * time.Millisecond)
			}
			honestRes[i] = b
		})
	}
	for _, auth := range botAuth {
		client := clientFrom(c.src.take(), cfg.BotConns, cfg.Timeout)
		for range cfg.BotConns {
			wg.Go(func() {
				var mine []buy
				// Until the crowd ends, but at least once, however late
				// this connection got going.
				for first := true; ctx.Err() == nil && (first || time.Now().Before(stopAt)); first = false {
					b := c.sendBuy(ctx, client, buyURL, auth, "")
					if b.status >= 500 {
						fiveXX.Add(1)
					}
					mine = append(mine, b)
				}
				mu.Lock()
				botRes = append(botRes, mine...)
				mu.Unlock()
			})
		}
		defer client.CloseIdleConnections()
	}
	wg.Wait()
	c.buyFiveXX = int(fiveXX.Load())

	// Tally the buyers.
	s.Honest, s.Bot = map[Outcome]int{}, map[Outcome]int{}
	s.HonestRetries = int(retries.Load())
	var sales []buy
	var honestLat []time.Duration
	for _, b := range honestRes {
		s.Honest[b.outcome]++
		if b.outcome == OutcomeError {
			if s.HonestErrors == nil {
				s.HonestErrors = map[string]int{}
			}
			s.HonestErrors[b.detail]++
		}
		if b.status != 0 && b.status != http.StatusTooManyRequests {
			s.HonestNot429++
		}
		if b.outcome == OutcomeAccepted {
			sales = append(sales, b)
		}
		if b.status != 0 {
			honestLat = append(honestLat, b.latency)
		}
	}
	s.HonestShare = float64(s.HonestNot429) / float64(cfg.Buyers)
	s.HonestLatency = latencyStats(honestLat)
	s.BotSent = len(botRes)
	for _, b := range botRes {
		s.Bot[b.outcome]++
		if b.outcome == OutcomeAccepted {
			sales = append(sales, b)
		}
	}
	s.BotPerSecond = float64(len(botRes)) / cfg.CrowdFor.Seconds()
	slices.SortFunc(sales, func(a, b buy) int { return a.at.Compare(b.at) })
	solds := make([]sold, len(sales))
	var units int64
	var soldOutAt time.Time
	for i, b := range sales {
		units += b.qty
		solds[i] = sold{at: b.at, units: units}
		if units >= cfg.Stock && soldOutAt.IsZero() {
			soldOutAt = b.at
		}
	}
	s.AcceptedUnits = units
	if !soldOutAt.IsZero() {
		after := ms(soldOutAt.Sub(opened))
		s.SoldOutAfterMS = &after
	}

	// Give the pushes time to land, then close the pages.
	awaitPushes(ctx, socks, 3*time.Second)
	closeSockets()
	for _, so := range socks.list {
		for _, m := range so.seen {
			if m.voucherID == v.ID {
				rep.Sockets.SaleMessages++
			}
		}
	}
	delays, missed := pushDelays(socks.list, v.ID, cfg.Stock, solds)
	rep.Sockets.PushDelay, rep.Sockets.PushMissed = latencyStats(delays), missed
	if !soldOutAt.IsZero() {
		d, seen := sellOutDelays(socks.list, v.ID, soldOutAt)
		rep.Sockets.SellOut = &SellOutReport{AfterMS: *s.SoldOutAfterMS, Seen: seen, Delay: latencyStats(d)}
	}
	return nil
}

// awaitPushes waits, after the last buy was answered, until the sockets
// have had no voucher message for a second (pushes are throttled to a few a
// second per voucher, so the last one is in by then), for at most within.
func awaitPushes(ctx context.Context, socks *sockets, within time.Duration) {
	deadline := time.Now().Add(within)
	last := socks.vouchers.Load()
	quietSince := time.Now()
	for time.Now().Before(deadline) && ctx.Err() == nil && time.Since(quietSince) < time.Second {
		time.Sleep(100 * time.Millisecond)
		if n := socks.vouchers.Load(); n != last {
			last, quietSince = n, time.Now()
		}
	}
}

// sendBuy sends one buy of 1 unit and classifies the answer.
func (c *crowdRun) sendBuy(ctx context.Context, client *http.Client, buyURL, auth, key string) buy {
	b := buy{qty: 1}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, buyURL, bytes.NewReader([]byte(`{"quantity":1}`)))
	if err != nil {
		b.outcome, b.detail = OutcomeError, err.Error()
		return b
	}
	req.Header.Set("Authorization", auth)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	t0 := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		b.at, b.latency = time.Now(), time.Since(t0)
		b.outcome, b.detail = OutcomeError, shortError(err)
		return b
	}
	body, rerr := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	b.at, b.latency, b.status = time.Now(), time.Since(t0), resp.StatusCode
	if rerr != nil {
		b.outcome, b.detail, b.status = OutcomeError, shortError(rerr), 0
		return b
	}
	b.outcome, _, b.detail = classify(resp.StatusCode, body)
	return b
}
