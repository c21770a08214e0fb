// Package thirdparty checks a shop's draw as an outsider would: from what
// the shop publishes over HTTP (the voucher and its draw's entry list) and
// the drand chain's own information, with the standard library and drand's
// library alone. It imports nothing of the shop's code, on purpose: a check
// written with the shop's code would share its mistakes (the systemtest's
// TestThirdPartyChecksADraw keeps it so).
package thirdparty

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/drand/drand/v2/common"
	"github.com/drand/drand/v2/common/chain"
	"github.com/drand/drand/v2/crypto"
)

// Voucher is what the check reads of the shop's voucher JSON.
type Voucher struct {
	ID           string `json:"id"`
	StockTotal   int64  `json:"stock_total"`
	PerUserLimit int64  `json:"per_user_limit"`
	Draw         struct {
		Entries     int64  `json:"entries"`
		Cutoff      string `json:"cutoff"`
		EntriesHash string `json:"entries_hash"`
		Beacon      struct {
			Network   string `json:"network"`
			ChainHash string `json:"chain_hash"`
			Round     uint64 `json:"round"`
			RoundAt   string `json:"round_at"`
			Signature string `json:"signature"`
		} `json:"beacon"`
		Commitments []struct {
			Kind        string          `json:"kind"`
			EntriesHash string          `json:"entries_hash"`
			Beacon      json.RawMessage `json:"beacon"`
		} `json:"commitments"`
	} `json:"draw"`
}

// Result is a checked draw: every ticket, lowest first, and the winners.
type Result struct {
	// Tickets maps each entry id to its ticket, hex.
	Tickets map[string]string
	// Ranked is every entry id, lowest ticket first; the first Winners won.
	Ranked  []string
	Winners int
}

// Check fetches voucher id's draw from shop and the chain's info from
// drandURL, and checks it: the round's signature against the chain's
// public key (and the chain against the voucher's chain hash), the entry
// list against entries_hash, every ticket, the winners (as many as the
// stock covers at the per-user limit) and the cut-off.
func Check(ctx context.Context, client *http.Client, shop, drandURL, id string) (Result, error) {
	var v Voucher
	body, err := get(ctx, client, shop+"/api/v1/vouchers/"+id)
	if err != nil {
		return Result{}, err
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return Result{}, fmt.Errorf("the voucher: %w", err)
	}
	b := v.Draw.Beacon
	if b.Network != "drand" || b.Signature == "" {
		return Result{}, fmt.Errorf("the voucher's draw has no drand round signed: %s", body)
	}

	// The round: signed by the chain the voucher names.
	infoJSON, err := get(ctx, client, drandURL+"/"+b.ChainHash+"/info")
	if err != nil {
		return Result{}, err
	}
	info := new(chain.Info)
	if err := json.Unmarshal(infoJSON, info); err != nil {
		return Result{}, fmt.Errorf("the chain's info: %w", err)
	}
	if info.HashString() != b.ChainHash {
		return Result{}, fmt.Errorf("the chain's info hashes to %s, not to the voucher's %s", info.HashString(), b.ChainHash)
	}
	sch, err := crypto.SchemeFromName(info.Scheme)
	if err != nil {
		return Result{}, err
	}
	sig, err := hex.DecodeString(b.Signature)
	if err != nil {
		return Result{}, fmt.Errorf("the signature: %w", err)
	}
	if err := sch.VerifyBeacon(&common.Beacon{Round: b.Round, Signature: sig}, info.PublicKey); err != nil {
		return Result{}, fmt.Errorf("round %d's signature does not verify: %w", b.Round, err)
	}

	// The entries: those whose hash was committed at begin_at.
	list, err := get(ctx, client, shop+"/api/v1/vouchers/"+id+"/draw/entries")
	if err != nil {
		return Result{}, err
	}
	sum := sha256.Sum256(list)
	if hex.EncodeToString(sum[:]) != v.Draw.EntriesHash {
		return Result{}, fmt.Errorf("the entry list hashes to %x, not to entries_hash %s", sum, v.Draw.EntriesHash)
	}
	committed := false
	for _, c := range v.Draw.Commitments {
		committed = committed || (c.Kind == "entries_hash" && c.EntriesHash == v.Draw.EntriesHash)
	}
	if !committed {
		return Result{}, fmt.Errorf("entries_hash %s is not among the draw's commitments", v.Draw.EntriesHash)
	}
	ids := strings.Split(strings.TrimSuffix(string(list), "\n"), "\n")
	if len(list) == 0 {
		ids = nil
	}
	if !sort.StringsAreSorted(ids) || int64(len(ids)) != v.Draw.Entries {
		return Result{}, fmt.Errorf("the entry list is not %d sorted ids", v.Draw.Entries)
	}

	// Every ticket, and the winners.
	randomness := sha256.Sum256(sig)
	res := Result{Tickets: make(map[string]string, len(ids)), Ranked: append([]string(nil), ids...)}
	for _, e := range ids {
		m := hmac.New(sha256.New, randomness[:])
		m.Write([]byte(v.ID + ":" + e))
		res.Tickets[e] = hex.EncodeToString(m.Sum(nil))
	}
	sort.Slice(res.Ranked, func(i, j int) bool { return res.Tickets[res.Ranked[i]] < res.Tickets[res.Ranked[j]] })
	limit := max(v.PerUserLimit, 1)
	res.Winners = int(min((v.StockTotal+limit-1)/limit, int64(len(ids))))
	if res.Winners > 0 && res.Tickets[res.Ranked[res.Winners-1]] != v.Draw.Cutoff {
		return Result{}, fmt.Errorf("the cut-off is %s, but the %d-th lowest ticket is %s", v.Draw.Cutoff, res.Winners, res.Tickets[res.Ranked[res.Winners-1]])
	}
	return res, nil
}

func get(ctx context.Context, client *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := io.Copy(&b, resp.Body); err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %s: %s", url, strconv.Itoa(resp.StatusCode), b.String())
	}
	return b.Bytes(), nil
}
