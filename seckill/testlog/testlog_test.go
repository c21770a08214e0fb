package testlog_test

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill/testlog"
)

// Many writers at once lose no line and tear none (run it with -race too).
func TestBufferTakesConcurrentWrites(t *testing.T) {
	t.Parallel()
	var b testlog.Buffer
	log := slog.New(slog.NewJSONHandler(&b, nil))
	const writers, each = 8, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				log.Info("line", "writer", w, "i", i)
				_ = b.String() // the test reads while they write
			}
		}()
	}
	wg.Wait()
	lines := b.JSONLines(t)
	require.Len(t, lines, writers*each)
	seen := map[string]bool{}
	for _, l := range lines {
		require.Equal(t, "line", l["msg"])
		seen[fmt.Sprint(l["writer"], "/", l["i"])] = true
	}
	require.Len(t, seen, writers*each, "every line arrived once")
}

func TestJSONLinesSkipsBlankLines(t *testing.T) {
	t.Parallel()
	var b testlog.Buffer
	_, _ = b.Write([]byte("\n{\"a\":1}\n\n{\"b\":2}\n"))
	require.Equal(t, []map[string]any{{"a": 1.0}, {"b": 2.0}}, b.JSONLines(t))
}

// recorder is a testing.TB that keeps what is logged.
type recorder struct {
	testing.TB
	logged []string
}

func (r *recorder) Log(args ...any) { r.logged = append(r.logged, fmt.Sprint(args...)) }

func TestWriterLogsOneLinePerWrite(t *testing.T) {
	t.Parallel()
	r := &recorder{TB: t}
	n, err := testlog.Writer(r).Write([]byte("starting redis-server\n"))
	require.NoError(t, err)
	require.Equal(t, len("starting redis-server\n"), n)
	testlog.Logger(r, slog.LevelWarn).Info("hidden")
	testlog.Logger(r, slog.LevelWarn).Warn("shown", "k", "v")
	require.Len(t, r.logged, 2)
	require.Equal(t, "starting redis-server", r.logged[0])
	require.True(t, strings.HasSuffix(r.logged[1], `level=WARN msg=shown k=v`), r.logged[1])
}
