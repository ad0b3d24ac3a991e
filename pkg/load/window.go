package load

import "sync"

// windows stamps turns with the window in force when they are sent and
// tracks how many of each window are still in flight, for Watermark. The
// mutex is held for a few instructions per turn, never across I/O.
type windows struct {
	mu       sync.Mutex
	cur      uint32
	inflight map[uint32]int
	closed   bool // no turn will be sent any more
}

func newWindows(id uint32) *windows {
	return &windows{cur: id, inflight: make(map[uint32]int)}
}

// begin stamps a turn about to be sent and counts it in flight.
func (w *windows) begin() uint32 {
	w.mu.Lock()
	id := w.cur
	w.inflight[id]++
	w.mu.Unlock()
	return id
}

// end marks a turn of window id finished (after it was recorded).
func (w *windows) end(id uint32) {
	w.mu.Lock()
	if w.inflight[id]--; w.inflight[id] <= 0 {
		delete(w.inflight, id)
	}
	w.mu.Unlock()
}

// current returns the window in force.
func (w *windows) current() uint32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cur
}

// set moves to window id; ids that do not increase are ignored.
func (w *windows) set(id uint32) {
	w.mu.Lock()
	if id > w.cur {
		w.cur = id
	}
	w.mu.Unlock()
}

// close says no more turns will be sent, so the window in force can
// complete too.
func (w *windows) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}

// watermark returns the highest window W such that every turn sent in a
// window <= W has finished and been recorded. The window in force is never
// complete while turns may still be sent in it.
func (w *windows) watermark() (uint32, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	// hi is one past the candidate, so 0 means "none".
	hi := uint64(w.cur)
	if w.closed {
		hi++
	}
	for id := range w.inflight {
		if uint64(id) < hi {
			hi = uint64(id)
		}
	}
	if hi == 0 {
		return 0, false
	}
	return uint32(hi - 1), true
}
