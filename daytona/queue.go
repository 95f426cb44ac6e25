package daytona

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// RequestQueue bounds how many requests the clients sharing it have in
// flight to each Daytona host, and serves the requests that wait for a
// free slot oldest work first.
//
// Without it, a burst of commands sends every request at once: each opens a
// connection of its own (and its buffers), the host works on all of them at
// once, and the replies of the first commands wait behind the dispatches of
// the last ones, so that every command completes at the end of the burst.
// With it, at most the bound are in flight per host, connections are reused,
// and a command that began earlier (WithWorkStart) has its next request
// served before the first request of a command that began later: commands
// complete steadily, in about the order they came.
//
// Only short exchanges take a slot: a request and its response, the dial of
// a prepared log-stream connection, a WebSocket handshake. What lives long
// does not (a followed log stream or a terminal after its handshake, a
// streamed upload or download, a synchronous execute, which is answered
// when its command ends), so it can neither starve short requests nor
// wait, holding a slot, for a request stuck behind it. A slot is always
// given back when its exchange ends, whatever the caller does next.
type RequestQueue struct {
	perHost int

	mu    sync.Mutex
	hosts map[string]*hostSlots
	seq   uint64 // arrival order, for ties between equal work starts
}

// hostSlots is one host's slots in use and the requests waiting for one.
type hostSlots struct {
	busy    int
	waiting waiters
}

// NewRequestQueue returns a queue allowing perHost requests in flight to
// each host (DefaultMaxRequestsPerHost when perHost <= 0).
func NewRequestQueue(perHost int) *RequestQueue {
	if perHost <= 0 {
		perHost = DefaultMaxRequestsPerHost
	}
	return &RequestQueue{perHost: perHost, hosts: map[string]*hostSlots{}}
}

type workStartKey struct{}

// WithWorkStart marks the requests made with ctx as part of work that began
// at start (the arrival of the host's request, say): when requests wait for
// a slot to a host, those of older work go first. Requests whose context
// carries no start count from the moment they ask for a slot.
func WithWorkStart(ctx context.Context, start time.Time) context.Context {
	return context.WithValue(ctx, workStartKey{}, start)
}

func workStart(ctx context.Context) time.Time {
	if t, ok := ctx.Value(workStartKey{}).(time.Time); ok && !t.IsZero() {
		return t
	}
	return time.Now()
}

// acquire waits for a slot to host and returns the function that gives it
// back (call it exactly once). It fails only when ctx ends first.
func (q *RequestQueue) acquire(ctx context.Context, host string) (release func(), err error) {
	if q == nil {
		return func() {}, nil
	}
	start := workStart(ctx)
	q.mu.Lock()
	h := q.hosts[host]
	if h == nil {
		h = &hostSlots{}
		q.hosts[host] = h
	}
	if h.busy < q.perHost && len(h.waiting) == 0 {
		h.busy++
		q.mu.Unlock()
		return q.releaser(host), nil
	}
	q.seq++
	w := &waiter{start: start, seq: q.seq, ready: make(chan struct{})}
	heap.Push(&h.waiting, w)
	q.mu.Unlock()

	select {
	case <-w.ready:
		return q.releaser(host), nil
	case <-ctx.Done():
	}
	q.mu.Lock()
	if w.index >= 0 {
		heap.Remove(&h.waiting, w.index)
		q.mu.Unlock()
		return nil, ctx.Err()
	}
	// The slot was handed over as ctx ended: pass it on.
	q.mu.Unlock()
	q.releaser(host)()
	return nil, ctx.Err()
}

// releaser returns the function that gives one slot to host back: to the
// oldest waiting request if there is one, else to the pool.
func (q *RequestQueue) releaser(host string) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			q.mu.Lock()
			defer q.mu.Unlock()
			h := q.hosts[host]
			if len(h.waiting) > 0 {
				w := heap.Pop(&h.waiting).(*waiter)
				close(w.ready)
				return
			}
			h.busy--
			if h.busy == 0 {
				delete(q.hosts, host)
			}
		})
	}
}

// queued reports how many requests wait for a slot to host (for tests).
func (q *RequestQueue) queued(host string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if h := q.hosts[host]; h != nil {
		return len(h.waiting)
	}
	return 0
}

// waiter is a request waiting for a slot. index is its place in the heap,
// -1 once it has been given a slot.
type waiter struct {
	start time.Time
	seq   uint64
	ready chan struct{}
	index int
}

// waiters is a min-heap: the oldest work first, then the first to ask.
type waiters []*waiter

func (w waiters) Len() int { return len(w) }
func (w waiters) Less(i, j int) bool {
	if !w[i].start.Equal(w[j].start) {
		return w[i].start.Before(w[j].start)
	}
	return w[i].seq < w[j].seq
}
func (w waiters) Swap(i, j int) {
	w[i], w[j] = w[j], w[i]
	w[i].index, w[j].index = i, j
}
func (w *waiters) Push(x any) {
	it := x.(*waiter)
	it.index = len(*w)
	*w = append(*w, it)
}
func (w *waiters) Pop() any {
	old := *w
	n := len(old)
	it := old[n-1]
	old[n-1] = nil
	it.index = -1
	*w = old[:n-1]
	return it
}
