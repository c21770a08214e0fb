package lua_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/lua"
)

// Every redis.call must name its key through KEYS: a key built inside a
// script is invisible to Redis Cluster's routing (the seeds' global
// seckill:order set broke exactly this).
func TestScriptsTouchOnlyDeclaredKeys(t *testing.T) {
	call := regexp.MustCompile(`redis\.call\('([A-Z]+)'(?:,\s*([^,)]+))?`)
	keyless := map[string]bool{"TIME": true}
	for name, src := range map[string]string{
		"reserve": lua.Reserve, "reserve_batch": lua.ReserveBatch, "release": lua.Release, "snapshot": lua.Snapshot,
		"warm": lua.Warm, "lease_renew": lua.LeaseRenew, "lease_release": lua.LeaseRelease,
		"heal_lock":  lua.HealLock,
		"queue_join": lua.QueueJoin, "queue_admit": lua.QueueAdmit, "queue_pass": lua.QueuePass,
		"queue_rate": lua.QueueRate,
		"move_out":   lua.MoveOut, "move_in": lua.MoveIn, "steer": lua.Steer,
		"queue_seat": lua.QueueSeat, "draw_enter": lua.DrawEnter, "draw_freeze": lua.DrawFreeze,
		"entry_claim": lua.EntryClaim,
	} {
		require.NotEmpty(t, src, name)
		calls := call.FindAllStringSubmatch(src, -1)
		require.NotEmpty(t, calls, name)
		for _, c := range calls {
			if keyless[c[1]] {
				continue
			}
			require.True(t, strings.HasPrefix(c[2], "KEYS["), "%s: %s touches %q", name, c[1], c[2])
		}
	}
}
