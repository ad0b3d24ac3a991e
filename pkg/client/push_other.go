//go:build !unix

package client

// readPush reads the stream with blocking reads where RawConn reads are not
// available.
func (r *run) readPush(st *streamState, x *exchange) {
	st.rd.Reset(&st.body)
	r.read(st)
}
