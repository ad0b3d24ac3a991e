package record

// MaxWorkers bounds the workers a window keeps by name; requests of
// further workers are counted under OtherWorker, so a server that names a
// new worker per request cannot grow a window without bound.
const MaxWorkers = 256

// OtherWorker is the name the requests of workers past MaxWorkers are
// counted under.
const OtherWorker = "(other)"

// WorkerStat is what one worker, named by the response header the client
// reads (client.Result.Worker), served in a window: successful requests
// and their prompt tokens.
type WorkerStat struct {
	Requests     int64 `json:"requests"`
	PromptTokens int64 `json:"prompt_tokens"`
}

// addWorker counts one successful request of worker; "" (no header) is
// not counted.
func (w *Window) addWorker(worker string, promptTokens int64) {
	w.mergeWorker(worker, WorkerStat{Requests: 1, PromptTokens: promptTokens})
}

// mergeWorker adds s to worker's counts.
func (w *Window) mergeWorker(worker string, s WorkerStat) {
	if worker == "" {
		return
	}
	if w.Workers == nil {
		w.Workers = make(map[string]*WorkerStat)
	}
	ws := w.Workers[worker]
	if ws == nil {
		named := len(w.Workers)
		if w.Workers[OtherWorker] != nil {
			named--
		}
		if named >= MaxWorkers {
			worker = OtherWorker
			ws = w.Workers[worker]
		}
		if ws == nil {
			ws = &WorkerStat{}
			w.Workers[worker] = ws
		}
	}
	ws.Requests += s.Requests
	ws.PromptTokens += s.PromptTokens
}

// AddWorkers merges per-worker counts into w (a report's, a saved
// point's).
func (w *Window) AddWorkers(ws map[string]WorkerStat) {
	for name, s := range ws {
		w.mergeWorker(name, s)
	}
}
