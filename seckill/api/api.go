// Package api is the vocabulary of the HTTP API: every object the API reads
// or answers with and every frame of its WebSocket, as Go types whose JSON
// is the one of gateway/openapi.yaml and gateway/wsframes.yaml. The
// gateway, notify (orders pushed on the socket) and the waiting room (places
// in line) all speak through these types, so an object reads the same
// whichever path it came by.
//
// The types are plain data: the mapping from a domain's values to them stays
// with the domain's face (the gateway's handlers, notify.OrderJSON,
// waitroom.QueueJSON), and the package imports nothing but the standard
// library, so every layer may use it (deploy/tools/depcheck keeps it so).
//
// The conventions of the API hold for every type: ids are decimal strings
// (browsers lose precision above 2^53), times are UTC, money is cents, and
// the values of an enumeration (a voucher's kind and state, an order's
// status, a place's state) are the strings the specification lists. On the
// way in, pointers tell a missing field from its zero value.
package api
