package devstack_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack"
)

// Jaeger runs on loopback ports of its own, takes OTLP/HTTP, answers its
// query API, and its ports are free again once it stops.
func TestJaegerStartStop(t *testing.T) {
	j, err := devstack.StartJaeger(context.Background(), devstack.JaegerOptions{Dir: scratch(t)})
	require.NoError(t, err)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = j.Stop(context.Background())
		}
	})
	require.True(t, strings.HasPrefix(j.OTLPEndpoint, "127.0.0.1:"), j.OTLPEndpoint)
	require.True(t, strings.HasPrefix(j.QueryURL, "http://127.0.0.1:"), j.QueryURL)

	resp, err := http.Post("http://"+j.OTLPEndpoint+"/v1/traces", "application/json", strings.NewReader(`{"resourceSpans":[]}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the OTLP/HTTP receiver takes spans")
	resp, err = http.Get(j.QueryURL + "/api/services")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the query API answers")

	require.NoError(t, j.Stop(context.Background()))
	stopped = true
	for _, addr := range []string{j.OTLPEndpoint, strings.TrimPrefix(j.QueryURL, "http://")} {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		require.Error(t, err, "%s is closed once jaeger stopped", addr)
	}
}
