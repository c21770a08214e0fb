package redisstock

import (
	"github.com/redis/go-redis/v9"
)

// GroupCommit returns the face of rdb that the buying path's calls go
// through: go-redis's blocking autopipeliner, which writes the commands of
// concurrent callers to Redis together, one write and one read for a whole
// batch, instead of one round trip per call. Each caller still waits for its
// own reply, and each script still runs atomically on its own in Redis; only
// the system calls and the round trips are shared.
//
// Batches are not held back to fill (no linger): while one batch is in
// flight the next callers queue up and leave together as soon as it
// returns, up to 300 commands, so a lone buy pays one round trip and a crowd
// of 64 in flight pays one for dozens. One instance is kept per client, so
// the per-user limit and the reservation share the same batches.
//
// When rdb offers no autopipeliner (a configuration it refuses), rdb itself
// is returned: every call is then its own round trip, as before.
func GroupCommit(rdb redis.UniversalClient) redis.Cmdable {
	ap, err := rdb.AutoPipeline()
	if err != nil {
		return rdb
	}
	return ap
}
