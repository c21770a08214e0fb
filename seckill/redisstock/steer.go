package redisstock

// Steering a running sale: stock added, the end moved later (steer.lua).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
)

// Steer makes voucher after.ID, on sale, what after says where it differs
// from before (seckill.StockKeeper): the stock and the total grow by
// after.StockTotal - before.StockTotal, and the end and the expiry of every
// key of the sale move with after.EndAt. Called with the two swapped it
// undoes a change whose record did not commit (never taking back more than
// is left: what was sold meanwhile the record refuses to persist, and the
// healer repairs).
//
// The stock goes to the first bucket alone, in one script, so the change is
// atomic however many shards the voucher has: each bucket keeps stock +
// held + out - in = its total, and buyers of the other buckets move stock
// from it as they do from any richer bucket (shards.go). The end is written
// in every bucket, the first last, so no bucket ends before the stock added
// to the first one is on sale in all of them. A voucher not on sale in
// Redis (lost, or taken off sale for a repair) is refused as unavailable:
// the rebuild that puts it back writes PostgreSQL's figures.
func (s *Store) Steer(ctx context.Context, before, after seckill.Voucher) error {
	n, err := s.shardCount(ctx, after.ID)
	if err != nil {
		return err
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	add := after.StockTotal - before.StockTotal
	end, expire := "", ""
	moved := !after.EndAt.Equal(before.EndAt)
	if moved {
		end = strconv.FormatInt(after.EndAt.UnixMilli(), 10)
		expire = strconv.FormatInt(s.expireAt(after).UnixMilli(), 10)
	}
	sharded := "0"
	if n > 1 {
		sharded = "1"
	}
	for bucket := n - 1; bucket >= 0; bucket-- {
		bucketAdd := int64(0)
		if bucket == 0 {
			bucketAdd = add
		}
		if bucketAdd == 0 && !moved {
			continue
		}
		got, err := s.steer.Run(ctx, s.rdb, []string{BucketKeys(after.ID, bucket).Meta}, id, bucketAdd, end, expire, sharded).Int64()
		if err != nil {
			return unavailable("steer", err)
		}
		switch got {
		case -1:
			return fmt.Errorf("%w: %w: voucher %d bucket %d is not on sale in Redis", apperr.ErrUnavailable, seckill.ErrStockMissing, after.ID, bucket)
		case -2:
			return fmt.Errorf("%w: voucher %d: less than %d left to take back", apperr.ErrConflict, after.ID, -bucketAdd)
		}
	}
	if moved {
		if err := s.expireSale(ctx, after.ID, n, s.expireAt(after)); err != nil {
			return err
		}
	}
	if add > 0 {
		s.announceStock(ctx, after.ID)
	}
	return nil
}

// expireSale moves the expiry of every key of voucher id's sale (each
// bucket's and the bucket count) to at: the sale's state lives until its
// new end plus the grace, whichever keys the sale's scripts touch again.
func (s *Store) expireSale(ctx context.Context, id int64, n int, at time.Time) error {
	for bucket := range n {
		keys := BucketKeys(id, bucket).fixed()
		if bucket == 0 {
			keys = append(keys, VoucherKeys(id).Shards)
		}
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range keys {
				p.PExpireAt(ctx, k, at)
			}
			return nil
		})
		if err != nil {
			return unavailable("steer: move the expiry", err)
		}
	}
	return nil
}
