package pty

// memory remembers the most recent max keys (with a value each), forgetting
// the oldest first. It is not safe for concurrent use.
type memory struct {
	max  int
	keys []string // ring, oldest at next once full
	next int
	m    map[string]string
}

func newMemory(max int) *memory {
	return &memory{max: max, m: make(map[string]string)}
}

func (r *memory) put(k, v string) {
	if _, ok := r.m[k]; ok {
		r.m[k] = v
		return
	}
	if len(r.keys) < r.max {
		r.keys = append(r.keys, k)
	} else {
		delete(r.m, r.keys[r.next])
		r.keys[r.next] = k
		r.next = (r.next + 1) % r.max
	}
	r.m[k] = v
}

func (r *memory) get(k string) (string, bool) {
	v, ok := r.m[k]
	return v, ok
}

func (r *memory) len() int { return len(r.m) }
