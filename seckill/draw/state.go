package draw

import "github.com/flashsale/seckill/seckill/waitroom"

// The states of a shopper in a draw (gateway/openapi.yaml, Queue.state).
const (
	// StateEntered: in the draw, which has not been made yet.
	StateEntered waitroom.State = "entered"
	// StateWon: holds a pass to buy (or used it).
	StateWon waitroom.State = "won"
	// StateWaitlisted: waits, at Position, for a winner's units to come
	// back.
	StateWaitlisted waitroom.State = "waitlisted"
	// StateLost: the sale is over for this shopper: it ended, or the pass
	// they won expired unused.
	StateLost waitroom.State = "lost"
)

// StateOf is the draw's name for a state of a place in the seated line:
// admitted is won, waiting (sold out or not) is waitlisted, and a pass
// expired or a sale closed is lost.
func StateOf(s waitroom.State) waitroom.State {
	switch {
	case s == waitroom.StateAdmitted:
		return StateWon
	case s.Waits():
		return StateWaitlisted
	default:
		return StateLost
	}
}
