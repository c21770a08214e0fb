package waitroom

// The states of a place in a draw's line (gateway/openapi.yaml,
// Queue.state): a draw (seckill/draw) seats its ranking in the room, and the
// API names the room's states as a draw does.
const (
	// StateEntered: in the draw, which has not been made yet (the line
	// is empty until then; seckill/draw answers it).
	StateEntered State = "entered"
	// StateWon: admitted, holding a pass to buy (or having used it).
	StateWon State = "won"
	// StateWaitlisted: waiting, at Position, for a winner's units to come
	// back.
	StateWaitlisted State = "waitlisted"
	// StateLost: the sale is over for this shopper: it ended, or the pass
	// they won expired unused.
	StateLost State = "lost"
	// StateVoid: the draw is void (its entries were lost before it was
	// made): nobody wins it (seckill/draw answers it).
	StateVoid State = "void"
)

// DrawState is the draw's name for s: admitted is won, held stays held,
// waiting (sold out or not) is waitlisted, and a pass expired or a sale
// closed is lost.
func DrawState(s State) State {
	switch {
	case s == StateAdmitted:
		return StateWon
	case s == StateHeld:
		// A win missed and held: the same word as a line's.
		return StateHeld
	case s.Waits():
		return StateWaitlisted
	default:
		return StateLost
	}
}
