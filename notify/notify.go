// Package notify delivers order status changes to the buyers connected to
// this instance, whichever instance made the change.
//
// Every transition of an order is published once, with SPUBLISH, on its
// buyer's Redis shard channel [ChannelOf] by a [Publisher] (the orders
// workers, the sweeper, pay and cancel all call it through orders' Events
// interface). A message is one event's JSON object ([Publisher.Publish]) or
// a JSON array of a batch's events of one channel, in order
// ([Publisher.PublishBatch]: one SPUBLISH per channel a batch touches, not
// per event). Every gateway runs one [Hub] that subscribes (SSUBSCRIBE) to
// all [Channels], reads both kinds of message, and fans each event out to
// the [Subscription]s of the order's buyer, as ready-to-write WebSocket
// text frames. The package knows nothing of HTTP or Fiber: the gateway
// owns the socket, and reads frames from [Subscription.C].
//
// The order's JSON shape is api.Order (seckill/api), and the one mapping to
// it is [OrderJSON], so an order read through GET /api/v1/orders/{id} and one
// pushed on the socket are always the same object.
package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/apperr"
)

// ChannelCount is how many Redis shard channels carry the fleet's order
// status events; ChannelOf names the one of a buyer.
const ChannelCount = 16

// ChannelOf is the shard channel (SPUBLISH, SSUBSCRIBE) carrying userID's
// order events: one of ChannelCount, by the user id. Sharded pub/sub sends
// a message only to the master that owns its channel's slot (and that
// master's replicas), where classic PUBLISH on a Redis Cluster is copied to
// every node: so the event traffic is split between the masters instead of
// weighing on each of them in full. On a plain server the two are the same.
func ChannelOf(userID int64) string {
	return channel(shardOf(userID))
}

// shardOf is the index of userID's channel in Channels.
func shardOf(userID int64) int {
	return int(uint64(userID) % ChannelCount)
}

// Channels are every shard channel of order events, in shard order: what
// each gateway's Hub subscribes to, since its buyers may be anyone.
func Channels() []string {
	out := make([]string, ChannelCount)
	for i := range out {
		out[i] = channel(i)
	}
	return out
}

// channel names shard channel i. Each hash tag's slot falls in its own
// sixteenth of the 16384 slots (n10 in slot 157, n21 in 1519, ... n2 in
// 15924), so a Redis Cluster whose masters split the slots in even ranges,
// as `redis-cli --cluster create` does, gives each of up to 16 masters an
// even share of the channels, and of the events. TestChannelSlots checks
// them against the server's CLUSTER KEYSLOT.
func channel(i int) string {
	tags := [ChannelCount]string{
		"n10", "n21", "n61", "n1", "n11", "n20", "n60", "n0",
		"n12", "n23", "n63", "n3", "n13", "n22", "n62", "n2",
	}
	return "seckill:events:{" + tags[i] + "}"
}

// OrderJSON is the one mapping from an order to its API JSON object. The
// gateway's REST answers, the socket's snapshot and the pushed events all use
// it, so the status a shopper sees never depends on the path it came by.
// Times are in UTC.
func OrderJSON(o orders.Order) api.Order {
	a := api.Order{
		OrderID:     strconv.FormatInt(o.ID, 10),
		VoucherID:   strconv.FormatInt(o.VoucherID, 10),
		UserID:      strconv.FormatInt(o.UserID, 10),
		Quantity:    o.Quantity,
		AmountCents: o.AmountCents,
		Status:      string(o.Status),
		CreatedAt:   o.CreatedAt.UTC(),
	}
	if !o.PayDeadline.IsZero() {
		d := o.PayDeadline.UTC()
		a.PayDeadline = &d
	}
	if p := o.Payment; p != nil {
		a.Payment = &api.OrderPayment{PaymentID: p.ID, Provider: p.Provider, Status: string(p.Status),
			AmountCents: p.AmountCents, Currency: p.Currency}
	}
	return a
}

// OrderFrame encodes the {"type":"order","order":{...}} text frame for o.
// The gateway uses it for the snapshot it sends on connect, so snapshot
// frames and pushed frames are byte-for-byte the same shape.
func OrderFrame(o orders.Order) ([]byte, error) {
	a := OrderJSON(o)
	return encodeOrderFrame(&a)
}

func encodeOrderFrame(a *api.Order) ([]byte, error) {
	b, err := json.Marshal(api.Frame{Type: api.FrameOrder, Order: a})
	if err != nil {
		return nil, fmt.Errorf("notify: encode frame: %w", err)
	}
	return b, nil
}

// MaxClientMessage is the largest client message worth reading: the only one
// the protocol has is {"type":"ping"}. The gateway should set it as the
// socket's read limit.
const MaxClientMessage = 512

