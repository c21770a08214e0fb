package api

// The types of the socket's frames (gateway/wsframes.yaml): one JSON object
// per text frame, told apart by "type".
const (
	// FrameVoucher carries a voucher whose stock or state changed.
	FrameVoucher = "voucher"
	// FrameOrder carries one order: a snapshot entry or a status change.
	FrameOrder = "order"
	// FrameQueue carries the shopper's place in a waiting room.
	FrameQueue = "queue"
	// FramePing is the one message a client may send, to check the
	// connection.
	FramePing = "ping"
	// FramePong answers a client's ping.
	FramePong = "pong"
)

// PongFrame is the ready-to-write answer to a client's {"type":"ping"}.
const PongFrame = `{"type":"pong"}`

// Frame is one frame the server sends on the socket: Type says which, and
// the one object it carries is set (none for pong). Unset objects are
// left out, so {"type":"order","order":{...}} is Frame{Type: FrameOrder,
// Order: &o}.
type Frame struct {
	Type    string   `json:"type"`
	Voucher *Voucher `json:"voucher,omitempty"`
	Order   *Order   `json:"order,omitempty"`
	Queue   *Queue   `json:"queue,omitempty"`
}

// ClientFrame is a message a client sends on the socket; {"type":"ping"}
// is the only one. It reads the type alone, whatever else the message
// holds.
type ClientFrame struct {
	Type string `json:"type"`
}
