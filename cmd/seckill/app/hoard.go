package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/hoard"
	"github.com/flashsale/seckill/seckill/redisstock"
)

const hoardUsage = `usage: seckill hoard [--timeout D] show USER_ID
       seckill hoard [--timeout D] clear USER_ID

Shows a shopper's unpaid strikes (holds they let expire unpaid or cancelled
within SECKILL_HOARD_WINDOW) and whether new holds are refused with 403
unpaid_limit, or clears them so the shopper may buy again at once. Needs
SECKILL_REDIS_URL (or SECKILL_REDIS_CLUSTER_ADDRS), and for clear
SECKILL_DATABASE_URL too: a clear is recorded in the operators' trail (GET
/api/v1/admin/actions) as made by cli:<the account running this>.

Flags:
`

// newHoard is the strikes' store as configured.
func newHoard(cfg Config, rdb redis.UniversalClient) *hoard.Store {
	return hoard.New(hoard.Config{Redis: rdb, Hot: redisstock.GroupCommit(rdb), Limit: cfg.HoardLimit, Window: cfg.HoardWindow})
}

// runHoard shows or clears one shopper's strikes.
func runHoard(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("hoard", hoardUsage)
	timeout := fs.Duration("timeout", 10*time.Second, "how long the Redis calls may take")
	if help, err := parseFlags(fs, args, 2, stdout, stderr); help || err != nil {
		return err
	}
	verb := fs.Arg(0)
	if fs.NArg() != 2 || (verb != "show" && verb != "clear") {
		return refuseArgs(fs, stderr, errors.New("hoard: say show USER_ID or clear USER_ID"))
	}
	userID, err := strconv.ParseInt(fs.Arg(1), 10, 64)
	if err != nil || userID <= 0 {
		return refuseArgs(fs, stderr, fmt.Errorf("hoard: %q is not a user id (a positive integer)", fs.Arg(1)))
	}
	cfg, err := LoadConfig(getenv)
	if err != nil {
		return err
	}
	if verb == "clear" && cfg.DatabaseURL == "" {
		return errors.New("hoard clear needs SECKILL_DATABASE_URL: a clear is recorded in the operators' trail, in PostgreSQL")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	rdb, err := openRedis(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() { _ = rdb.Close() }()
	store := newHoard(cfg, rdb)
	if verb == "clear" {
		return clearStrikes(ctx, cfg, store, userID, cliOperator(getenv), stdout)
	}
	c, err := store.Show(ctx, userID)
	if err != nil {
		return err
	}
	return writeStrikes(stdout, c, cfg)
}

// writeStrikes prints a shopper's count: a summary line, then one line per
// strike, oldest first.
func writeStrikes(w io.Writer, c hoard.Count, cfg Config) error {
	state := "new holds are allowed"
	if c.Refused {
		state = "new holds are refused (403 unpaid_limit) until " + c.Until.UTC().Format(time.RFC3339)
	}
	if _, err := fmt.Fprintf(w, "user %d: %d strikes within %s (limit %d); %s\n", c.UserID, len(c.Strikes), cfg.HoardWindow, cfg.HoardLimit, state); err != nil {
		return err
	}
	for _, s := range c.Strikes {
		if _, err := fmt.Fprintf(w, "  order %d at %s\n", s.OrderID, s.At.UTC().Format(time.RFC3339)); err != nil {
			return err
		}
	}
	return nil
}

// clearStrikes clears a shopper's strikes and records it in the operators'
// trail. The strikes are Redis's, so the entry is written after the clear:
// a clear that failed is never recorded as made, and one whose entry could
// not be written is an error, so the operator runs it again (clearing
// twice is clearing once). PostgreSQL is reached first, so an unreachable
// trail changes nothing.
func clearStrikes(ctx context.Context, cfg Config, store *hoard.Store, userID int64, operator string, stdout io.Writer) error {
	pool, err := openPool(ctx, cfg.DatabaseURL, 1, 0, nil)
	if err != nil {
		return err
	}
	defer pool.Close()
	n, err := store.Clear(ctx, userID)
	if err != nil {
		return err
	}
	act := seckill.Action{Operator: operator, Target: "user:" + strconv.FormatInt(userID, 10)}
	describeCLI(&act, seckill.ActionClearStrikes, map[string]int{"strikes_cleared": n})
	if _, err := pgstore.New(pool).RecordAction(ctx, act); err != nil {
		return fmt.Errorf("user %d: %d strikes cleared, but the clear is not in the operators' trail; run the clear again: %w", userID, n, err)
	}
	fmt.Fprintf(stdout, "user %d: cleared %d strikes; new holds are allowed\n", userID, n)
	return nil
}
