package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/flashsale/seckill/orders/kafkaq"
)

// runDeadLetters lists the workers' dead-letter topic, or replays one of its
// messages to the orders topic (after the cause is fixed: the workers are
// idempotent on the order id, so replaying a message that was handled after
// all changes nothing).
func runDeadLetters(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("deadletters", deadLettersUsage)
	asJSON := fs.Bool("json", false, "list: one JSON object per line instead of a table")
	timeout := fs.Duration("timeout", 30*time.Second, "how long reading the topic may take")
	if help, err := parseFlags(fs, args, 2, stdout, stderr); help || err != nil {
		return err
	}
	var partition int32
	var offset int64
	switch {
	case fs.Arg(0) == "list" && fs.NArg() == 1:
	case fs.Arg(0) == "replay" && fs.NArg() == 2:
		var err error
		if partition, offset, err = parseLetterID(fs.Arg(1)); err != nil {
			return refuseArgs(fs, stderr, err)
		}
	default:
		return refuseArgs(fs, stderr, errors.New("deadletters: say list, or replay PARTITION/OFFSET"))
	}
	cfg, err := LoadConfig(getenv)
	if err != nil {
		return err
	}
	if len(cfg.KafkaBrokers) == 0 {
		return errors.New("deadletters needs SECKILL_KAFKA_BROKERS (the brokers the workers read from)")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	dlq := cfg.DeadLetterTopic()
	if fs.Arg(0) == "list" {
		letters, err := kafkaq.ListDeadLetters(ctx, cfg.KafkaBrokers, dlq)
		if err != nil {
			return err
		}
		return writeDeadLetters(stdout, letters, *asJSON)
	}
	d, err := kafkaq.ReplayDeadLetter(ctx, cfg.KafkaBrokers, dlq, cfg.KafkaTopic, partition, offset)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "replayed %s/%d/%d (from %s) to %s\n", dlq, d.Partition, d.Offset, d.Source, cfg.KafkaTopic)
	return nil
}

// parseLetterID reads "PARTITION/OFFSET".
func parseLetterID(s string) (int32, int64, error) {
	p, o, ok := strings.Cut(s, "/")
	partition, perr := strconv.ParseInt(p, 10, 32)
	offset, oerr := strconv.ParseInt(o, 10, 64)
	if !ok || perr != nil || oerr != nil || partition < 0 || offset < 0 {
		return 0, 0, fmt.Errorf("deadletters: %q is not PARTITION/OFFSET (see the list's first column)", s)
	}
	return int32(partition), offset, nil
}

func writeDeadLetters(w io.Writer, letters []kafkaq.DeadLetter, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		for _, d := range letters {
			if err := enc.Encode(d); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LETTER\tAT\tSOURCE\tREASON\tVALUE")
	for _, d := range letters {
		value := d.Value
		if len(value) > 120 {
			value = value[:120] + "…"
		}
		fmt.Fprintf(tw, "%d/%d\t%s\t%s\t%s\t%q\n", d.Partition, d.Offset, d.At.Format(time.RFC3339), d.Source, d.Reason, value)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "%d dead letters\n", len(letters))
	return nil
}
