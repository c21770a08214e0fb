package loadtest

// What the real crowd (RunCrowd) reports, and the notes that say plainly
// what the server did not do.

import "strconv"

// CrowdReport is what the real crowd measured (RunCrowd).
type CrowdReport struct {
	BaseURL string    `json:"base_url"`
	Seed    int64     `json:"seed"`
	Clock   ClockSync `json:"clock"`
	// SourceAddresses says each client had a loopback address of its own.
	SourceAddresses bool `json:"source_addresses"`
	// CatalogVouchers is how many vouchers the list held when read.
	CatalogVouchers int `json:"catalog_vouchers"`

	// The catalog phase: the same connections load /healthz, the list and
	// single vouchers in turn, in five rounds.
	Healthz PathRun `json:"healthz"`
	List    PathRun `json:"list"`
	Single  PathRun `json:"single"`
	// ListShare and SingleShare are served answers a second over /healthz's.
	ListShare   float64 `json:"list_share"`
	SingleShare float64 `json:"single_share"`

	Postgres PostgresReport `json:"postgres"`
	Sockets  SocketReport   `json:"sockets"`
	Sale     SaleReport     `json:"sale"`
	// Visitors is the catalog reads of the pages during the sale.
	Visitors PathRun `json:"visitors"`

	// FiveXX counts every 5xx answer of the run, retried ones included.
	FiveXX int `json:"five_xx"`
	// Notes say plainly what the server did not do (no ETag, no pushes...).
	Notes []string `json:"notes,omitempty"`
}

// PostgresReport is PostgreSQL's transactions (pg_stat_database's
// xact_commit + xact_rollback of the database) in each window.
type PostgresReport struct {
	// Source says where the database URL came from; Error why nothing was
	// counted.
	Source   string  `json:"source,omitempty"`
	Error    string  `json:"error,omitempty"`
	SettleMS float64 `json:"settle_ms"`
	// AtRest is the transactions of one settle with nothing sent,
	// AtRestMS its length: the system's own timers.
	AtRest   int64   `json:"at_rest"`
	AtRestMS float64 `json:"at_rest_ms"`
	// CatalogWindowMS is the catalog window's length; CatalogBackground is
	// what the at-rest rate predicts in it, part of CatalogXacts.
	CatalogWindowMS   float64 `json:"catalog_window_ms"`
	CatalogBackground float64 `json:"catalog_background"`
	// CatalogXacts is the window of the catalog phase (its reads and one
	// settle), CatalogShare that over CatalogReads.
	CatalogXacts int64   `json:"catalog_xacts"`
	CatalogReads int     `json:"catalog_reads"`
	CatalogShare float64 `json:"catalog_share"`
	// SaleXacts is the window of the sale (sockets, buys, persisting, one
	// settle); SaleXactsPerSecond is that over the crowd's seconds.
	SaleXacts          int64   `json:"sale_xacts"`
	SaleXactsPerSecond float64 `json:"sale_xacts_per_second"`
}

// SocketReport is the open pages' WebSockets.
type SocketReport struct {
	Asked int `json:"asked"`
	Open  int `json:"open"`
	// WithTokens: the server refused anonymous sockets, so the pages
	// opened theirs with visitor tokens.
	WithTokens bool           `json:"with_tokens"`
	Refused    map[string]int `json:"refused,omitempty"`
	// ClosedByServer counts sockets that ended before the tool closed them.
	ClosedByServer  int   `json:"closed_by_server"`
	Messages        int64 `json:"messages"`
	VoucherMessages int64 `json:"voucher_messages"`
	// SaleMessages counts voucher messages about the sale's voucher.
	SaleMessages int `json:"sale_messages"`
	// PushDelay is, over every socket and accepted buy, from the buy's 202
	// to the socket's first message whose stock_left accounts for it;
	// PushMissed counts the pairs whose message never came.
	PushDelay  LatencyStats `json:"push_delay"`
	PushMissed int          `json:"push_missed"`
	// SellOut is from the 202 that took the last unit to each socket's
	// first message with stock_left 0; nil when the sale did not sell out.
	SellOut *SellOutReport `json:"sell_out,omitempty"`
}

// SellOutReport is how the sell-out reached the sockets.
type SellOutReport struct {
	// AfterMS is when the last unit's 202 came, since the opening.
	AfterMS float64      `json:"after_ms"`
	Seen    int          `json:"seen"`
	Delay   LatencyStats `json:"delay"`
}

// SaleReport is the buyers of the crowd.
type SaleReport struct {
	VoucherID    string  `json:"voucher_id"`
	Stock        int64   `json:"stock"`
	PerUserLimit int64   `json:"per_user_limit"`
	Buyers       int     `json:"buyers"`
	Bots         int     `json:"bots"`
	BotConns     int     `json:"bot_conns"`
	CrowdForMS   float64 `json:"crowd_for_ms"`
	// Honest is each honest shopper's last answer (after retrying 5xx and
	// transport failures with the same Idempotency-Key).
	Honest        map[Outcome]int `json:"honest"`
	HonestErrors  map[string]int  `json:"honest_errors,omitempty"`
	HonestRetries int             `json:"honest_retries"`
	// HonestNot429 counts honest shoppers answered with anything but 429
	// (a transport failure is no answer); HonestShare is that over Buyers.
	HonestNot429  int             `json:"honest_not_429"`
	HonestShare   float64         `json:"honest_share"`
	HonestLatency LatencyStats    `json:"honest_latency"`
	BotSent       int             `json:"bot_sent"`
	Bot           map[Outcome]int `json:"bot"`
	BotPerSecond  float64         `json:"bot_per_second"`
	// AcceptedUnits is what every 202 took; over Stock is an oversell.
	AcceptedUnits  int64    `json:"accepted_units"`
	SoldOutAfterMS *float64 `json:"sold_out_after_ms"`
}

// crowdNotes says plainly what the server did not do.
func crowdNotes(rep CrowdReport) []string {
	var notes []string
	if rep.List.Requests > 0 && rep.List.ETags == 0 {
		notes = append(notes, "the catalog list sent no ETag: every read was a full answer (no 304 possible)")
	}
	if rep.Single.Requests > 0 && rep.Single.ETags == 0 {
		notes = append(notes, "single vouchers sent no ETag: every read was a full answer (no 304 possible)")
	}
	if rep.Sockets.Asked > 0 && rep.Sockets.Open == 0 {
		notes = append(notes, "no socket could be opened")
	}
	if rep.Sockets.WithTokens {
		notes = append(notes, "the server refused anonymous sockets (401): the pages opened theirs with visitor tokens")
	}
	if rep.Sockets.Open > 0 && rep.Sockets.VoucherMessages == 0 {
		notes = append(notes, "no voucher pushes received: the server sends no {\"type\":\"voucher\"} messages, so no push delay")
	} else if rep.Sockets.Open > 0 && rep.Sockets.SaleMessages == 0 {
		notes = append(notes, "no voucher pushes received about the sale's voucher, so no push delay")
	}
	if rep.Postgres.Error != "" {
		notes = append(notes, "PostgreSQL's transactions were not counted: "+rep.Postgres.Error)
	}
	if !rep.SourceAddresses {
		notes = append(notes, "every client shared one address: limits per address see the whole crowd as one client")
	}
	return notes
}

// pct formats a share as a percentage.
func pct(f float64) string { return strconv.FormatFloat(100*f, 'f', 1, 64) + " %" }