// ParseClientMessage returns the type of a message a client sent ("ping" is
// the only one the contract defines). Anything else is ErrInvalidInput, so the
// gateway can close the socket on garbage instead of guessing.
func ParseClientMessage(msg []byte) (string, error) {
	if len(msg) > MaxClientMessage {
		return "", fmt.Errorf("%w: client message over %d bytes", apperr.ErrInvalidInput, MaxClientMessage)
	}
	var f api.ClientFrame
	if err := json.Unmarshal(msg, &f); err != nil {
		return "", fmt.Errorf("%w: client message is not JSON", apperr.ErrInvalidInput)
	}
	if f.Type != api.FramePing {
		return "", fmt.Errorf("%w: unknown client message type %q", apperr.ErrInvalidInput, f.Type)
	}
	return f.Type, nil
}

// wireEvent is one event on the shard channels: {"order": {...}, "at": ...}.
// A message of a channel is one such object (Publish, or a batch's only
// event on that channel) or a JSON array of them (PublishBatch: a batch's
// events of that channel, in order); decodeMessage reads both, so
// publishers of either kind may share a fleet. It travels between the
// fleet's processes only; the order in it is the API's, so the frame a hub
// builds from it needs no mapping.
type wireEvent struct {
	Order api.Order `json:"order"`
	At    time.Time `json:"at"`
	// Trace is the change's traceparent, when it was traced (trace.go).
	Trace string `json:"traceparent,omitempty"`
}

// encodeEvent is the JSON object of e, as published on ChannelOf the buyer.
func encodeEvent(ctx context.Context, e orders.Event) ([]byte, error) {
	b, err := json.Marshal(wireEvent{Order: OrderJSON(e.Order), At: e.At.UTC(), Trace: traceOf(ctx, e.Order)})
	if err != nil {
		return nil, fmt.Errorf("notify: encode event: %w", err)
	}
	return b, nil
}

// inbound is one event read from a shard channel, with the buyer it is for.
type inbound struct {
	ev     wireEvent
	userID int64
}

// decodeMessage reads a message of a shard channel: one event object, or an
// array of them. It returns the well-formed events in the message's order,
// and an error for each element that is not one (wrapping
// apperr.ErrInvalidInput), so one bad element loses no other's event. A
// message that is not JSON at all is one error and no events: where one
// element's syntax breaks, no later element can be told apart.
func decodeMessage(payload string) ([]inbound, []error) {
	b := []byte(payload)
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) == 0 || t[0] != '[' {
		in, err := decodeEvent(b)
		if err != nil {
			return nil, []error{err}
		}
		return []inbound{in}, nil
	}
	// The array at once first: one pass over the bytes, as a lone event
	// costs. Only a message with an element of the wrong shape, which
	// json.Unmarshal reports without saying which, is read again element
	// by element.
	var list []wireEvent
	err := json.Unmarshal(b, &list)
	if err != nil {
		if _, wrongShape := errors.AsType[*json.UnmarshalTypeError](err); !wrongShape {
			return nil, []error{fmt.Errorf("%w: event array is not JSON: %w", apperr.ErrInvalidInput, err)}
		}
		return decodeEach(b)
	}
	return collect(len(list), func(i int) (inbound, error) { return checkEvent(list[i]) })
}

// decodeEach reads an array message whose elements are not all events,
// one element at a time, so each bad one is told apart from the others.
func decodeEach(b []byte) ([]inbound, []error) {
	var elems []json.RawMessage
	if err := json.Unmarshal(b, &elems); err != nil {
		return nil, []error{fmt.Errorf("%w: event array is not JSON: %w", apperr.ErrInvalidInput, err)}
	}
	return collect(len(elems), func(i int) (inbound, error) { return decodeEvent(elems[i]) })
}

// collect reads the n elements of an array message with read, keeping the
// events in order and an error, naming its element, for each bad one.
func collect(n int, read func(i int) (inbound, error)) ([]inbound, []error) {
	out := make([]inbound, 0, n)
	var errs []error
	for i := range n {
		in, err := read(i)
		if err != nil {
			errs = append(errs, fmt.Errorf("element %d of %d: %w", i, n, err))
			continue
		}
		out = append(out, in)
	}
	return out, errs
}

// decodeEvent reads one event object and the buyer it is for.
func decodeEvent(b []byte) (inbound, error) {
	var ev wireEvent
	if err := json.Unmarshal(b, &ev); err != nil {
		return inbound{}, fmt.Errorf("%w: not an event object: %w", apperr.ErrInvalidInput, err)
	}
	return checkEvent(ev)
}

// checkEvent finds the buyer of a decoded event, which must have one.
func checkEvent(ev wireEvent) (inbound, error) {
	userID, err := strconv.ParseInt(ev.Order.UserID, 10, 64)
	if err != nil || userID <= 0 {
		return inbound{}, fmt.Errorf("%w: event has bad user_id %q", apperr.ErrInvalidInput, ev.Order.UserID)
	}
	return inbound{ev: ev, userID: userID}, nil
}
