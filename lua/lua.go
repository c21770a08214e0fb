// Package lua holds the Redis scripts, embedded, so the binary carries them
// and the .lua files stay readable (and testable with redis-cli) on their own.
//
// Every script touches only the keys passed in KEYS. The voucher scripts take
// keys that all carry the voucher's hash tag ({v<ID>}), so each runs on one
// Redis Cluster slot. The variables are set at build time and never written.
package lua

import _ "embed"

// Reserve is reserve.lua: the atomic hold of stock (window, stock, per-user
// limit, idempotent on request key and order id).
//
//go:embed reserve.lua
var Reserve string

// ReserveBatch is reserve_batch.lua: reserve.lua for many buys of one bucket
// in one call, each decided in turn and answered on its own.
//
//go:embed reserve_batch.lua
var ReserveBatch string

// Release is release.lua: give one reservation's stock back, at most once.
//
//go:embed release.lua
var Release string

// Snapshot is snapshot.lua: a consistent read of a voucher's state for drift reports.
//
//go:embed snapshot.lua
var Snapshot string

// Warm is warm.lua: put a voucher on sale once, refusing to overwrite a live one.
//
//go:embed warm.lua
var Warm string

// HealLock is heal_lock.lua: take a voucher's heal lease with a fencing
// number greater than any given before (see the script).
//
//go:embed heal_lock.lua
var HealLock string

// LeaseRenew is lease_renew.lua: compare-and-pexpire of an owned lease key.
//
//go:embed lease_renew.lua
var LeaseRenew string

// LeaseRelease is lease_release.lua: compare-and-delete of an owned lease key.
//
//go:embed lease_release.lua
var LeaseRelease string

// QueueJoin is queue_join.lua: join a waiting room's line (one place per
// user) or read one's place in it.
//
//go:embed queue_join.lua
var QueueJoin string

// QueueAdmit is queue_admit.lua: one admission step of a waiting room, at
// the room's rate whichever instances run it; also expires unused passes and
// closes the room.
//
//go:embed queue_admit.lua
var QueueAdmit string

// QueuePass is queue_pass.lua: the single use of an admission pass, its
// return when the buy never reached the stock, and the settling of its claim
// when the buy is over.
//
//go:embed queue_pass.lua
var QueuePass string

// QueueRate is queue_rate.lua: the admission rate in force of an adaptive
// waiting room, read by the fleet and changed one change at a time.
//
//go:embed queue_rate.lua
var QueueRate string

// QueueSeat is queue_seat.lua: a draw's ranking seated in a waiting room,
// once however many instances race, its winners admitted at once.
//
//go:embed queue_seat.lua
var QueueSeat string

// DrawEnter is draw_enter.lua: an entry in a draw (one per user, only in
// its window), or the read of one; it also sets the draw's seed once.
//
//go:embed draw_enter.lua
var DrawEnter string

// DrawFreeze is draw_freeze.lua: close a draw's entries for good once its
// start has come, and answer its seed.
//
//go:embed draw_freeze.lua
var DrawFreeze string

// MoveOut is move_out.lua: step 1 of moving stock between two buckets of a
// voucher with several shards (debit the donor, record the move).
//
//go:embed move_out.lua
var MoveOut string

// MoveIn is move_in.lua: step 2 of a move (credit the receiving bucket at
// most once).
//
//go:embed move_in.lua
var MoveIn string

// Steer is steer.lua: an operator's change of one bucket of a running sale
// (stock added, the end moved), once per change id.
//
//go:embed steer.lua
var Steer string

// EntryClaim is entry_claim.lua: one place per person key in a voucher's
// line or draw; a second account of the same person is refused.
//
//go:embed entry_claim.lua
var EntryClaim string
