// Package beacon reads a drand randomness beacon over its HTTP API and
// verifies every round it hands out against the chain's public key, with
// drand's own library: a relay (or a network in between) is never trusted.
//
// A draw (seckill/draw) commits to a future round when its voucher is made
// and takes its outcome from that round's randomness, SHA-256 of the
// round's signature, which nobody can know before the network signs it.
package beacon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/drand/drand/v2/common"
	"github.com/drand/drand/v2/common/chain"
	"github.com/drand/drand/v2/crypto"

	"github.com/flashsale/seckill/seckill/apperr"
)

// QuicknetChainHash is the public League of Entropy chain a production
// fleet follows unless configured otherwise (cmd/seckill/CONFIG.md,
// SECKILL_DRAND_CHAIN_HASH): 3 s rounds, unchained BLS signatures on G1.
const QuicknetChainHash = "52db9ba70e0cc0f6eaf7803dd07447a1f5477735fd3f661792ba94600c84e971"

// Network is the name of the beacon network kind in a voucher's draw.
const Network = "drand"

// ErrNotYet is the answer for a round the network has not signed yet.
var ErrNotYet = errors.New("beacon: the round is not out yet")

// Chain is what a draw needs of a drand chain: its hash, its clock, and the
// key and scheme that verify its rounds.
type Chain struct {
	// Hash is the chain's hash, hex.
	Hash string
	// Genesis is the time of round 1; Period the time between rounds.
	Genesis time.Time
	Period  time.Duration

	info   *chain.Info
	scheme *crypto.Scheme
}

// RoundAt is the first round whose time is after t (strictly: the round is
// signed only once t has passed), and that round's time.
func (c Chain) RoundAt(t time.Time) (uint64, time.Time) {
	if t.Before(c.Genesis) {
		return 1, c.Genesis
	}
	n := uint64(t.Sub(c.Genesis)/c.Period) + 2
	return n, c.TimeOf(n)
}

// TimeOf is round's time: genesis + (round-1) x period.
func (c Chain) TimeOf(round uint64) time.Time {
	if round == 0 {
		return c.Genesis
	}
	return c.Genesis.Add(time.Duration(round-1) * c.Period)
}

// Round is one verified round of a chain.
type Round struct {
	Number    uint64
	Signature []byte
}

// Randomness is the round's randomness as drand defines it: SHA-256 of the
// signature bytes.
func (r Round) Randomness() [sha256.Size]byte { return sha256.Sum256(r.Signature) }

// Verify checks sig as chain c's signature of round, with drand's library.
func (c Chain) Verify(round uint64, sig []byte) error {
	b := &common.Beacon{Round: round, Signature: sig}
	if err := c.scheme.VerifyBeacon(b, c.info.PublicKey); err != nil {
		return fmt.Errorf("beacon: round %d of chain %s: the signature does not verify: %w", round, c.Hash, err)
	}
	return nil
}

// Client reads one chain from any of its HTTP endpoints (drand nodes or
// relays), trying them in order. It is safe for concurrent use; the
// chain's info is read once.
type Client struct {
	urls      []string
	chainHash string
	http      *http.Client

	mu    sync.Mutex
	chain *Chain
}

// Config is what New builds a Client from.
type Config struct {
	// URLs are the HTTP API bases, e.g. https://api.drand.sh.
	URLs []string
	// ChainHash is the chain to follow; every endpoint's info must hash to
	// it. Empty takes the first endpoint's word for it (dev mode's own
	// network only).
	ChainHash string
	// HTTP is the client to use (a 5 s timeout when nil).
	HTTP *http.Client
}

// New returns a client of cfg's chain.
func New(cfg Config) *Client {
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{Timeout: 5 * time.Second}
	}
	urls := make([]string, 0, len(cfg.URLs))
	for _, u := range cfg.URLs {
		if u = strings.TrimRight(strings.TrimSpace(u), "/"); u != "" {
			urls = append(urls, u)
		}
	}
	return &Client{urls: urls, chainHash: strings.ToLower(cfg.ChainHash), http: cfg.HTTP}
}

