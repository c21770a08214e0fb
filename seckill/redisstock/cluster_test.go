package redisstock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack/stacktest"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// keySlot is Redis Cluster's HASH_SLOT: CRC16 (XMODEM) of the hash tag, or of
// the whole key when it has none, modulo 16384.
func keySlot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}

func voucherKeyList(id int64) []string {
	k := redisstock.VoucherKeys(id)
	return []string{k.Meta, k.Ledger, k.Pending, k.Released, k.Heal}
}

func TestVoucherKeysShareOneSlot(t *testing.T) {
	t.Parallel()
	require.Equal(t, uint16(12182), keySlot("foo"), "CRC16 matches Redis's")
	require.Equal(t, keySlot("{user1000}.following"), keySlot("{user1000}.followers"))
	for _, id := range []int64{1, 42, 9_999_999_999} {
		keys := voucherKeyList(id)
		for _, key := range keys {
			require.Contains(t, key, "{v", key)
			require.Equal(t, keySlot(keys[0]), keySlot(key), key)
		}
	}
	require.NotEqual(t, keySlot(redisstock.VoucherKeys(1).Meta), keySlot(redisstock.VoucherKeys(2).Meta),
		"vouchers spread over slots")
}

// TestRedisCluster runs every operation through a ClusterClient against the
// package's Redis Cluster of three masters, which refuses any command or
// script whose keys span slots (CROSSSLOT): a script given keys of two
// slots fails here. It also checks the server's own CLUSTER KEYSLOT.
func TestRedisCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := stack.Client(t, stacktest.RedisShape{ClusterAddrs: stack.RedisCluster(t).Addrs})
	admin := rdb

	// The check has teeth: a script given the keys of two vouchers (two
	// slots) is refused.
	err := redis.NewScript("return 1").Run(ctx, rdb, []string{redisstock.VoucherKeys(1).Meta, redisstock.VoucherKeys(2).Meta}).Err()
	require.ErrorContains(t, err, "CROSSSLOT")

	for _, key := range voucherKeyList(42) {
		slot, err := admin.ClusterKeySlot(ctx, key).Result()
		require.NoError(t, err)
		require.Equal(t, int64(keySlot(key)), slot, key)
	}

	s := redisstock.New(redisstock.Config{Redis: rdb})
	now, err := admin.Time(ctx).Result()
	require.NoError(t, err)
	v1, v2 := voucher(10, 3, now.Add(-time.Minute), now.Add(time.Hour)), voucher(5, 1, now.Add(-time.Minute), now.Add(time.Hour))
	require.NoError(t, s.Warm(ctx, v1))
	require.NoError(t, s.Warm(ctx, v2))
	user := next()
	a, b := res(v1, user, 2, "k"), res(v2, user, 1, "")
	for _, r := range []seckill.Reservation{a, b} {
		_, err := s.Reserve(ctx, r)
		require.NoError(t, err)
	}
	require.NoError(t, s.Promise(ctx, a))
	replay := a
	replay.OrderID = next()
	got, err := s.Reserve(ctx, replay)
	require.NoError(t, err)
	require.True(t, got.Replayed)

	left, err := s.StockLeft(ctx, v1.ID, v2.ID)
	require.NoError(t, err)
	require.Equal(t, map[int64]int64{v1.ID: 8, v2.ID: 4}, left)
	_, ok, err := s.Hold(ctx, b.OrderID, []int64{v1.ID, v2.ID})
	require.NoError(t, err)
	require.True(t, ok)
	holds, err := s.UserHolds(ctx, user, []int64{v1.ID, v2.ID})
	require.NoError(t, err)
	require.Len(t, holds, 2)
	require.NoError(t, s.Confirm(ctx, []seckill.Reservation{a, b}))
	pend, err := s.Pending(ctx, v1.ID, time.Now().Add(time.Hour), 10)
	require.NoError(t, err)
	require.Empty(t, pend)
	st, err := s.ReleaseStatus(ctx, v1.ID, a.OrderID, seckill.ReleaseIfPending)
	require.NoError(t, err)
	require.Equal(t, redisstock.AlreadyConfirmed, st)
	ok, err = s.Release(ctx, v1.ID, a.OrderID, seckill.ReleaseUnsent)
	require.NoError(t, err)
	require.True(t, ok)
	snap, err := s.Snapshot(ctx, v1.ID)
	require.NoError(t, err)
	require.Equal(t, redisstock.Snapshot{OnSale: true, Left: 10, Total: 10}, snap)

	// A cancellation (mode any) records the release for the idempotency
	// window, in the voucher's slot.
	c := res(v1, next(), 1, "kc")
	_, err = s.Reserve(ctx, c)
	require.NoError(t, err)
	ok, err = s.Release(ctx, v1.ID, c.OrderID, seckill.ReleaseAny)
	require.NoError(t, err)
	require.True(t, ok)

	// The healer's lease and its fenced rebuild (WATCH over the voucher's
	// keys and its lock) stay in one slot too.
	lock, ok, err := s.LockHeal(ctx, v2.ID, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, s.Rebuild(ctx, redisstock.Truth{Voucher: withLeft(v2, 4), Holds: []seckill.Reservation{b}, Fence: lock.Token()}))
	require.NoError(t, lock.Unlock(ctx))
	snap, err = s.Snapshot(ctx, v2.ID)
	require.NoError(t, err)
	require.True(t, snap.Balanced())
	require.Equal(t, int64(1), snap.Held)
	require.NoError(t, s.Unwarm(ctx, v2.ID))
	_, err = s.Reserve(ctx, res(v2, next(), 1, ""))
	require.ErrorIs(t, err, seckill.ErrStockMissing)
}
