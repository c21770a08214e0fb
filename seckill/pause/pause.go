// Package pause is the one way the project's loops pause: a sleep that ends
// early, with the context's error, when its context does.
package pause

import (
	"context"
	"errors"
	"time"
)

// For waits d, or until ctx ends. It returns nil after d, and otherwise
// ctx.Err(), joined with the context's cause when one was given (so
// errors.Is still finds context.Canceled or DeadlineExceeded, and a log
// line says why the wait was cut short).
func For(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
			return errors.Join(ctx.Err(), cause)
		}
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
