package gateway

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// readUntilClosed reads c until the server closes it and returns every byte
// that came (the deadline only bounds a server that never closes).
func readUntilClosed(t *testing.T, c net.Conn) []byte {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(30*time.Second)))
	b, err := io.ReadAll(c)
	require.NoError(t, err, "the server closes the connection (EOF), within 30 s")
	return b
}

// A keep-alive connection left idle past IdleTimeout is closed with nothing
// written on it, and so is a connection that never carried a request (HTTP
// clients dial spare connections and park them unused). An answer there is
// read by the client as an unsolicited response, or as the answer to the
// request it writes at that moment.
func TestIdleConnectionsAreClosedSilently(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config, _ *testDeps) {
		c.ReadTimeout = 300 * time.Millisecond
		c.IdleTimeout = 300 * time.Millisecond
	})
	addr := b.base[len("http://"):]

	t.Run("idle after a request", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		_, err = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		_, err = io.Copy(io.Discard, resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.False(t, resp.Close, "kept alive")
		require.Zero(t, br.Buffered())
		require.Empty(t, readUntilClosed(t, c), "nothing may be written on an idle keep-alive connection")
	})

	t.Run("never used", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		require.Empty(t, string(readUntilClosed(t, c)), "nothing may be written on a connection that carried no request")
	})

	t.Run("a request begun and stalled still gets its answer", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		_, err = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n") // no blank line
		require.NoError(t, err)
		require.Contains(t, string(readUntilClosed(t, c)), "HTTP/1.1 ", "a client that began a request is told why it was dropped")
	})
}
