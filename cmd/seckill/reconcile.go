package main

import (
	"context"
	"io"
)

// runReconcile compares Redis with PostgreSQL per voucher.
func runReconcile(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return nil
}
