package gateway

import (
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/flashsale/seckill/gateway/i18n"
	"github.com/flashsale/seckill/seckill/api"
)

// OpsHandler is the ops listener of every process: GET /healthz, GET
// /readyz from a Readiness over checks, and GET /metrics. A process without
// the gateway role (a worker, a sweeper) serves it on its one address; a
// gateway on an address of its own, apart from the shoppers' port, which
// serves no /metrics. /healthz and /readyz answer as the gateway's do, with the same
// bodies and the API's error body on 503, so a probe needs no role to read
// them. It uses net/http, not Fiber: three routes need no more.
func OpsHandler(checks []Check, metrics http.Handler, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.Default()
	}
	ready := NewReadiness(checks, DefaultReadyTimeout, DefaultReadyMaxAge, log)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, api.Health{Status: "ok"}, log)
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		body, err := ready.answer(r.Context())
		if err != nil {
			e := classify(err, i18n.English)
			if e.retryAfter > 0 {
				w.Header().Set("Retry-After", retryAfterSeconds(e.retryAfter))
			}
			writeJSON(w, e.row.status, e.body(), log)
			return
		}
		writeJSON(w, http.StatusOK, body, log)
	})
	if metrics != nil {
		mux.Handle("GET /metrics", metrics)
	}
	return mux
}

func writeJSON(w http.ResponseWriter, status int, body any, log *slog.Logger) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(body); err != nil {
		log.Debug("ops: write answer", "err", err)
	}
}
