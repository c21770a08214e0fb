package waitroom

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/flashsale/seckill/seckill/api"
)

// QueueJSON is the one mapping from a place in line to its API object
// (api.Queue). The gateway's answers to POST/GET
// /api/v1/vouchers/{id}/queue and the socket's queue frames both come from
// it, so the two never differ.
func QueueJSON(st Status) api.Queue {
	q := api.Queue{
		VoucherID: strconv.FormatInt(st.VoucherID, 10),
		State:     string(st.State),
		Position:  st.Position,
		Ahead:     st.Ahead,
		// Whole seconds, rounded up: "0 s" is for the admitted only.
		ETASeconds: int64(math.Ceil(st.ETA.Seconds())),
	}
	if st.State == StateAdmitted && st.Pass != "" {
		p, exp := st.Pass, st.PassExpiresAt.UTC()
		q.Pass, q.PassExpiresAt = &p, &exp
	}
	if st.State == StateHeld {
		until := st.HeldUntil.UTC()
		q.HeldUntil = &until
	}
	if st.Draw {
		// A waitlist moves as units come back, which no rate tells.
		q.State, q.ETASeconds = string(DrawState(st.State)), 0
	}
	return q
}

// QueueFrame encodes the socket's text frame for st,
// {"type":"queue","queue":{...}}.
func QueueFrame(st Status) ([]byte, error) {
	q := QueueJSON(st)
	b, err := json.Marshal(api.Frame{Type: api.FrameQueue, Queue: &q})
	if err != nil {
		return nil, fmt.Errorf("waitroom: encode frame: %w", err)
	}
	return b, nil
}