// Chain reads the chain's info (once) and checks that it hashes to the
// configured chain hash.
func (c *Client) Chain(ctx context.Context) (Chain, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.chain != nil {
		return *c.chain, nil
	}
	var errs []error
	for _, u := range c.urls {
		ch, err := c.readChain(ctx, u)
		if err == nil {
			c.chain = &ch
			return ch, nil
		}
		errs = append(errs, err)
	}
	return Chain{}, unavailable("read the chain's info", errors.Join(append(errs, errors.New("no endpoint answered"))...))
}

func (c *Client) readChain(ctx context.Context, base string) (Chain, error) {
	var body []byte
	var err error
	if c.chainHash != "" {
		body, err = c.get(ctx, base+"/"+c.chainHash+"/info")
	}
	if c.chainHash == "" || err != nil {
		if body, err = c.get(ctx, base+"/info"); err != nil {
			return Chain{}, err
		}
	}
	info := new(chain.Info)
	if err := json.Unmarshal(body, info); err != nil {
		return Chain{}, fmt.Errorf("beacon: %s/info: %w", base, err)
	}
	hash := info.HashString()
	if c.chainHash != "" && hash != c.chainHash {
		return Chain{}, fmt.Errorf("beacon: %s serves chain %s, not %s", base, hash, c.chainHash)
	}
	sch, err := crypto.SchemeFromName(info.Scheme)
	if err != nil {
		return Chain{}, fmt.Errorf("beacon: %s: %w", base, err)
	}
	if info.Period <= 0 {
		return Chain{}, fmt.Errorf("beacon: %s: chain %s has no period", base, hash)
	}
	return Chain{Hash: hash, Genesis: time.Unix(info.GenesisTime, 0).UTC(), Period: info.Period, info: info, scheme: sch}, nil
}

// Round fetches round n and verifies its signature: ErrNotYet before the
// round's time or while no endpoint has it yet.
func (c *Client) Round(ctx context.Context, n uint64) (Round, error) {
	ch, err := c.Chain(ctx)
	if err != nil {
		return Round{}, err
	}
	if time.Now().Before(ch.TimeOf(n)) {
		return Round{}, ErrNotYet
	}
	var errs []error
	for _, u := range c.urls {
		r, err := c.readRound(ctx, ch, u, n)
		if err == nil {
			return r, nil
		}
		errs = append(errs, err)
	}
	if all404(errs) {
		return Round{}, ErrNotYet
	}
	return Round{}, unavailable("read round "+strconv.FormatUint(n, 10), errors.Join(errs...))
}

func (c *Client) readRound(ctx context.Context, ch Chain, base string, n uint64) (Round, error) {
	path := "/public/" + strconv.FormatUint(n, 10)
	body, err := c.get(ctx, base+"/"+ch.Hash+path)
	if err != nil {
		if body, err = c.get(ctx, base+path); err != nil {
			return Round{}, err
		}
	}
	var r struct {
		Round     uint64 `json:"round"`
		Signature string `json:"signature"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return Round{}, fmt.Errorf("beacon: %s%s: %w", base, path, err)
	}
	if r.Round != n {
		return Round{}, fmt.Errorf("beacon: %s%s answered round %d", base, path, r.Round)
	}
	sig, err := hex.DecodeString(r.Signature)
	if err != nil {
		return Round{}, fmt.Errorf("beacon: %s%s: signature: %w", base, path, err)
	}
	if err := ch.Verify(n, sig); err != nil {
		return Round{}, err
	}
	return Round{Number: n, Signature: sig}, nil
}

// statusError is an endpoint's answer other than 200.
type statusError struct {
	url  string
	code int
}

func (e *statusError) Error() string { return fmt.Sprintf("beacon: GET %s: HTTP %d", e.url, e.code) }

func all404(errs []error) bool {
	for _, err := range errs {
		var se *statusError
		if !errors.As(err, &se) || se.code != http.StatusNotFound {
			return false
		}
	}
	return len(errs) > 0
}

func (c *Client) get(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("beacon: %w", err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("beacon: GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("beacon: GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &statusError{url: url, code: resp.StatusCode}
	}
	return b, nil
}

func unavailable(what string, err error) error {
	return fmt.Errorf("beacon: %s: %w: %w", what, apperr.ErrUnavailable, err)
}
