package redisstock

import "strconv"

// ReserveCommand is one buy of one unit of voucherID as a Redis command line:
// EVALSHA of reserve.lua (loaded as sha) with the script's keys and
// arguments, no Idempotency-Key, and the text placeholder standing for both
// the user id and the order id. It is for tools that drive Redis without
// this package, such as redis-benchmark, which replaces its placeholder
// "__rand_int__" with a new number on every call: so the key layout stays
// spelled in this package only.
func ReserveCommand(sha string, voucherID int64, placeholder string) []string {
	keys := VoucherKeys(voucherID).script()
	cmd := append([]string{"EVALSHA", sha, strconv.Itoa(len(keys))}, keys...)
	// reserve.lua's ARGV: user id, order id, quantity, request key.
	return append(cmd, placeholder, placeholder, "1", "")
}
