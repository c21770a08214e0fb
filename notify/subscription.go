package notify

// The hub's side that faces one buyer: a Subscription per socket, and the
// frames this instance delivers to the buyers it holds.

// Subscribe opens a subscription to userID's order events. It never fails
// outright: when the hub is full or stopped, the returned subscription has
// already ended and Err says why (ErrHubFull, ErrStopped), so the gateway
// can answer the handshake with 503. Subscribe before reading the snapshot
// from the store, so that no change falls between the two.
func (h *Hub) Subscribe(userID int64) *Subscription {
	s := &Subscription{
		hub:    h,
		userID: userID,
		c:      make(chan []byte, h.opts.BufferSize),
		done:   make(chan struct{}),
		resync: make(chan struct{}, 1),
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.state == hubStopped:
		s.end(ErrStopped)
		return s
	case h.total >= h.opts.MaxSubscriptions:
		h.m.drops.WithLabelValues(dropRefused).Inc()
		s.end(ErrHubFull)
		return s
	}
	if list := h.subs[userID]; len(list) >= h.opts.MaxPerUser {
		h.m.drops.WithLabelValues(dropReplaced).Inc()
		h.endLocked(list[0], ErrReplaced)
	}
	h.subs[userID] = append(h.subs[userID], s)
	h.total++
	h.m.open.Inc()
	return s
}

// closeAll ends every subscription with err.
func (h *Hub) closeAll(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, list := range h.subs {
		for _, s := range list {
			h.endLocked(s, err)
		}
	}
}

// endLocked removes s from the hub and ends it. h.mu is held.
func (h *Hub) endLocked(s *Subscription, err error) {
	if s.ended {
		return
	}
	list := h.subs[s.userID]
	for i, x := range list {
		if x == s {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(h.subs, s.userID)
	} else {
		h.subs[s.userID] = list
	}
	h.total--
	h.m.open.Dec()
	s.end(err)
}

// Subscription is one socket's feed of its user's order events.
type Subscription struct {
	hub    *Hub
	userID int64
	c      chan []byte
	done   chan struct{}
	resync chan struct{}

	// Guarded by hub.mu: dispatch sends on c under the same lock, so c is
	// never closed under a sender.
	ended bool
	err   error
}

// end closes the channels. hub.mu is held (or s was never shared).
func (s *Subscription) end(err error) {
	s.ended = true
	s.err = err
	close(s.c)
	close(s.done)
}

// UserID is the user whose events this subscription receives.
func (s *Subscription) UserID() int64 { return s.userID }

// C yields ready-to-write text frames {"type":"order","order":{...}}. The
// slices are shared between subscriptions: write them, never modify them.
// C is closed when the subscription ends; frames buffered before that are
// still read first. A reader must keep up: when BufferSize frames wait
// unread, the subscription ends with ErrSlowConsumer.
func (s *Subscription) C() <-chan []byte { return s.c }

// Done is closed when the subscription ends, for whatever reason.
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Resync receives a signal when the hub had to subscribe to Redis again,
// so events may have been missed: the gateway should send the user's
// snapshot again.
func (s *Subscription) Resync() <-chan struct{} { return s.resync }

// Err is why the hub ended the subscription: ErrSlowConsumer, ErrReplaced,
// ErrHubFull or ErrStopped. It is nil while the subscription is open and
// after the owner's own Close.
func (s *Subscription) Err() error {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	return s.err
}

// Close ends the subscription and frees its place. Safe to call more than
// once and after the hub ended it.
func (s *Subscription) Close() {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	s.hub.endLocked(s, nil)
}

// Connected reports whether userID has a subscription on this instance.
func (h *Hub) Connected(userID int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs[userID]) > 0
}

// Deliver hands frame to every subscription of userID on this instance, as
// an order event is handed (never blocking: a full buffer ends that
// subscription), and reports whether there was one. Other feeds to the
// user's socket (the waiting room's queue frames) go through it, so the
// socket keeps one writer and one buffer.
func (h *Hub) Deliver(userID int64, frame []byte) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	list := h.subs[userID]
	if len(list) == 0 {
		return false
	}
	var slow []*Subscription
	for _, s := range list {
		select {
		case s.c <- frame:
			h.m.pushes.Inc()
		default:
			slow = append(slow, s)
		}
	}
	for _, s := range slow {
		h.m.drops.WithLabelValues(dropSlow).Inc()
		h.endLocked(s, ErrSlowConsumer)
	}
	return true
}
