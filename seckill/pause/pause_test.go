package pause_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill/pause"
)

func TestFor(t *testing.T) {
	stopped := errors.New("the node is stopping")
	tests := []struct {
		name    string
		ctx     func() context.Context
		d       time.Duration
		wantNil bool
		is      []error
	}{
		{name: "runs its time", ctx: context.Background, d: time.Millisecond, wantNil: true},
		{name: "cancelled", d: time.Hour, is: []error{context.Canceled},
			ctx: func() context.Context { c, cancel := context.WithCancel(context.Background()); cancel(); return c }},
		{name: "cancelled with a cause", d: time.Hour, is: []error{context.Canceled, stopped},
			ctx: func() context.Context {
				c, cancel := context.WithCancelCause(context.Background())
				cancel(stopped)
				return c
			}},
		{name: "past its deadline", d: time.Hour, is: []error{context.DeadlineExceeded},
			ctx: func() context.Context {
				c, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
				t.Cleanup(cancel)
				return c
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := pause.For(tt.ctx(), tt.d)
			if tt.wantNil {
				require.NoError(t, err)
				return
			}
			for _, target := range tt.is {
				require.ErrorIs(t, err, target)
			}
		})
	}
}
