package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/seckill"
)

const operatorsUsage = `usage: seckill operators [--timeout D] add NAME --scope read|write
       seckill operators [--timeout D] list [--all]
       seckill operators [--timeout D] revoke NAME

Gives an operator a token of their own for the operator routes and the
operator page, lists the operators, or revokes one's token (every gateway
refuses it within a second). add prints the token once: it is stored only
as its SHA-256. A read token may see (stats, reports, exports, the trail);
a write token may also change (vouchers, pauses, the breaker).
SECKILL_ADMIN_TOKEN stays the root credential. Each add and revoke is
recorded in the operators' trail (GET /api/v1/admin/actions) as made by
cli:<the account running this>. Needs SECKILL_DATABASE_URL.

Flags:
`

// cliOperator is how the trail names whoever runs the seckill command: it
// has the services' own credentials, so it is no named operator, but the
// account that ran it says who.
func cliOperator(getenv func(string) string) string {
	for _, v := range []string{"SUDO_USER", "USER", "LOGNAME"} {
		if name := getenv(v); name != "" {
			return seckill.CLIPrefix + name
		}
	}
	return seckill.CLIPrefix + "unknown"
}

// runOperators adds, lists or revokes named operators.
func runOperators(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("operators", operatorsUsage)
	timeout := fs.Duration("timeout", 10*time.Second, "how long the PostgreSQL calls may take")
	scope := fs.String("scope", "", "add: the new token's scope, read or write")
	all := fs.Bool("all", false, "list: the revoked tokens too")
	if help, err := parseFlags(fs, args, -1, stdout, stderr); help || err != nil {
		return err
	}
	// The verb's own flags may come before or after the name (add alice
	// --scope write).
	verb := fs.Arg(0)
	var names []string
	for rest := fs.Args()[min(1, fs.NArg()):]; len(rest) > 0; {
		if help, err := parseFlags(fs, rest, -1, stdout, stderr); help || err != nil {
			return err
		}
		if rest = fs.Args(); len(rest) > 0 {
			names, rest = append(names, rest[0]), rest[1:]
		}
	}
	name := ""
	if len(names) > 0 {
		name = names[0]
	}
	switch {
	case verb != "add" && verb != "list" && verb != "revoke":
		return refuseArgs(fs, stderr, errors.New("operators: say add NAME --scope read|write, list or revoke NAME"))
	case len(names) > 1 || (verb == "list" && len(names) > 0):
		return refuseArgs(fs, stderr, fmt.Errorf("operators %s: unexpected argument %q", verb, names[len(names)-1]))
	case verb != "list" && name == "":
		return refuseArgs(fs, stderr, fmt.Errorf("operators %s: name the operator", verb))
	case verb == "add" && !seckill.Scope(*scope).Valid():
		return refuseArgs(fs, stderr, errors.New("operators add: --scope read or --scope write"))
	}
	if verb != "list" {
		if err := seckill.ValidateOperatorName(name); err != nil {
			return refuseArgs(fs, stderr, fmt.Errorf("operators %s: %w", verb, err))
		}
	}
	cfg, err := LoadConfig(getenv)
	if err != nil {
		return err
	}
	if cfg.DatabaseURL == "" {
		return errors.New("operators needs SECKILL_DATABASE_URL: the operators and their trail are in PostgreSQL")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	pool, err := openPool(ctx, cfg.DatabaseURL, 2, 0, nil)
	if err != nil {
		return err
	}
	defer pool.Close()
	store := pgstore.New(pool)
	act := seckill.Action{Operator: cliOperator(getenv), Target: "operator:" + name}
	switch verb {
	case "add":
		tok, digest := seckill.NewOperatorToken()
		describeCLI(&act, seckill.ActionAddOperator, map[string]string{"name": name, "scope": *scope})
		if _, err := store.AddOperator(ctx, seckill.Operator{Name: name, Scope: seckill.Scope(*scope), TokenSHA256: digest}, act); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "operator %s added with a %s token; it is printed once, below, and stored only as its SHA-256\n", name, *scope)
		_, err = fmt.Fprintln(stdout, tok)
		return err
	case "revoke":
		describeCLI(&act, seckill.ActionRevokeOperator, map[string]string{"name": name})
		if _, err := store.RevokeOperator(ctx, name, act); err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "operator %s: token revoked; every gateway refuses it within a second\n", name)
		return err
	}
	ops, err := store.Operators(ctx, *all)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSCOPE\tCREATED\tREVOKED")
	for _, op := range ops {
		revoked := "-"
		if !op.RevokedAt.IsZero() {
			revoked = op.RevokedAt.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", op.Name, op.Scope, op.CreatedAt.Format(time.RFC3339), revoked)
	}
	return tw.Flush()
}

// describeCLI fills in the kind and the change of a change made with the
// seckill command.
func describeCLI(act *seckill.Action, kind string, change any) {
	act.Kind = kind
	act.Change, _ = json.Marshal(change) // a map of strings and numbers always marshals
}
