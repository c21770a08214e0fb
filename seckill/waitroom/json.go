package waitroom

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
)

// APIQueue is the `Queue` object of gateway/openapi.yaml. The gateway's
// answers to POST/GET /api/v1/vouchers/{id}/queue and the socket's queue
// frames both come from QueueJSON, so the two never differ.
type APIQueue struct {
	VoucherID string `json:"voucher_id"`
	State     State  `json:"state"`
	// Position counts from 1 while waiting; 0 otherwise.
	Position   int64 `json:"position"`
	Ahead      int64 `json:"ahead"`
	ETASeconds int64 `json:"eta_seconds"`
	// Pass and PassExpiresAt are set only while admitted with the pass
	// unused; null otherwise.
	Pass          *string    `json:"pass"`
	PassExpiresAt *time.Time `json:"pass_expires_at"`
}

// QueueJSON is the one mapping from a place in line to its API object.
func QueueJSON(st Status) APIQueue {
	q := APIQueue{
		VoucherID: strconv.FormatInt(st.VoucherID, 10),
		State:     st.State,
		Position:  st.Position,
		Ahead:     st.Ahead,
		// Whole seconds, rounded up: "0 s" is for the admitted only.
		ETASeconds: int64(math.Ceil(st.ETA.Seconds())),
	}
	if st.State == StateAdmitted && st.Pass != "" {
		p, exp := st.Pass, st.PassExpiresAt.UTC()
		q.Pass, q.PassExpiresAt = &p, &exp
	}
	return q
}

// FrameQueue is the type of the socket frame that carries a place in line.
const FrameQueue = "queue"

// frame is {"type":"queue","queue":{...}}.
type frame struct {
	Type  string   `json:"type"`
	Queue APIQueue `json:"queue"`
}

// QueueFrame encodes the socket's text frame for st.
func QueueFrame(st Status) ([]byte, error) {
	b, err := json.Marshal(frame{Type: FrameQueue, Queue: QueueJSON(st)})
	if err != nil {
		return nil, fmt.Errorf("waitroom: encode frame: %w", err)
	}
	return b, nil
}
