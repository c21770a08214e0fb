package waitroom

import "strconv"

// keys names the Redis keys of one voucher's room. Build them with keysOf and
// nowhere else. They carry the voucher's hash tag {v<ID>}, the same as the
// voucher's stock keys (seckill/redisstock), so each script's keys share one
// Redis Cluster slot.
type keys struct {
	line, room, passes, outcome, claims, journal string
	// rate is an adaptive room's rate in force (adapt.go).
	rate string
}

func keysOf(voucherID int64) keys {
	p := "waitroom:{v" + strconv.FormatInt(voucherID, 10) + "}:"
	return keys{line: p + "line", room: p + "room", passes: p + "passes", outcome: p + "outcome",
		claims: p + "claims", journal: p + "journal", rate: p + "rate"}
}

// list is the KEYS of the three scripts, in their order, without the
// optional journal and stock meta (see Room.keys).
func (k keys) list() []string { return []string{k.line, k.room, k.passes, k.outcome, k.claims} }
